"""The real compiled graph against the real embedded LLM (Qwen2.5-Coder-1.5B, llama.cpp) on Model Placement.

Slow (minutes on 2 cores). Needs the ``[embedded]`` extra, which ``make test`` installs.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
import urllib.request
import uuid
from pathlib import Path

import pytest

from contextevolve.api import evolve, run_status
from contextevolve.evaluation.cleanup import environ_value
from contextevolve.graph.context import RunContext
from contextevolve.llm import embedded, server_flags
from contextevolve.llm.models import embedded_server_keys
from contextevolve.memory.buffer import EvolveBuffer
from contextevolve.tasks.registry import get_task

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(not embedded.installed(),
                       reason="embedded LLM not installed (pip install -e '.[embedded]')"),
]
ROOT = Path(__file__).resolve().parents[2]
TASK = get_task("model_placement")
SERVERS = len(embedded_server_keys(RunContext()))  # a default run's embedded servers
MARK = "CONTEXTEVOLVE_TEST_MARK"  # environment variable naming the test that started a run


def llama_servers(mark: str) -> list[int]:
    """Pids of running llama.cpp servers started by a run that carried ``mark`` in its environment.

    The server inherits its run's environment, so a test sets a mark of its own before the run and
    looks only for servers carrying it: a run started by anyone else on the machine (a benchmark
    during CI) has no mark and is never taken for a server the test's own run left behind.
    """
    pids = []
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit() and environ_value(proc.name, MARK) == mark:
            try:
                cmd = (proc / "cmdline").read_bytes().split(b"\0")
                state = (proc / "stat").read_text().rsplit(")", 1)[1].split()[0]
            except OSError:
                continue
            server = b"llama_cpp.server" in cmd or cmd[0].endswith(b"llama-server")
            if server and embedded.MODEL_FILE.encode() in b" ".join(cmd) and state != "Z":
                pids.append(int(proc.name))
    return pids


def test_two_real_iterations_on_model_placement(tmp_path, monkeypatch):
    mark = uuid.uuid4().hex
    monkeypatch.setenv(MARK, mark)  # the embedded server started by evolve() inherits it
    # at each node's start: how many servers carrying the mark ran? (0: the last check proves nothing)
    seen = []
    result = evolve("model_placement", iterations=2, run_dir=tmp_path / "run", seed=1,
                    on_phase=lambda node, child: seen.append(len(llama_servers(mark))))
    # the Navigator's, the Generator's and the one the others share (one worker), all started before the
    # first node
    assert SERVERS == 3 and set(seen) == {SERVERS}, (
        f"the run's {SERVERS} servers must carry the test's mark: {seen}")
    assert result.iterations == 2 and result.programs == 3
    assert result.initial_score == pytest.approx(21.8916, abs=1e-4)
    # every score is the evaluator's: recompute the best from its stored source
    assert result.best_score == pytest.approx(TASK.evaluate(result.best_program).combined_score)
    buffer = EvolveBuffer(tmp_path / "run" / "buffer.sqlite")
    records = buffer.committed()
    buffer.close()
    assert [r.id for r in records] == ["it00000", "it00001", "it00002"]
    for record in records:
        assert record.status in ("ok", "invalid", "failed", "timeout")
        assert len(record.abstract) > 20, record.abstract
        if record.status != "ok":
            assert record.reason
    # three children per prompt (the default): both children are replies to one prompt, read once; a reply
    # that copied a program was asked again (its mutation names the change asked for), and that second ask's
    # prompt is its child's
    first, second = records[1:]
    assert first.parent_id == second.parent_id == "it00000" and second.sibling_of == first.id
    assert first.tokens["generator"]["prompt"] > 300
    assert (second.tokens["generator"].get("prompt", 0) > 0) == bool(second.mutation), second.tokens
    assert first.tokens["generator"]["completion"] > 0 and second.tokens["generator"]["completion"] > 0
    assert "navigator" not in first.tokens and not first.guidance  # no step yet: the Navigator is not asked
    assert records[0].tokens["summarizer"]["completion"] > 0
    assert result.tokens == run_status(tmp_path / "run")["tokens"]
    assert not llama_servers(mark), "the embedded server must be stopped at the end of the run"


def test_the_default_server_drafts_what_a_reply_copies_from_its_prompt(monkeypatch):
    """Where ``make setup`` built llama.cpp's own server it is the default, and it drafts from the prompt.

    It drafts tokens from the conversation: asked to write out the program in its prompt, most of the
    reply's tokens were drafted and accepted, and the reply holds the program's lines.
    """
    monkeypatch.delenv("CONTEXTEVOLVE_LLAMA_SERVER", raising=False)
    monkeypatch.delenv("CONTEXTEVOLVE_SPECULATIVE", raising=False)
    if server_flags.server_kind() != "native":
        pytest.skip("llama.cpp's llama-server is not built (make native-server)")
    program = TASK.initial_program
    body = {"model": embedded.MODEL_ALIAS, "max_tokens": 160, "temperature": 0.8, "top_p": embedded.TOP_P,
            "top_k": embedded.TOP_K, "seed": 0,
            "messages": [{"role": "system", "content": "You copy programs exactly."},
                         {"role": "user",
                          "content": f"Write out this program unchanged:\n```python\n{program}```"}]}
    with embedded.EmbeddedServer() as server:
        request = urllib.request.Request(f"{server.base_url}/chat/completions", json.dumps(body).encode(),
                                         {"Content-Type": "application/json"})
        with urllib.request.urlopen(request, timeout=600) as resp:
            reply = json.load(resp)
    timings, text = reply["timings"], reply["choices"][0]["message"]["content"]
    assert reply["usage"]["completion_tokens"] >= 100
    assert timings["draft_n_accepted"] >= reply["usage"]["completion_tokens"] // 2, timings
    assert "def compute_model_placement(gpu_num, models):" in text


def test_two_workers_decoded_together_by_llama_cpps_own_server(tmp_path, monkeypatch):
    """``CONTEXTEVOLVE_LLAMA_SERVER=native`` and two workers: one two-slot llama-server serves the run.

    Both workers' requests are decoded at the same time, and both children are the evaluator's.
    """
    monkeypatch.setenv("CONTEXTEVOLVE_LLAMA_SERVER", "native")
    try:
        server_flags.native_binary()
    except embedded.EmbeddedModelError:
        pytest.skip("llama.cpp's llama-server is not built (make native-server)")
    mark = uuid.uuid4().hex
    monkeypatch.setenv(MARK, mark)
    busy, done = [], threading.Event()

    def watch_slots() -> None:  # the most slots decoding at once, polled from the server
        while not done.wait(0.5):
            server = embedded._servers.get(embedded.SHARED)
            try:
                with urllib.request.urlopen(f"{server.base_url.removesuffix('/v1')}/slots",
                                            timeout=2) as resp:
                    busy.append(sum(slot["is_processing"] for slot in json.load(resp)))
            except (AttributeError, OSError, ValueError, embedded.EmbeddedModelError):
                pass

    watcher = threading.Thread(target=watch_slots, daemon=True)
    watcher.start()
    servers = []
    try:
        # (one child per prompt: each worker makes one of the two children)
        result = evolve("txn_scheduling", iterations=2, workers=2, run_dir=tmp_path / "run", seed=1,
                        samples_per_prompt=1,
                        on_phase=lambda node, child: servers.append(len(llama_servers(mark))))
    finally:
        done.set()
        watcher.join()
    assert set(servers) == {1}, f"one llama-server must serve both workers: {servers}"
    assert max(busy, default=0) == 2, f"the two workers' requests must be decoded together: {busy}"
    task = get_task("txn_scheduling")
    buffer = EvolveBuffer(tmp_path / "run" / "buffer.sqlite")
    records = buffer.committed()
    buffer.close()
    assert [r.id for r in records] == ["it00000", "it00001", "it00002"] and result.iterations == 2
    assert {r.worker for r in records[1:]} == {0, 1}  # one child each
    for child in records[1:]:  # both workers' first children: c_0 was the only program to start from
        assert child.parent_id == "it00000"
        assert child.tokens["generator"]["prompt"] > 300 and child.tokens["generator"]["completion"] > 0
        if child.status == "ok":
            assert child.combined_score == pytest.approx(task.evaluate(child.source).combined_score)
    assert not llama_servers(mark), "the embedded server must be stopped at the end of the run"


def test_sigkill_then_resume_with_the_real_llm(tmp_path):
    mark, carried = uuid.uuid4().hex, False
    run_dir = tmp_path / "run"
    cmd = [sys.executable, "-m", "contextevolve.cli", "run", "--iterations", "2", "--run-dir", str(run_dir)]
    proc = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                            env=dict(os.environ, COLUMNS="200", **{MARK: mark}))
    for line in proc.stderr:  # progress lines; kill as soon as iteration 1 is committed
        if line.startswith("iteration 1:"):
            time.sleep(5)  # now inside iteration 2 (navigator / sampler / generator running)
            carried = len(llama_servers(mark)) == SERVERS  # asserted after the kill: the run must not go on
            proc.send_signal(signal.SIGKILL)
            break
    proc.wait(timeout=60)
    assert carried, "the run's servers must all carry the test's mark (else the checks below prove nothing)"
    assert proc.returncode == -signal.SIGKILL
    time.sleep(2)
    assert not llama_servers(mark), "no embedded server may outlive a killed run"
    assert run_status(run_dir)["iterations"] == 1
    out = subprocess.run([*cmd, "--resume"], cwd=ROOT, capture_output=True, text=True, timeout=1200)
    assert out.returncode == 0, out.stderr[-2000:]
    status = json.loads(subprocess.run([sys.executable, "-m", "contextevolve.cli", "status", str(run_dir),
                                        "--json"],
                                       cwd=ROOT, capture_output=True, text=True).stdout)
    assert status["iterations"] == 2 and status["programs"] == 3
