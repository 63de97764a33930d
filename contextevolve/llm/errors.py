"""The error the embedded model raises.

Shared by :mod:`contextevolve.llm.embedded` (which re-exports it) and :mod:`contextevolve.llm.server_flags`.
"""


class EmbeddedModelError(RuntimeError):
    """The embedded model could not be assembled, verified or served."""
