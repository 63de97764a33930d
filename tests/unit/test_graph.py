"""The compiled graph end to end with scripted models: results, run directory, stop conditions, durability."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from contextevolve.api import RunDirError, evolve, run_status
from contextevolve.graph.builder import ITERATION_PHASES, NODES, PHASES, build_graph
from contextevolve.tasks.registry import get_task

ROOT = Path(__file__).resolve().parents[2]
TASK = get_task("model_placement")


def test_graph_has_the_eight_phases_in_a_loop():
    graph = build_graph().get_graph()
    assert set(graph.nodes) - {"__start__", "__end__"} == set(NODES) == {"initialize", "claim", "review",
                                                                           "repair", *PHASES}
    edges = {(e.source, e.target) for e in graph.edges}
    path = ["claim", *ITERATION_PHASES[:4], "review", *ITERATION_PHASES[4:], "update_buffer", "claim"]
    assert ("initialize", "claim") in edges and ("claim", "__end__") in edges
    assert all((a, b) in edges for a, b in zip(path, path[1:]) if a != "evaluate")
    # repair sits in a loop with evaluate, off the paper's path
    assert (("evaluate", "repair") in edges and ("repair", "evaluate") in edges
            and ("evaluate", "summarize") in edges)
    assert PHASES == (*ITERATION_PHASES, "update_buffer")


@pytest.mark.parametrize("workers", [1, 2])
def test_a_worker_pauses_before_generate_shows_the_guidance_and_resumes(tmp_path, models, workers):
    from langgraph.checkpoint.memory import InMemorySaver

    from contextevolve.graph.context import RunContext
    from contextevolve.memory.store import close_memory, open_memory

    # (the Summarizer in the worker's order, so that what is committed when a worker pauses is exact)
    ctx = RunContext(run_dir=str(tmp_path / "r"), max_iterations=2 * workers, workers=workers, max_retries=0,
                     summarize_behind=False)
    graph = build_graph(InMemorySaver())
    configs = [{"configurable": {"thread_id": f"t{i}"}} for i in range(workers)]
    try:
        for config in configs:
            graph.invoke({}, config, context=ctx, interrupt_before=["generate"])
        first = [graph.get_state(c) for c in configs]
        assert [s.next for s in first] == [("generate",)] * workers
        assert [s.values["worker"] for s in first] == list(range(workers))
        assert sorted(s.values["child_id"] for s in first) == [f"it{n:05d}" for n in range(1, workers + 1)]
        # no step to learn from yet: the Navigator is not asked
        assert all(s.values["guidance"] == "" and s.values["parent_id"] == "it00000" for s in first)
        assert open_memory(ctx.run_dir).buffer.count() == 1  # no child written before generate
        for config in configs:
            graph.invoke(None, config, context=ctx, interrupt_before=["generate"])
        paused = [graph.get_state(c) for c in configs]
        assert [s.next for s in paused] == [("generate",)] * workers
        assert all(s.values["guidance"] for s in paused)
        assert open_memory(ctx.run_dir).buffer.count() == 1 + workers
        for config in configs:
            graph.invoke(None, config, context=ctx)
        done = [graph.get_state(c) for c in configs]
        assert all(s.next == () and s.values["stop_reason"].startswith("iteration budget") for s in done)
        assert sum(s.values["committed"] for s in done) == 2 * workers
        buffer = open_memory(ctx.run_dir).buffer
        for state in paused:
            child = buffer.require(state.values["child_id"])
            assert child.committed and child.guidance == state.values["guidance"]
            assert child.worker == state.values["worker"]
    finally:
        close_memory(ctx.run_dir)


def test_phase_updates_stream_with_their_content(tmp_path, models):
    from langgraph.checkpoint.memory import InMemorySaver

    from contextevolve.graph.context import RunContext
    from contextevolve.memory.store import close_memory

    ctx = RunContext(run_dir=str(tmp_path / "r"), max_iterations=1, max_retries=0)
    try:
        updates = list(build_graph(InMemorySaver()).stream({}, {"configurable": {"thread_id": "t"}},
                                                           context=ctx, stream_mode="updates"))
    finally:
        close_memory(ctx.run_dir)
    phases = [next(iter(u)) for u in updates]
    assert phases == ["initialize", "claim", *ITERATION_PHASES[:4], "review", *ITERATION_PHASES[4:],
                      "update_buffer", "claim"]
    by_phase = {next(iter(u)): next(iter(u.values())) or {} for u in updates}
    assert by_phase["navigate"]["guidance"] == ""  # no step yet: the Navigator is not asked
    assert by_phase["select_parent"]["parent_id"] == "it00000"
    assert by_phase["update_buffer"] == {"committed": 1, "last_child_id": "it00001"}
    assert "iteration budget" in updates[-1]["claim"]["stop_reason"]


def test_run_records_every_program_and_recomputes_best(tmp_path, models):
    # the paper's algorithm (no repair), so the scripted invalid and failed children stay as they are
    # (3 iterations: a 4th would repeat the scripted better program, a twin the Generator is re-asked for)
    result = evolve("model_placement", iterations=3, run_dir=tmp_path / "r", max_retries=0)
    assert result.iterations == 3 and result.programs == 4
    assert result.stop_reason.startswith("iteration budget")
    # the reported best is what the evaluator gives the stored best program
    assert result.best_score == pytest.approx(TASK.evaluate(result.best_program).combined_score)
    assert result.best_score > result.initial_score
    assert (tmp_path / "r" / "best_program.py").read_text() == result.best_program
    records = [json.loads(line) for line in (tmp_path / "r" / "programs.jsonl").read_text().splitlines()]
    assert [r["id"] for r in records] == [f"it{n:05d}" for n in range(4)]
    assert all(r["abstract"] and r["status"] in ("ok", "invalid", "failed") for r in records)
    assert all(r["parent_id"] for r in records[1:]) and records[0]["parent_id"] is None
    assert any(r["status"] == "invalid" for r in records) and any(r["status"] == "failed" for r in records)
    assert all(r["tokens"]["generator"]["prompt"] == 900 for r in records[1:])
    status = run_status(tmp_path / "r")
    assert status["iterations"] == 3 and status["programs"] == 4
    assert status["tokens"]["generator"] == {"prompt": 2700, "completion": 810}
    assert status["best_score"] == pytest.approx(result.best_score)


def test_the_thread_state_tells_what_the_worker_did(tmp_path, models):
    from contextevolve.api import thread_state, worker_states

    evolve("model_placement", iterations=2, run_dir=tmp_path / "r", max_retries=0)
    state = thread_state(tmp_path / "r")
    records = {json.loads(line)["id"]: json.loads(line)
               for line in (tmp_path / "r" / "programs.jsonl").read_text().splitlines()}
    assert state["committed"] == 2 and state["next"] == () and state["last_child_id"] == "it00002"
    child = records[state["child_id"]]  # the last iteration's ids stay readable
    assert (state["parent_id"] == child["parent_id"] and state["guidance"] == child["guidance"]
            and child["guidance"])
    assert state["context_exemplar_ids"] == child["exemplar_ids"]
    # the program's facts have one owner, its record: the state keeps none of them
    assert not {"child_status", "child_score", "repairs", "best_score"} & set(state)
    assert list(worker_states(tmp_path / "r")) == [0]
    with pytest.raises(RunDirError, match="no worker 3"):
        thread_state(tmp_path / "r", worker=3)
    with pytest.raises(RunDirError, match="no checkpoints"):
        thread_state(tmp_path / "nothing")


def test_checkpoints_hold_no_program_source(tmp_path, models):
    evolve("model_placement", iterations=2, run_dir=tmp_path / "r", max_retries=0)
    conn = sqlite3.connect(tmp_path / "r" / "checkpoints.sqlite")
    graph = build_graph(__import__("langgraph.checkpoint.sqlite", fromlist=["SqliteSaver"]).SqliteSaver(conn))
    history = list(graph.get_state_history({"configurable": {"thread_id": "worker-0"}}))
    assert len(history) >= 6
    for snapshot in history:
        assert "compute_model_placement(" not in json.dumps(snapshot.values, default=str)
    # every stored checkpoint and pending write
    blobs = [row[0] for row in conn.execute("select checkpoint from checkpoints")]
    blobs += [row[0] for row in conn.execute("select value from writes")]
    assert len(blobs) > 30 and not any(b"compute_model_placement(" in bytes(b) for b in blobs if b)
    conn.close()


def test_target_score_and_token_budget_stop_early(tmp_path, models):
    hit = evolve("model_placement", iterations=10, run_dir=tmp_path / "a", target_score=22.0, max_retries=0)
    assert hit.iterations == 1 and "target score" in hit.stop_reason
    spent = evolve("model_placement", iterations=10, run_dir=tmp_path / "b", token_budget=3000, max_retries=0)
    assert spent.iterations < 10 and "token budget" in spent.stop_reason and spent.total_tokens >= 3000


def test_bad_run_dirs_are_refused_without_writing(tmp_path, models):
    evolve("model_placement", iterations=1, run_dir=tmp_path / "r", max_retries=0)
    before = (tmp_path / "r" / "buffer.sqlite").stat().st_mtime_ns
    with pytest.raises(RunDirError, match="--resume"):
        evolve("model_placement", iterations=1, run_dir=tmp_path / "r")
    with pytest.raises(RunDirError, match="nothing to resume"):
        evolve("model_placement", iterations=1, run_dir=tmp_path / "empty", resume=True)
    with pytest.raises(KeyError, match="known tasks"):
        evolve("no_such_task", iterations=1, run_dir=tmp_path / "x")
    with pytest.raises(ValueError, match="unknown roles"):
        evolve("model_placement", run_dir=tmp_path / "y", models={"critic": "m"})
    assert (tmp_path / "r" / "buffer.sqlite").stat().st_mtime_ns == before
    assert not (tmp_path / "x").exists() and not (tmp_path / "y").exists()


def test_finished_run_can_be_extended(tmp_path, models):
    evolve("model_placement", iterations=2, run_dir=tmp_path / "r", max_retries=0)
    more = evolve("model_placement", iterations=4, run_dir=tmp_path / "r", resume=True)
    assert more.iterations == 4 and more.programs == 5
    assert json.loads((tmp_path / "r" / "run.json").read_text())["max_iterations"] == 4


@pytest.mark.parametrize("per_prompt, node, seen, committed", [
    (1, "generate", 3, 2),  # iteration 3 generated but not evaluated, summarised or committed
    (3, "evaluate", 2, 1),  # the prompt's second child, stored by generate, evaluated but not committed
])
def test_sigkill_mid_iteration_then_resume(tmp_path, models, per_prompt, node, seen, committed):
    run_dir = tmp_path / "r"
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    proc = subprocess.Popen([sys.executable, "-m", "tests.unit.crash_runner", str(run_dir), "5",
                             "--samples-per-prompt", str(per_prompt)], cwd=ROOT,
                            env=env, stdout=subprocess.PIPE, text=True)
    count = 0
    for line in proc.stdout:
        count += line.strip() == node
        if count == seen:
            proc.send_signal(signal.SIGKILL)
            break
    proc.wait()
    assert proc.returncode == -signal.SIGKILL
    killed = run_status(run_dir)
    assert killed["iterations"] == committed and killed["programs"] == committed + 1
    result = evolve("model_placement", iterations=5, run_dir=run_dir, resume=True)
    status = run_status(run_dir)
    assert status["iterations"] == 5 and status["programs"] == 6
    assert [json.loads(line)["id"] for line in (run_dir / "programs.jsonl").read_text().splitlines()] == [
        f"it{n:05d}" for n in range(6)]
    assert result.iterations == 5
    assert status["children_per_prompt"] == (1.0 if per_prompt == 1 else 2.5)  # prompts of 3 and 2 children


def test_workers_share_one_buffer_and_claim_distinct_children(tmp_path, models):
    from contextevolve.memory.buffer import EvolveBuffer

    result = evolve("model_placement", iterations=5, run_dir=tmp_path / "r", max_retries=0, workers=2)
    assert result.iterations == 5 and result.programs == 6
    records = [json.loads(line) for line in (tmp_path / "r" / "programs.jsonl").read_text().splitlines()]
    assert [r["id"] for r in records] == [f"it{n:05d}" for n in range(6)]
    # every child is scored and abstracted, and made by the worker that claimed it
    assert all(r["abstract"] and r["tokens"]["generator"]["prompt"] in (900, 1800) for r in records[1:])
    buffer = EvolveBuffer(tmp_path / "r" / "buffer.sqlite")
    claims = buffer.claims()
    buffer.close()
    assert claims == {r["iteration"]: r["worker"] for r in records[1:]} and set(claims.values()) == {0, 1}
    status = run_status(tmp_path / "r")
    assert {w: s["committed"] for w, s in status["workers"].items()} == {
        w: sum(r["worker"] == w for r in records[1:]) for w in (0, 1)}
    assert all(s["next"] == [] and "iteration budget" in s["stop_reason"] for s in status["workers"].values())
    assert result.best_score == pytest.approx(TASK.evaluate(result.best_program).combined_score)


def test_a_worker_goes_on_while_another_is_paused(tmp_path, models):
    """No barrier: a worker paused before generate does not hold the others back.

    The worker is paused by a person reviewing it, or a slow endpoint; it finishes its own child when
    resumed.
    """
    from langgraph.checkpoint.memory import InMemorySaver

    from contextevolve.graph.context import RunContext
    from contextevolve.memory.store import close_memory, open_memory

    ctx = RunContext(run_dir=str(tmp_path / "r"), max_iterations=4, workers=2, max_retries=0)
    graph = build_graph(InMemorySaver())
    slow, fast = ({"configurable": {"thread_id": name}} for name in ("slow", "fast"))
    try:
        graph.invoke({}, slow, context=ctx, interrupt_before=["generate"])
        assert graph.get_state(slow).values["child_id"] == "it00001"
        graph.invoke({}, fast, context=ctx)
        buffer = open_memory(ctx.run_dir).buffer
        assert [r.id for r in buffer.committed()] == ["it00000", "it00002", "it00003", "it00004"]
        assert graph.get_state(fast).values["committed"] == 3
        graph.invoke(None, slow, context=ctx)
        assert [r.id for r in buffer.committed()] == [f"it{n:05d}" for n in range(5)]
        assert graph.get_state(slow).values["committed"] == 1 and buffer.require("it00001").worker == 0
    finally:
        close_memory(ctx.run_dir)


def test_sigkill_mid_iteration_with_two_workers_then_resume(tmp_path, models):
    run_dir = tmp_path / "r"
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    proc = subprocess.Popen([sys.executable, "-m", "tests.unit.crash_runner", str(run_dir), "6",
                             "--workers", "2"],
                            cwd=ROOT, env=env, stdout=subprocess.PIPE, text=True)
    seen = []
    for line in proc.stdout:
        seen.append(line.strip())
        if seen.count("generate") == 3:  # the second iteration of one worker has generated
            proc.send_signal(signal.SIGKILL)
            break
    proc.wait()
    assert proc.returncode == -signal.SIGKILL
    killed = run_status(run_dir)
    assert killed["iterations"] < 6
    # status says where each worker was: the node it waits to run and the child it was making
    assert set(killed["workers"]) == {0, 1}
    assert any(p["next"] and p["child_id"] and not p["stop_reason"] for p in killed["workers"].values())
    result = evolve("model_placement", iterations=6, run_dir=run_dir, resume=True)
    status = run_status(run_dir)
    assert result.iterations == 6 and status["iterations"] == 6 and status["programs"] == 7
    assert [json.loads(line)["id"] for line in (run_dir / "programs.jsonl").read_text().splitlines()] == [
        f"it{n:05d}" for n in range(7)]
    assert json.loads((run_dir / "run.json").read_text())["parallelism"]["workers"] == 2


def test_hostile_children_are_failed_and_the_run_goes_on(tmp_path):
    from contextevolve.llm.models import use_chat_models
    from tests.fakes import default_models, fenced, reply, scripted

    hostile = ["import os\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n        pass\n",
               "import os, signal\nos.kill(os.getppid(), signal.SIGKILL)\n"
               "os.kill(%d, signal.SIGKILL)\n" % os.getpid(),
               "import subprocess\nsubprocess.Popen(['sleep', '977.5'], start_new_session=True)\n"
               "while True:\n    pass\n"]
    scripted_models = default_models()
    entry = "\n\ndef compute_model_placement(gpu_num, models):\n    return {}\n"  # the attack runs on import
    scripted_models["generator"] = scripted(*(reply(fenced(h + entry), 900, 100) for h in hostile))
    with use_chat_models(**scripted_models):
        result = evolve("model_placement", iterations=3, run_dir=tmp_path / "r", max_retries=0,
                        eval_timeout_s=5, eval_cpu_s=2)
    records = [json.loads(line) for line in (tmp_path / "r" / "programs.jsonl").read_text().splitlines()]
    assert result.iterations == 3 and [r["status"] for r in records[2:]] == ["failed", "failed"]
    # the fork bomb ends at the wall clock, or at the CPU limit on a host with many cores
    assert records[1]["status"] in ("timeout", "failed") and " limit" in records[1]["reason"]
    assert "CPU-time limit" in records[3]["reason"]
    assert all(r["combined_score"] == 0.0 for r in records[1:])
    assert result.best_score == pytest.approx(records[0]["combined_score"])
    leftovers = [p for p in os.listdir("/proc") if p.isdigit() and "977.5" in _cmdline(p)]
    assert leftovers == []


def _cmdline(pid: str) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace")
    except OSError:
        return ""


def test_langgraph_json_serves_the_compiled_graph():
    import importlib.util

    spec_text = json.loads((ROOT / "langgraph.json").read_text())["graphs"]["contextevolve"]
    path, _, attr = spec_text.partition(":")
    spec = importlib.util.spec_from_file_location("served_graph", ROOT / path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    served = getattr(module, attr)
    assert type(served).__name__ == "CompiledStateGraph"
    assert served.checkpointer is None  # langgraph dev supplies its own
    assert {n.split(":")[-1] for n in served.get_graph(xray=1).nodes} >= set(PHASES)


def test_a_person_can_edit_the_guidance_before_generate(tmp_path, models):
    from langgraph.checkpoint.memory import InMemorySaver
    from langgraph.types import Command

    from contextevolve.graph.context import RunContext
    from contextevolve.memory.store import close_memory, open_memory

    ctx = RunContext(run_dir=str(tmp_path / "r"), max_iterations=2, workers=2, max_retries=0,
                     review_guidance=True)
    graph = build_graph(InMemorySaver())
    configs = [{"configurable": {"thread_id": name}} for name in ("t", "u")]
    try:
        for config in configs:
            graph.invoke({}, config, context=ctx)
        asked = [graph.get_state(c).interrupts[0] for c in configs]
        assert [graph.get_state(c).next for c in configs] == [("review",), ("review",)]
        assert [(i.value["worker"], i.value["child_id"]) for i in asked] == [(0, "it00001"), (1, "it00002")]
        # the first iterations have no step, so no Navigator guidance: a person can still give one
        assert all(i.value["guidance"] == "" for i in asked)
        edited = "Place the largest models first, each on the GPU with the most free memory."
        graph.invoke(Command(resume=edited), configs[0], context=ctx)
        graph.invoke(Command(resume=""), configs[1], context=ctx)  # (LangGraph 1.2 cannot resume with None)
        buffer = open_memory(ctx.run_dir).buffer
        assert buffer.require("it00001").guidance == edited  # replaced
        assert buffer.require("it00002").guidance == asked[1].value["guidance"]  # kept
        assert any(edited in m.content for call in models["generator"].seen for m in call)
        # a bad resume value keeps the guidance (and warns) rather than leaving the worker stuck
        other = replace_ctx(ctx, tmp_path)
        graph.invoke({}, {"configurable": {"thread_id": "v"}}, context=other)
        with pytest.warns(UserWarning, match="resumed with a int, not a string"):
            graph.invoke(Command(resume=42), {"configurable": {"thread_id": "v"}}, context=other)
        assert graph.get_state({"configurable": {"thread_id": "v"}}).values["committed"] == 1
        with pytest.raises(ValueError, match="review_guidance pauses every worker"):
            evolve("model_placement", iterations=1, run_dir=tmp_path / "w", review_guidance=True)
        assert not (tmp_path / "w").exists()
    finally:
        close_memory(ctx.run_dir)
        close_memory(tmp_path / "u")


def replace_ctx(ctx, tmp_path):
    from dataclasses import replace

    return replace(ctx, run_dir=str(tmp_path / "u"), workers=1, max_iterations=1)


def test_a_thread_refuses_settings_of_another_run_and_a_second_thread_joins_as_a_worker(tmp_path, models):
    from langgraph.checkpoint.memory import InMemorySaver

    from contextevolve.graph.context import RunContext
    from contextevolve.loop.identity import ThreadMismatchError
    from contextevolve.memory.buffer import EvolveBuffer, stored_run_id
    from contextevolve.memory.store import BUFFER_FILE, close_memory, open_memory

    ctx = RunContext(run_dir=str(tmp_path / "r"), max_iterations=1, max_retries=0)
    graph, config = build_graph(InMemorySaver()), {"configurable": {"thread_id": "t"}}
    try:
        graph.invoke({}, config, context=ctx, interrupt_before=["generate"])
        # resumed without its settings: the defaults name another run directory, which is not created
        with pytest.raises(ThreadMismatchError, match=f"drives the model_placement run in {ctx.run_dir}"):
            graph.invoke(None, config, context=RunContext(run_dir=str(tmp_path / "default"), max_retries=0))
        assert not (tmp_path / "default").exists()
        # another run directory's buffer is only read: no abstract index made there, no run id drawn
        EvolveBuffer(tmp_path / "other" / BUFFER_FILE).close()
        with pytest.raises(ThreadMismatchError, match="but the run settings name the model_placement run in"):
            graph.invoke(None, config, context=RunContext(run_dir=str(tmp_path / "other"), max_retries=0))
        assert all(p.name.startswith(BUFFER_FILE) for p in (tmp_path / "other").iterdir())
        assert stored_run_id(tmp_path / "other" / BUFFER_FILE) is None
        with pytest.raises(ThreadMismatchError, match="but the run settings name the eplb run"):
            graph.invoke(None, config, context=RunContext(run_dir=ctx.run_dir, task="eplb", max_retries=0))
        graph.invoke(None, config, context=ctx)
        assert graph.get_state(config).values["committed"] == 1
        # a new thread on the run directory is one more worker: it finds the budget claimed and stops
        second = {"configurable": {"thread_id": "u"}}
        graph.invoke({}, second, context=ctx)
        assert graph.get_state(second).values["worker"] == 1
        assert "iteration budget" in graph.get_state(second).values["stop_reason"]
        buffer = open_memory(ctx.run_dir).buffer
        assert buffer.count() == 2 and buffer.worker_threads() == {0: "t", 1: "u"}
        with pytest.raises(ValueError, match="worker 0 of .* is LangGraph thread 't', not 'w'"):
            graph.invoke({"worker": 0}, {"configurable": {"thread_id": "w"}}, context=ctx)
    finally:
        close_memory(ctx.run_dir)


def test_new_input_on_a_worker_stopped_mid_iteration_makes_the_same_child(tmp_path, models):
    from langgraph.checkpoint.memory import InMemorySaver

    from contextevolve.graph.context import RunContext
    from contextevolve.memory.store import close_memory, open_memory

    ctx = RunContext(run_dir=str(tmp_path / "r"), max_iterations=2, max_retries=0)
    graph, config = build_graph(InMemorySaver()), {"configurable": {"thread_id": "t"}}
    try:
        # the child is evaluated but not committed; then the user submits new input instead of resuming
        graph.invoke({}, config, context=ctx, interrupt_before=["update_buffer"])
        assert graph.get_state(config).values["child_id"] == "it00001"
        graph.invoke({}, config, context=ctx)
        done = graph.get_state(config)
        assert done.next == () and done.values["committed"] == 2
        # the claim the worker held was taken up again: no id skipped, none made twice
        assert [r.id for r in open_memory(ctx.run_dir).buffer.committed()] == [
            "it00000", "it00001", "it00002"]
    finally:
        close_memory(ctx.run_dir)


def test_a_moved_run_directory_still_resumes(tmp_path, models):
    evolve("model_placement", iterations=1, run_dir=tmp_path / "r", max_retries=0)
    (tmp_path / "r").rename(tmp_path / "moved")
    result = evolve("model_placement", iterations=2, run_dir=tmp_path / "moved", resume=True)
    assert result.iterations == 2 and result.programs == 3


def test_every_child_records_its_seconds_by_phase_and_its_llm_calls(tmp_path, models):
    evolve("model_placement", iterations=2, run_dir=tmp_path / "r", max_retries=0)
    records = [json.loads(line) for line in (tmp_path / "r" / "programs.jsonl").read_text().splitlines()]
    initial, children = records[0], records[1:]
    assert (initial["seconds"]["initialize"] > 0
            and [c["role"] for c in initial["llm_calls"]] == ["summarizer"])
    for child in children:
        seconds = child["seconds"]
        assert set(ITERATION_PHASES) <= set(seconds) and all(seconds[p] >= 0 for p in ITERATION_PHASES)
        assert 0 <= seconds["generate.llm"] <= seconds["generate"]
        calls = child["llm_calls"]
        assert [c["phase"] for c in calls if c["role"] == "generator"] == ["generate"]
        # every call's tokens are the tokens the child is charged, role by role
        for role, counts in child["tokens"].items():
            mine = [c for c in calls if c["role"] == role]
            assert sum(c["prompt"] for c in mine) == counts["prompt"]
            assert sum(c["completion"] for c in mine) == counts["completion"]
    ok = next(c for c in children if c["status"] in ("ok", "invalid"))
    assert ok["seconds"]["evaluate.full"] >= ok["seconds"]["evaluate.calls"] > 0
    status = run_status(tmp_path / "r")
    assert status["seconds"]["generate"] == pytest.approx(sum(c["seconds"]["generate"] for c in children),
                                                          abs=0.01)
    assert status["llm"]["generator"]["calls"] == 2 and status["llm"]["generator"]["prompt"] == 1800
    assert status["seconds_per_iteration"] > 0
    from contextevolve.memory.buffer import EvolveBuffer

    buffer = EvolveBuffer(tmp_path / "r" / "buffer.sqlite")
    _, elapsed = buffer.spent()
    buffer.close()
    one_worker = sum(v for c in children for k, v in c["seconds"].items() if "." not in k)
    assert elapsed == pytest.approx(one_worker + initial["seconds"]["initialize"], abs=0.01)


def test_a_time_budget_stops_the_run_before_the_next_claim(tmp_path, models):
    spent = evolve("model_placement", iterations=10, run_dir=tmp_path / "t", time_budget_s=0.01,
                   max_retries=0)
    # the initial program took longer
    assert spent.iterations == 0 and "time budget reached" in spent.stop_reason
    with pytest.raises(ValueError, match="time_budget_s must be > 0"):
        evolve("model_placement", iterations=1, run_dir=tmp_path / "u", time_budget_s=0)


def _cut_before_the_last_commit_was_checkpointed(run_dir: Path) -> None:
    """Make the checkpoint store look as after a SIGKILL between a commit and its checkpoint.

    The SIGKILL landed after ``update_buffer`` had committed its child to the buffer and saved its
    writes, but before the step's checkpoint.
    """
    from langgraph.checkpoint.sqlite import SqliteSaver

    conn = sqlite3.connect(run_dir / "checkpoints.sqlite")
    history = list(SqliteSaver(conn).list({"configurable": {"thread_id": "worker-0"}}))
    cut = next(t for t in history if any(w[1] == "last_child_id" for w in t.pending_writes or []))
    newest = cut.config["configurable"]["checkpoint_id"]
    conn.execute("DELETE FROM checkpoints WHERE checkpoint_id > ?", (newest,))
    conn.execute("DELETE FROM writes WHERE checkpoint_id > ?", (newest,))
    conn.commit()
    conn.close()


@pytest.mark.parametrize("how", ["resume", "new input"])
def test_a_kill_between_the_commit_and_its_checkpoint_loses_nothing_and_repeats_nothing(
        tmp_path, models, how):
    """A kill between a commit and its checkpoint loses nothing and repeats nothing.

    Found by benchmarks/soak.py (with rounds of lanes): resuming on new input after such a kill dropped
    the saved writes of update_buffer. Now the buffer owns what was committed: the claim of the committed
    child is finished, so the worker claims the next one, and every token is a committed record's.
    """
    from contextevolve.api import thread_state
    from contextevolve.memory.buffer import EvolveBuffer
    from contextevolve.roles import total_tokens

    run_dir = tmp_path / "r"
    evolve("model_placement", iterations=2, run_dir=run_dir, max_retries=0)
    _cut_before_the_last_commit_was_checkpointed(run_dir)
    if how == "resume":
        evolve("model_placement", iterations=2, run_dir=run_dir, resume=True)
    else:  # new input on the thread: initialize runs again
        evolve("model_placement", iterations=3, run_dir=run_dir, resume=True)
    state = thread_state(run_dir)
    buffer = EvolveBuffer(run_dir / "buffer.sqlite")
    records = buffer.committed()
    assert [r.id for r in records] == [f"it{n:05d}" for n in range(3 if how == "resume" else 4)]
    assert sorted(buffer.claims()) == list(range(1, len(records)))
    calls = sum(c.prompt + c.completion for r in records for c in r.llm_calls)
    assert buffer.spent()[0] == total_tokens(buffer.token_usage()) == calls
    buffer.close()
    assert state["next"] == () and state["committed"] == len(records) - 1
