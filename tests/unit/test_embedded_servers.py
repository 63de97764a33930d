"""The process-wide embedded servers: one per key, launched side by side, all stopped together."""

from __future__ import annotations

import pytest

from contextevolve.llm import embedded


class FakeServer:
    """Stands in for :class:`embedded.EmbeddedServer`: records launches, waits and stops.

    The server whose number is in ``FakeServer.broken`` exits at start.
    """

    made: list[FakeServer] = []
    broken: set[int] = set()
    events: list[str] = []

    def __init__(self, slots: int = 1):
        self.number, self.alive, self.slots = len(FakeServer.made), False, slots
        self.base_url = f"http://127.0.0.1:{9000 + self.number}/v1"
        FakeServer.made.append(self)

    def launch(self):
        FakeServer.events.append(f"launch {self.number}")
        self.alive = True

    def wait_ready(self, timeout_s: float = 300.0) -> str:
        FakeServer.events.append(f"wait {self.number}")
        if self.number in FakeServer.broken:
            self.alive = False
            raise embedded.EmbeddedModelError(f"embedded LLM server exited with code 1: server {self.number}")
        return self.base_url

    def running(self) -> bool:
        return self.alive

    def stop(self):
        FakeServer.events.append(f"stop {self.number}")
        self.alive = False


@pytest.fixture
def fake_servers(monkeypatch):
    FakeServer.made, FakeServer.broken, FakeServer.events = [], set(), []
    monkeypatch.setattr(embedded, "EmbeddedServer", FakeServer)
    monkeypatch.setattr(embedded, "_servers", {})
    yield FakeServer
    embedded.stop_shared_server()


def test_servers_are_launched_side_by_side_once_per_key_and_stopped_together(fake_servers):
    embedded.start_shared_servers(["navigator", "generator", "navigator"])
    # both launched before either is waited for: they load the model at the same time
    assert fake_servers.events == ["launch 0", "launch 1", "wait 0", "wait 1"]
    navigator = embedded.shared_server("navigator")
    assert navigator.base_url == "http://127.0.0.1:9000/v1"
    assert embedded.shared_server("generator").base_url == "http://127.0.0.1:9001/v1"
    assert len(fake_servers.made) == 2  # asking again starts nothing
    # the shared one, on first use
    assert embedded.shared_server(slots=4).base_url == "http://127.0.0.1:9002/v1"
    # one slot per worker of the run asking
    assert [server.slots for server in fake_servers.made] == [1, 1, 4]
    assert embedded.shared_server(slots=2).slots == 4  # a running server keeps its slots
    navigator.alive = False  # a server that died is started again when asked for
    assert embedded.shared_server("navigator").base_url == "http://127.0.0.1:9003/v1"
    embedded.stop_shared_server()
    assert not any(server.alive for server in fake_servers.made)


def test_a_server_that_fails_to_start_stops_the_others_launched_with_it(fake_servers):
    embedded.start_shared_servers(["summarizer"])
    fake_servers.broken = {2}
    with pytest.raises(embedded.EmbeddedModelError, match="server 2"):
        embedded.start_shared_servers(["navigator", "generator"])
    made = fake_servers.made
    assert not made[1].alive and not made[2].alive  # launched by the failed call: stopped
    assert made[0].alive  # started before: still serving
    fake_servers.broken = set()
    # a later call starts anew
    assert embedded.shared_server("navigator").base_url == "http://127.0.0.1:9003/v1"
