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


@pytest.fixture(autouse=True)
def one_child_per_prompt(monkeypatch):
    """Unit tests script one reply per request, in order: they ask one child per prompt.

    The run's default (``search.samples_per_prompt`` 3) would send every scripted reply list through three
    children per prompt; a test that names ``samples_per_prompt`` gets what it names
    (tests/unit/test_samples_per_prompt.py), and the integration tests and the crash runners' subprocesses
    run the default.
    """
    from contextevolve import flags
    from contextevolve.graph import typed
    from contextevolve.graph.settings import SearchSettings

    # pydantic's validators and the flags' JSON schema copy a field's default when they are built; both are
    # cached, so they are rebuilt on each side of the patch (an integration test run earlier in the same
    # process built them at the run's default).
    caches = (typed._adapter, flags._fields)
    for cache in caches:
        cache.cache_clear()
    monkeypatch.setitem(SearchSettings.__init__.__kwdefaults__, "samples_per_prompt", 1)
    monkeypatch.setattr(SearchSettings.__dataclass_fields__["samples_per_prompt"], "default", 1)
    yield
    for cache in caches:
        cache.cache_clear()
