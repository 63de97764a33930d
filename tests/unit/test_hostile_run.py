"""A run survives any child: hostile programs from the Generator, a grader that crashes, a kill mid-run."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from contextevolve.api import evolve, run_status
from contextevolve.tasks.registry import get_task
from tests.unit.hostile_runner import EXPECTED, HOSTILE

ROOT = Path(__file__).resolve().parents[2]
TASK = get_task("model_placement")


def _normal(source: str) -> str:
    return "\n".join(line.rstrip() for line in source.strip().splitlines())


def _records(run_dir: Path) -> list[dict]:
    return [json.loads(line) for line in (run_dir / "programs.jsonl").read_text().splitlines()]


def test_hostile_children_killed_and_resumed_run_to_the_budget(tmp_path):
    """Hostile children end worse than the initial program; a SIGKILL mid-run loses and duplicates nothing."""
    run_dir, n = tmp_path / "r", len(HOSTILE)
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    proc = subprocess.Popen([sys.executable, "-m", "tests.unit.hostile_runner", str(run_dir), str(n)],
                            cwd=ROOT, env=env, stdout=subprocess.PIPE, text=True)
    evaluated = 0
    for line in proc.stdout:
        evaluated += line.strip() == "evaluate"
        if evaluated == 3:  # iteration 3 evaluated, not yet summarised or committed
            proc.send_signal(signal.SIGKILL)
            break
    proc.wait()
    assert proc.returncode == -signal.SIGKILL
    assert run_status(run_dir)["iterations"] == 2
    resumed = subprocess.run([sys.executable, "-m", "tests.unit.hostile_runner", str(run_dir), str(n),
                              "--resume"],
                             cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    status = run_status(run_dir)
    assert status["iterations"] == n and status["programs"] == n + 1
    records = _records(run_dir)
    assert [r["id"] for r in records] == [f"it{i:05d}" for i in range(n + 1)]
    initial = records[0]["combined_score"]
    assert initial == pytest.approx(21.891622105209393)
    # the editor puts each program into the parent's EVOLVE-BLOCK: find it by its body
    seen = {name: r for r in records[1:] for name, source in HOSTILE.items()
            if _normal(source) in _normal(r["source"])}
    assert len(seen) >= len(HOSTILE) - 1  # a replay after the kill may repeat one program
    for record in records[1:]:
        assert record["combined_score"] < initial, record["id"]
    for name, record in seen.items():
        assert EXPECTED[name](record), (name, record["status"], record["reason"])
    assert status["best_score"] == pytest.approx(initial)


def test_a_crashing_grader_fails_the_child_and_the_run_goes_on(tmp_path, models, monkeypatch):
    """An exception in the grader (or anywhere in the evaluation) is that child's failure, not the run's."""
    from contextevolve.tasks.model_placement.task import ModelPlacement

    real = ModelPlacement.grade_run
    graded = {"n": 0}

    def flaky(self, run):
        graded["n"] += 1
        if graded["n"] == 2:  # the initial program is graded first; the next graded child meets the bug
            raise ZeroDivisionError("grader bug")
        return real(self, run)

    monkeypatch.setattr(ModelPlacement, "grade_run", flaky)
    boom = {"n": 0}
    import contextevolve.evaluation.executors as executors

    real_eval = executors.evaluate_by_name

    def sometimes_explodes(task, source, timeout_s, limits):
        boom["n"] += 1
        if boom["n"] == 2:
            raise OSError("disk full while staging the sandbox")
        return real_eval(task, source, timeout_s, limits)

    monkeypatch.setattr(executors.LocalExecutor, "evaluate",
                        lambda self, task, source, timeout_s=None, limits=None: sometimes_explodes(
                            task, source, timeout_s, limits))
    result = evolve("model_placement", iterations=3, run_dir=tmp_path / "r", max_retries=0)
    records = _records(tmp_path / "r")
    assert result.iterations == 3 and len(records) == 4
    assert records[1]["status"] == "failed" and "disk full while staging" in records[1]["reason"]
    bugged = [r for r in records[2:] if "grader bug" in r["reason"]]
    assert len(bugged) == 1 and bugged[0]["status"] == "invalid"
    assert bugged[0]["combined_score"] == TASK.worst_score
