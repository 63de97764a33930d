"""Model Placement grader: the initial program's score, and every way to cheat or break scoring 0."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from contextevolve.tasks.model_placement.cases import test_cases as mp_cases
from contextevolve.tasks.registry import get_task

TASK = get_task("model_placement")
INITIAL = TASK.initial_program
LOOP = "for model in ordered:"


def variant(old: str, new: str) -> str:
    assert old in INITIAL
    return INITIAL.replace(old, new)


def test_cases_match_adrs_generator():
    cases = mp_cases()
    assert len(cases) == 50
    assert all(5 <= c.gpu_num <= 9 and len(c.models) == 2 * c.gpu_num for c in cases)
    assert all(10 <= m.model_size <= 29 and 1 <= m.req_rate <= 9 and 5 <= m.slo <= 9
               for c in cases for m in c.models)
    assert mp_cases() is cases  # cached, identical every call


def test_initial_program_scores_21_89():
    result = TASK.evaluate(INITIAL)
    assert result.status == "ok", result.reason
    assert result.metrics["max_kvpr"] == pytest.approx(20.89, abs=0.005)
    assert result.metrics["success_rate"] == 1.0
    assert result.combined_score == pytest.approx(21.89, abs=0.005)
    assert "50/50 cases placed" in result.diagnostics


def test_better_placement_scores_higher():
    better = variant("kvpr = load[gpu_id] / free_mem[gpu_id]",
                     "kvpr = (load[gpu_id] + model.req_rate / model.slo) / "
                     "max(free_mem[gpu_id] - model.model_size, 1e-9)")
    assert TASK.evaluate(better).combined_score > TASK.evaluate(INITIAL).combined_score


@pytest.mark.parametrize("source, reason", [
    (variant("placement[best_gpu].append(model)", "pass"), "models not placed"),
    (variant("placement[best_gpu].append(model)", "placement[best_gpu].append(model)\n"
             "        placement[best_gpu].append(model)"), "more than once"),
    (variant("    return placement\n", "    return {0: list(models)}\n"), "GB >"),
    (variant("    return placement\n", "    placement[gpu_num] = placement.pop(0)\n    return placement\n"),
     "unknown GPU id"),
    (variant("    return placement\n", "    return {str(k): v for k, v in placement.items()}\n"),
     "unknown GPU id"),
    (variant("placement[best_gpu].append(model)",
             "placement[best_gpu].append(type(model)(model.model_name, 0, 0, 1, 0))"),
     "not the given models"),
    (variant("    return placement\n", "    return list(placement.values())\n"), "expected dict"),
    # Shrinking the models handed in must not help: the grader uses its own copy.
    (variant(LOOP, "for m in models:\n        m.model_size = 0\n    " + LOOP).replace(
        "if model.model_size <= free_mem[gpu_id] and free_mem[gpu_id] > 0:", "if gpu_id == 0:"), "GB >"),
])
def test_invalid_placements_score_zero_with_reason(source, reason):
    result = TASK.evaluate(source)
    assert result.status == "invalid"
    assert result.combined_score == 0.0
    assert reason in result.reason


@pytest.mark.parametrize("source, reason", [
    ("def compute_model_placement(gpu_num, models):\n    return (\n", "SyntaxError"),
    ("x = 1\n", "no function compute_model_placement"),
    ("def compute_model_placement(gpu_num, models):\n    raise RuntimeError('boom')\n", "every case failed"),
    ("import sys\nsys.exit(3)\n", "SystemExit"),
    ("import os\nos._exit(0)\n", "without a result"),
])
def test_broken_programs_fail_with_reason(source, reason):
    result = TASK.evaluate(source)
    assert result.status == "failed"
    assert result.combined_score == 0.0
    assert reason in result.reason


def test_some_cases_failing_lowers_success_rate():
    source = variant("    ordered = sorted(",
                     "    if gpu_num == 5:\n        raise ValueError('no')\n    ordered = sorted(")
    result = TASK.evaluate(source)
    fives = sum(c.gpu_num == 5 for c in mp_cases())
    assert result.status == "ok"
    assert result.metrics["success_rate"] == pytest.approx((50 - fives) / 50)


def test_hung_candidate_is_killed_at_timeout_with_its_children(tmp_path):
    # the forked child becomes `sleep 9<marker>` (pids differ in the sandbox)
    marker = f"{time.time() % 1000:.6f}"
    source = (f"import os, time\nif os.fork() == 0:\n    os.execvp('sleep', ['sleep', '9{marker}'])\n"
              "while True: pass\n")
    start = time.perf_counter()
    result = TASK.evaluate(source, timeout_s=2)
    assert time.perf_counter() - start < 10
    assert result.status == "timeout" and result.combined_score == 0.0
    assert "2 s" in result.reason
    time.sleep(0.2)
    survivors = [pid for pid in os.listdir("/proc") if pid.isdigit() and f"9{marker}" in _cmdline(pid)]
    assert survivors == [], "the candidate's forked child survived the timeout"


def _cmdline(pid: str) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace")
    except OSError:
        return ""


def test_case_time_limit_counts_as_case_failure(monkeypatch):
    from contextevolve.tasks.model_placement import task as mp_task

    monkeypatch.setattr(mp_task, "CASE_TIMEOUT_S", 0.2)
    source = variant("    ordered = sorted(",
                     "    if gpu_num == 9:\n        while True: pass\n    ordered = sorted(")
    result = TASK.evaluate(source)
    nines = sum(c.gpu_num == 9 for c in mp_cases())
    assert result.status == "ok"
    assert result.metrics["success_rate"] == pytest.approx((50 - nines) / 50)
    assert "exceeded" in result.diagnostics


def test_candidate_sees_no_secrets(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-secret")
    source = variant("    ordered = sorted(", "    import os\n    if os.environ.get('OPENAI_API_KEY'):\n"
                     "        raise RuntimeError('leak')\n    ordered = sorted(")
    assert TASK.evaluate(source).status == "ok"
