"""Stepping through a run served by ``langgraph dev`` with the LangGraph SDK.

The test starts ``langgraph dev`` (in-memory runtime, offline) on this repository's
``langgraph.json`` and drives it through ``langgraph_sdk``: each worker of a run is a thread; one
interrupted before ``generate`` shows its guidance in the thread's state, resumes and completes its
iterations; a thread cannot be driven with another run's settings, and a second thread on a run
directory joins it as another worker. (``langgraph dev`` itself drops context keys that are not
RunContext fields, before the run starts; the Python API and the CLI refuse them.) The models are a
fake OpenAI-compatible endpoint (the generator's replies are real programs, evaluated for real),
reached over HTTP like any user's endpoint.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from contextevolve.memory.buffer import EvolveBuffer
from tests.unit.test_endpoint_faults import FakeEndpoint, free_port, healthy

ROOT = Path(__file__).resolve().parents[2]
LANGGRAPH = Path(sys.executable).parent / "langgraph"
STARTUP_S = 90

pytestmark = pytest.mark.skipif(not LANGGRAPH.exists() and not shutil.which("langgraph"),
                                reason="langgraph-cli[inmem] is not installed (pip install -e '.[dev]')")


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    """``langgraph dev`` serving the repository's graph; yields its URL."""
    from langgraph_sdk import get_sync_client

    work = tmp_path_factory.mktemp("langgraph-dev")
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("CONTEXTEVOLVE_")}
    env.update(LANGGRAPH_CLI_NO_ANALYTICS="1", PYTHONPATH=str(ROOT), CONTEXTEVOLVE_API_KEY="sk-test")
    # the repository's langgraph.json with its paths made absolute: the server keeps its state in
    # its working directory (.langgraph_api/), which is this test's, not the repository
    config = json.loads((ROOT / "langgraph.json").read_text())
    config["dependencies"] = [str((ROOT / d).resolve()) for d in config["dependencies"]]
    config["graphs"] = {name: str((ROOT / spec).resolve()) if ":" not in spec else
                        f"{(ROOT / spec.split(':')[0]).resolve()}:{spec.split(':')[1]}"
                        for name, spec in config["graphs"].items()}
    (work / "langgraph.json").write_text(json.dumps(config))
    log = open(work / "server.log", "w")
    cmd = [str(LANGGRAPH if LANGGRAPH.exists() else shutil.which("langgraph")), "dev", "--no-browser",
           "--no-reload", "--port", str(port), "--config", str(work / "langgraph.json")]
    proc = subprocess.Popen(cmd, cwd=work, env=env, stdout=log, stderr=subprocess.STDOUT,
                            start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + STARTUP_S
    while True:
        try:
            get_sync_client(url=url, timeout=2).assistants.search(graph_id="contextevolve")
            break
        except Exception:
            if proc.poll() is not None or time.monotonic() > deadline:
                proc.kill()
                pytest.fail(f"langgraph dev did not start: {(work / 'server.log').read_text()[-2000:]}")
            time.sleep(0.5)
    yield url
    os.killpg(proc.pid, 9)
    proc.wait()
    log.close()


@pytest.fixture
def endpoint():
    fake = FakeEndpoint(healthy)
    yield fake
    fake.close()


@pytest.mark.parametrize("workers", [1, 2])
def test_a_served_worker_pauses_before_generate_shows_the_guidance_and_completes(server, endpoint, tmp_path,
                                                                                 workers):
    from langgraph_sdk import get_sync_client

    client = get_sync_client(url=server, timeout=120)
    threads = [client.threads.create()["thread_id"] for _ in range(workers)]  # one thread per worker
    run_dir = tmp_path / "run"
    # (the Summarizer in each worker's order, so that a worker's second iteration sees its first child; one
    # child per prompt, so that the second iteration has a generate to pause before)
    context = {"run_dir": str(run_dir), "max_iterations": 2 * workers,
               "parallelism": {"workers": workers, "summarize_behind": False},
               "llm": {"base_url": endpoint.url, "model": "ctx", "models": {"generator": "gen"},
                       "max_retries": 0},
               "search": {"samples_per_prompt": 1}}
    for thread in threads:
        client.runs.wait(thread, "contextevolve", input={}, context=context, interrupt_before=["generate"])
    first = [client.threads.get_state(t) for t in threads]
    assert [s["next"] for s in first] == [["generate"]] * workers
    assert sorted(s["values"]["worker"] for s in first) == list(range(workers))
    # the first iterations have no step to learn from: the Navigator is not asked, the guidance is empty
    assert all(s["values"]["parent_id"] == "it00000" and s["values"]["guidance"] == "" for s in first)
    assert endpoint.requests(model="gen") == 0  # paused before any generation
    for thread in threads:
        client.runs.wait(thread, "contextevolve", input=None, context=context, interrupt_before=["generate"])
    paused = [client.threads.get_state(t) for t in threads]
    assert [s["next"] for s in paused] == [["generate"]] * workers
    assert all(s["values"]["guidance"].startswith("Greedy placement by KVPR") for s in paused)  # the fake's
    # the first iterations' only (the fake Generator writes one program: a worker's child committed after
    # another's is a twin, and the Generator is asked once more)
    assert workers <= endpoint.requests(model="gen") <= 2 * workers - 1

    for thread in threads:
        client.runs.wait(thread, "contextevolve", input=None, context=context)
    done = [client.threads.get_state(t) for t in threads]
    assert all(s["next"] == [] and "iteration budget" in s["values"]["stop_reason"] for s in done)
    assert sum(s["values"]["committed"] for s in done) == 2 * workers
    # the fake Generator writes one program: the later first versions are twins, asked again
    assert endpoint.requests(model="gen") >= 2 * workers
    buffer = EvolveBuffer(run_dir / "buffer.sqlite")
    try:
        first_children = [buffer.require(s["values"]["child_id"]) for s in first]
        children = [buffer.require(s["values"]["child_id"]) for s in paused]
        assert buffer.count() == 1 + 2 * workers
    finally:
        buffer.close()
    assert first_children[0].status == "ok" and all(c.guidance == "" for c in first_children)
    assert [c.guidance for c in children] == [s["values"]["guidance"] for s in paused]
    assert all(c.committed for c in children)


def test_a_served_thread_refuses_another_runs_settings_and_a_second_thread_joins_as_a_worker(server, endpoint,
                                                                                            tmp_path):
    from langgraph_sdk import get_sync_client

    client = get_sync_client(url=server, timeout=120)
    thread = client.threads.create()["thread_id"]
    context = {"run_dir": str(tmp_path / "run"), "max_iterations": 1,
               "llm": {"base_url": endpoint.url, "model": "ctx", "models": {"generator": "gen"},
                       "max_retries": 0}}
    client.runs.wait(thread, "contextevolve", input={}, context=context)
    other = {**context, "run_dir": str(tmp_path / "default")}
    refused = client.runs.wait(thread, "contextevolve", input={}, context=other,
                               raise_error=False)["__error__"]
    assert (refused["error"] == "ThreadMismatchError"
            and f"drives the model_placement run in {context['run_dir']}" in refused["message"])
    assert not (tmp_path / "default").exists()
    second = client.threads.create()["thread_id"]
    client.runs.wait(second, "contextevolve", input={}, context=context)
    joined = client.threads.get_state(second)["values"]
    assert joined["worker"] == 1 and "iteration budget" in joined["stop_reason"]  # the budget was claimed
    buffer = EvolveBuffer(tmp_path / "run" / "buffer.sqlite")
    try:
        assert buffer.count() == 2  # c_0 and the one child: nothing added or lost
        assert buffer.worker_threads() == {0: thread, 1: second}
    finally:
        buffer.close()
