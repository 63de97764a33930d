"""Runs against one real Chroma server (``chroma run``, started here) keep their abstracts apart."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from contextevolve.api import evolve
from contextevolve.memory.store import SERVER_COLLECTION_PREFIX, close_memory, open_memory
from tests.unit.test_endpoint_faults import free_port

CHROMA = shutil.which("chroma", path=str(Path(sys.executable).parent)) or shutil.which("chroma")


@pytest.fixture(scope="module")
def chroma_server(tmp_path_factory):
    """``http://127.0.0.1:PORT`` of a Chroma server on a fresh store, stopped after the module."""
    if CHROMA is None:
        pytest.fail("the `chroma` command (chromadb's server) is not installed")
    import chromadb

    port, store = free_port(), tmp_path_factory.mktemp("chroma-server")
    log = (store / "server.log").open("w")
    server = subprocess.Popen([CHROMA, "run", "--path", str(store / "db"), "--host", "127.0.0.1",
                               "--port", str(port)], stdout=log, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 60
    while True:
        try:
            chromadb.HttpClient(host="127.0.0.1", port=port).heartbeat()
            break
        except Exception:  # noqa: BLE001 - not up yet
            if server.poll() is not None or time.monotonic() > deadline:
                server.kill()
                pytest.fail(f"chroma run did not start: {(store / 'server.log').read_text()[-2000:]}")
            time.sleep(0.5)
    yield f"http://127.0.0.1:{port}"
    server.terminate()
    server.wait(timeout=30)
    log.close()


def _abstracts(run_dir: Path) -> dict[str, str]:
    """Program id -> abstract of the committed programs in ``run_dir``'s ``programs.jsonl``."""
    records = [json.loads(line) for line in (run_dir / "programs.jsonl").read_text().splitlines()]
    return {r["id"]: r["abstract"] for r in records if r["committed"]}


def test_two_runs_on_one_server_keep_separate_records(tmp_path, models, chroma_server):
    import chromadb

    first, second = tmp_path / "first", tmp_path / "second"
    for run_dir, iterations in ((first, 2), (second, 3)):
        result = evolve("model_placement", iterations=iterations, run_dir=run_dir, chroma_url=chroma_server,
                        max_retries=0)
        assert result.iterations == iterations
    client = chromadb.HttpClient(host="127.0.0.1", port=int(chroma_server.rsplit(":", 1)[1]))
    stored = {}
    for run_dir in (first, second):
        name = SERVER_COLLECTION_PREFIX + open_memory(run_dir).buffer.run_id()
        close_memory(run_dir)
        got = client.get_collection(name).get(include=["documents"])
        stored[run_dir.name] = dict(zip(got["ids"], got["documents"]))
        # the collection holds exactly this run's committed programs, with this run's abstracts
        assert stored[run_dir.name] == _abstracts(run_dir)
    assert len(stored["first"]) == 3 and len(stored["second"]) == 4  # same ids it00000..., kept apart
    names = {c.name if hasattr(c, "name") else c for c in client.list_collections()}
    assert len({n for n in names if n.startswith(SERVER_COLLECTION_PREFIX)}) == 2

    # resumed with a larger budget, the first run finds its own collection again and adds to it
    evolve(iterations=3, run_dir=first, resume=True)  # the server comes from the run's stored settings
    name = SERVER_COLLECTION_PREFIX + open_memory(first).buffer.run_id()
    close_memory(first)
    assert (set(client.get_collection(name).get()["ids"]) == set(_abstracts(first))
            and len(_abstracts(first)) == 4)
    again = client.get_collection(SERVER_COLLECTION_PREFIX + open_memory(second).buffer.run_id()).get(
        include=["documents"])
    close_memory(second)
    assert dict(zip(again["ids"], again["documents"])) == stored["second"]  # untouched by the first run


def test_the_run_id_is_drawn_once_and_kept(tmp_path):
    memory = open_memory(tmp_path / "r")
    drawn = memory.buffer.run_id()
    assert len(drawn) == 32 and memory.buffer.run_id() == drawn
    close_memory(tmp_path / "r")
    assert open_memory(tmp_path / "r").buffer.run_id() == drawn  # kept in buffer.sqlite
    close_memory(tmp_path / "r")
    assert open_memory(tmp_path / "other").buffer.run_id() != drawn
    close_memory(tmp_path / "other")
