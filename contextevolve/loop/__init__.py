"""What the nodes share and are not nodes themselves.

The run's resources, stop rules, thread identity, the search policy, Generator requests, and the
Summarizer's calls behind its worker.
"""
