"""The Evolve Buffer's side of workers: atomic claims, worker threads, an older run directory migrated."""

from __future__ import annotations

import sqlite3
import threading

import pytest

from contextevolve.memory.buffer import FORMAT, BufferFormatError, EvolveBuffer
from contextevolve.memory.records import ProgramRecord, program_id


def _commit(buffer: EvolveBuffer, iteration: int, worker: int = 0, tokens: int = 10,
            wall: float = 1.0) -> None:
    buffer.put(ProgramRecord(id=program_id(iteration), iteration=iteration, status="ok", committed=True,
                             worker=worker, tokens={"generator": {"prompt": tokens, "completion": 0}},
                             seconds={"generate": wall}))


def test_claims_from_many_threads_are_distinct_and_stop_at_the_budget(tmp_path):
    buffer = EvolveBuffer(tmp_path / "b.sqlite")
    got: list[int | None] = []
    lock = threading.Lock()

    def worker(index: int) -> None:
        for _ in range(5):
            number = buffer.claim(index, limit=20)
            with lock:
                got.append(number)
            if number is not None:
                _commit(buffer, number, index)  # committed: the next claim is a new one

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    numbers = [n for n in got if n is not None]
    assert sorted(numbers) == list(range(1, 21)) and got.count(None) == 20
    assert sorted(buffer.claims()) == list(range(1, 21))
    buffer.close()


def test_a_worker_gets_its_unfinished_claim_back_and_a_gone_workers_claim_is_made_again(tmp_path):
    buffer = EvolveBuffer(tmp_path / "b.sqlite")
    assert [buffer.claim(w, limit=10) for w in (0, 1, 2)] == [1, 2, 3]
    assert buffer.claim(1, limit=10) == 2  # killed before its checkpoint: the same child again
    _commit(buffer, 2, worker=1)
    assert buffer.claim(1, limit=10) == 4
    # resumed with two workers: worker 2's unfinished claim is given back, and is the next one claimed
    buffer.hand_over(4)  # (worker 1's: not given back, since its commit is on its way)
    assert buffer.release_gone(2) == [] and sorted(buffer.claims()) == [1, 2, 4]
    assert buffer.claim(0, limit=10) == 1
    _commit(buffer, 1)
    assert buffer.claim(0, limit=10) == 3 and buffer.claims()[3] == 0
    assert buffer.claim(0, limit=4) == 3  # (its own, even past a lowered budget)
    _commit(buffer, 3)
    assert buffer.claim(0, limit=4) is None  # four claimed: the budget is spent
    assert buffer.handed_over(1) == [4]
    buffer.close()


def test_a_handed_over_claim_of_a_gone_worker_is_returned_to_be_finished(tmp_path):
    buffer = EvolveBuffer(tmp_path / "b.sqlite")
    assert [buffer.claim(w, limit=10) for w in (0, 1, 2)] == [1, 2, 3]
    buffer.hand_over(3)
    assert buffer.release_gone(2) == [3] and buffer.claims() == {1: 0, 2: 1, 3: 2}
    buffer.close()


def test_spent_counts_tokens_and_the_busiest_workers_seconds(tmp_path):
    buffer = EvolveBuffer(tmp_path / "b.sqlite")
    buffer.put(ProgramRecord(id=program_id(0), iteration=0, status="ok", committed=True,
                             tokens={"summarizer": {"prompt": 5, "completion": 1}},
                             seconds={"initialize": 2.0}))
    _commit(buffer, 1, worker=0, wall=3.0)
    _commit(buffer, 2, worker=1, wall=4.0)
    _commit(buffer, 3, worker=0, wall=3.0)
    buffer.put(ProgramRecord(id=program_id(4), iteration=4, worker=1, seconds={"generate": 50.0}))  # pending
    assert buffer.spent() == (36, 8.0)  # 6 + 3 * 10 tokens; 2 s + worker 0's 6 s
    # a Summarizer call behind its worker is the child's seconds, not its worker's elapsed time
    buffer.put(ProgramRecord(id=program_id(5), iteration=5, worker=0, committed=True, status="ok",
                             seconds={"generate": 1.0, "summarize": 2.0, "summarize.behind": 2.0}))
    assert buffer.spent() == (36, 9.0)
    buffer.close()


def test_threads_bind_to_worker_indexes(tmp_path):
    buffer = EvolveBuffer(tmp_path / "b.sqlite")
    assert buffer.bind_worker("worker-1", 1) == 1
    assert buffer.bind_worker("studio-thread") == 0  # the lowest free index
    assert buffer.bind_worker("studio-thread", 5) == 0  # bound once, kept
    assert buffer.bind_worker("other") == 2
    with pytest.raises(ValueError, match="worker 1 of .* is LangGraph thread 'worker-1', not 'x'"):
        buffer.bind_worker("x", 1)
    assert buffer.worker_threads() == {0: "studio-thread", 1: "worker-1", 2: "other"}
    buffer.close()


def _format_1_buffer(path) -> None:
    """A buffer as the version before workers wrote it: no format number, no claims, no extra columns."""
    db = sqlite3.connect(path)
    db.executescript("""
        CREATE TABLE programs (id TEXT PRIMARY KEY, iteration INTEGER NOT NULL, parent_id TEXT,
            status TEXT NOT NULL, combined_score REAL NOT NULL, committed INTEGER NOT NULL, """
                     """record TEXT NOT NULL);
        CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
        INSERT INTO meta VALUES ('run_id', 'abc'), ('thread_id', 'main');""")
    for n, committed in ((0, 1), (1, 1), (2, 1), (3, 0)):
        record = ProgramRecord(id=program_id(n), iteration=n, status="ok" if committed else "pending",
                               committed=bool(committed),
                               tokens={"generator": {"prompt": 100, "completion": 20}},
                               seconds={"generate": 2.5})
        db.execute("INSERT INTO programs VALUES (?, ?, ?, ?, ?, ?, ?)",
                   (record.id, n, None, record.status, 1.0, committed, record.model_dump_json()))
    db.commit()
    db.close()


def test_an_older_buffer_is_migrated_in_one_place(tmp_path):
    path = tmp_path / "b.sqlite"
    _format_1_buffer(path)
    buffer = EvolveBuffer(path)
    # the committed children are claimed by worker 0; the round's uncommitted child is made again
    assert buffer.claims() == {1: 0, 2: 0}
    assert buffer.spent() == (360, 7.5)
    assert buffer.claim(0, limit=10) == 3 and buffer.run_id() == "abc"
    buffer.close()
    db = sqlite3.connect(path)
    assert db.execute("SELECT value FROM meta WHERE key = 'format'").fetchone() == (str(FORMAT),)
    db.execute("UPDATE meta SET value = ? WHERE key = 'format'", (str(FORMAT + 1),))
    db.commit()
    db.close()
    with pytest.raises(BufferFormatError, match=f"newer ContextEvolve \\(format {FORMAT + 1}"):
        EvolveBuffer(path)


def test_an_older_run_directory_resumes_with_workers(tmp_path, models):
    """A run of rounds of lanes (format 1) extended today: its children are kept, the next ids follow them."""
    import json

    from contextevolve.api import evolve

    run = tmp_path / "r"
    evolve("model_placement", iterations=2, run_dir=run, max_retries=0)
    # make it look like the version before workers wrote it: no claims, no workers, no format number
    db = sqlite3.connect(run / "buffer.sqlite")
    db.executescript("DROP TABLE claims; DROP TABLE workers; DELETE FROM meta WHERE key = 'format';")
    db.commit()
    db.close()
    saved = json.loads((run / "run.json").read_text())
    saved["parallelism"]["lanes"] = saved["parallelism"].pop("workers")  # its name then
    saved["parallelism"].pop("llm_concurrency")
    (run / "run.json").write_text(json.dumps(saved))
    result = evolve("model_placement", iterations=4, run_dir=run, resume=True, workers=2)
    assert result.iterations == 4 and result.programs == 5
    assert json.loads((run / "run.json").read_text())["parallelism"]["workers"] == 2
    ids = [json.loads(line)["id"] for line in (run / "programs.jsonl").read_text().splitlines()]
    assert ids == [program_id(n) for n in range(5)]


def test_the_summarizer_behind_its_worker_commits_every_child_with_all_its_tokens(tmp_path, models):
    import json

    from contextevolve.api import evolve
    from contextevolve.roles import total_tokens

    run = tmp_path / "r"
    result = evolve("model_placement", iterations=5, run_dir=run, max_retries=0, workers=2)
    # (on: 2 workers)
    assert json.loads((run / "run.json").read_text())["parallelism"]["summarize_behind"] is None
    assert result.iterations == 5 and result.programs == 6
    buffer = EvolveBuffer(run / "buffer.sqlite")
    try:
        children = [r for r in buffer.committed() if r.iteration]
        assert buffer.handed_over(0) == buffer.handed_over(1) == []  # nothing left in the air
        for child in children:
            assert child.abstract and "summarize" in child.seconds
            # the Summarizer's call was made after the worker moved on, and is counted on the child
            assert total_tokens(child.tokens) == sum(c.prompt + c.completion for c in child.llm_calls)
            if child.status == "ok" and not child.behavioural_twin_of:  # (no call for an invalid one)
                assert [c.role for c in child.llm_calls][-1] == "summarizer" and "summarizer" in child.tokens
        assert buffer.spent()[0] == total_tokens(buffer.token_usage())
    finally:
        buffer.close()


def test_a_child_handed_over_when_the_run_died_is_finished_by_its_workers_next_claim(
        tmp_path, models, monkeypatch):
    from concurrent.futures import Future

    from langgraph.checkpoint.memory import InMemorySaver

    from contextevolve.graph.builder import build_graph
    from contextevolve.graph.context import RunContext
    from contextevolve.loop import behind
    from contextevolve.memory.store import close_memory, open_memory

    class Dropped:  # a pool whose jobs die with their process: accepted, never run
        def submit(self, *args):
            future = Future()
            future.set_result(None)
            return future

    monkeypatch.setattr(behind, "_POOL", Dropped())
    ctx = RunContext(run_dir=str(tmp_path / "r"), max_iterations=2, max_retries=0,
                     summarize_behind=True)
    graph, config = build_graph(InMemorySaver()), {"configurable": {"thread_id": "t"}}
    try:
        graph.invoke({}, config, context=ctx, interrupt_before=["select_parent"])  # c_0, then it00001 claimed
        # it00001 handed over, its job lost
        graph.invoke(None, config, context=ctx, interrupt_before=["claim"])
        buffer = open_memory(ctx.run_dir).buffer
        assert buffer.handed_over(0) == [1] and not buffer.require("it00001").committed
        graph.invoke(None, config, context=ctx, interrupt_before=["select_parent"])
        child = buffer.require("it00001")
        assert child.committed and child.abstract and "summarizer" in child.tokens
        assert graph.get_state(config).values["child_id"] == "it00002"  # a new claim, not the handed-over one
        monkeypatch.setattr(behind, "_POOL", None)
        graph.invoke(None, config, context=ctx)
        assert [r.id for r in buffer.committed()] == ["it00000", "it00001", "it00002"]
    finally:
        close_memory(ctx.run_dir)


def test_a_run_resumed_with_fewer_workers_makes_a_gone_workers_child_under_its_id(tmp_path, models):
    import json

    from contextevolve.api import evolve

    run = tmp_path / "r"
    evolve("model_placement", iterations=2, run_dir=run, max_retries=0)
    buffer = EvolveBuffer(run / "buffer.sqlite")
    assert buffer.claim(2, limit=10) == 3  # worker 2 of a larger run had claimed it00003 when the run stopped
    buffer.close()
    result = evolve("model_placement", iterations=4, run_dir=run, resume=True, workers=2)
    assert result.iterations == 4
    ids = [json.loads(line)["id"] for line in (run / "programs.jsonl").read_text().splitlines()]
    assert ids == [program_id(n) for n in range(5)]
    buffer = EvolveBuffer(run / "buffer.sqlite")
    assert set(buffer.claims()) == {1, 2, 3, 4} and 2 not in buffer.claims().values()
    buffer.close()
