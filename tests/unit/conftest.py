"""Unit-test guard: the embedded LLM is never started here (it is for the integration tests).

A unit test that reached it would load a 1 GB model (about a minute) and keep it until the test
process ends.
"""

from __future__ import annotations

import pytest

from contextevolve.llm import embedded

REAL_LAUNCH = embedded.EmbeddedServer.launch
"""The unguarded launch (every start goes through it), for a test that starts a server on a file that is
not a model (it exits at once)."""


@pytest.fixture(autouse=True)
def no_embedded_llm(monkeypatch):
    def refuse(self) -> None:
        raise AssertionError("a unit test tried to start the embedded LLM: script the models "
                             "(tests/fakes.py) or give the run a fake endpoint")
    monkeypatch.setattr(embedded.EmbeddedServer, "launch", refuse)
