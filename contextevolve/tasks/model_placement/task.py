"""Model Placement task: description, initial program, and the trusted grader.

A GPU's KV-cache pressure (KVPR) is Σ(req_rate / slo) / (80 − Σ model_size), ``FULL_GPU_KVPR`` when
its memory is full. ``max_kvpr`` = 1 / mean over the 50 cases of the worst GPU's KVPR, a failed case
counting ``FULL_GPU_KVPR``; ``success_rate`` = share of cases returned within ``CASE_TIMEOUT_S``;
``combined_score`` = max_kvpr + success_rate. A missing, repeated or foreign model, a bad GPU id or
an overfull GPU makes the program ``invalid``. Why, and where ADRS differs: docs/tasks.md, *Model
Placement*.
"""

from __future__ import annotations

from collections import Counter
from statistics import fmean

from contextevolve.tasks.base import Call, CandidateRun, EvalJob, Evaluation, MetricSpec, Task
from contextevolve.tasks.model_placement.cases import GPU_MEM_SIZE_GB, Case, test_cases

FULL_GPU_KVPR = 1_000_000.0
"""KVPR assigned to a GPU with no free memory (ADRS convention)."""
CASE_TIMEOUT_S = 10.0
HARNESS = "contextevolve.tasks.model_placement.harness"
MAX_ROWS = 1000
"""Most GPU rows a case's placement may have (the graded outputs are bounded before they are read)."""

DESCRIPTION = """\
Model Placement (from Prism). Place LLMs on GPUs with 80 GB of memory each.
Implement `compute_model_placement(gpu_num, models) -> dict[int, list]` where GPU ids are the
ints 0..gpu_num-1 and each model object has: model_name, model_size (GB), req_rate (requests/s),
slo (latency target, s), cur_gpu_id. Every given model object must appear exactly once in the
result and the models on a GPU must fit in its 80 GB.
KV-cache pressure (KVPR) of a GPU = sum(req_rate / slo) of its models / (80 - sum(model_size)).
Goal: minimise the maximum KVPR over GPUs (balance request load against free memory).
Score = 1 / mean(max KVPR over 50 cases) + success rate; higher is better. Cases have 5-9 GPUs
and twice as many models (size 10-29 GB, req_rate 1-9, slo 5-9). Keep each case fast (< 10 s).
"""


class ModelPlacement(Task):
    """ADRS Model Placement (Prism): minimise the worst GPU's KV-cache pressure."""

    name = "model_placement"
    title = "Model Placement (MP)"
    description = DESCRIPTION
    metrics = [
        MetricSpec(name="max_kvpr", description="1 / mean over cases of the max GPU KV-cache pressure"),
        MetricSpec(name="success_rate", description="fraction of cases solved without error within 10 s"),
    ]
    higher_is_better = True
    timeout_s = 60.0
    baseline_files = {"heuristic": "heuristic.py", "human_sota": "human_sota.py"}

    def job(self) -> EvalJob:
        """One call per case (inputs: that case's GPUs and models), each limited to 10 s."""
        return EvalJob(harness=HARNESS, entry="compute_model_placement", calls=[
            Call(fn="place", args={"gpu_num": c.gpu_num, "models": [list(m) for m in c.models]},
                 timeout_s=CASE_TIMEOUT_S) for c in test_cases()])

    def grade_run(self, run: CandidateRun) -> Evaluation:
        """Grade the placements with our own copy of the 50 cases (metrics ``max_kvpr``, ``success_rate``)."""
        outs = [{"ok": True, **c.value} if c.status == "ok" and isinstance(c.value, dict)
                else {"ok": c.status == "ok", "error": c.error or "malformed output"} for c in run.calls]
        return grade({"cases": outs}, test_cases())


class _Invalid(Exception):
    """A contract violation found while grading; its message is the reason."""


def case_max_kvpr(case: Case, gpu_models: dict[int, list[int]]) -> float:
    """Max over GPUs of KVPR for a placement given as ``{gpu_id: [model index]}`` (trusted inputs)."""
    worst = 0.0
    for gpu_id in range(case.gpu_num):
        members = [case.models[i] for i in gpu_models.get(gpu_id, [])]
        free = GPU_MEM_SIZE_GB - sum(m.model_size for m in members)
        load = sum(m.req_rate / m.slo for m in members)
        worst = max(worst, load / free if free > 0 else FULL_GPU_KVPR)
    return worst


def _check_case(n: int, case: Case, out: dict) -> dict[int, list[int]]:
    """Validate one case's serialised placement; return ``{gpu_id: [model index]}``."""
    if "not_a_dict" in out:
        raise _Invalid(f"case {n}: returned {str(out['not_a_dict'])[:40]}, "
                       "expected dict {gpu_id: [models]}")
    rows = out.get("placement")
    if not isinstance(rows, list) or len(rows) > MAX_ROWS:
        raise _Invalid(f"case {n}: malformed placement record")
    gpu_models: dict[int, list[int]] = {}
    for row in rows:
        if not (isinstance(row, list) and len(row) == 4 and isinstance(row[2], list)
                and len(row[2]) <= len(case.models) + 1 and isinstance(row[3], list)):
            raise _Invalid(f"case {n}: malformed placement record")
        key, key_is_int, idx, bad = row
        if key_is_int is not True or type(key) is not int or not 0 <= key < case.gpu_num:
            raise _Invalid(f"case {n}: unknown GPU id {key} (valid ids are the ints 0..{case.gpu_num - 1})")
        if any(type(i) is not int or not -1 <= i < len(case.models) for i in idx):
            raise _Invalid(f"case {n}: malformed placement record")
        if -1 in idx:
            raise _Invalid(f"case {n}: GPU {key} holds objects that are not the given models: "
                           f"{', '.join(str(b)[:80] for b in bad[:3])}")
        gpu_models.setdefault(key, []).extend(idx)
    counts = Counter(i for idx in gpu_models.values() for i in idx)
    missing = [case.models[i].model_name for i in range(len(case.models)) if counts[i] == 0]
    if missing:
        raise _Invalid(f"case {n}: models not placed: {', '.join(missing[:5])}")
    twice = [case.models[i].model_name for i, c in counts.items() if c > 1]
    if twice:
        raise _Invalid(f"case {n}: models placed more than once: {', '.join(twice[:5])}")
    for gpu_id, idx in gpu_models.items():
        used = sum(case.models[i].model_size for i in idx)
        if used > GPU_MEM_SIZE_GB:
            raise _Invalid(f"case {n}: GPU {gpu_id} holds {used} GB > {GPU_MEM_SIZE_GB} GB")
    return gpu_models


def grade(result: object, cases: tuple[Case, ...]) -> Evaluation:
    """Score the harness output ``result`` against the trusted ``cases``.

    Raises nothing: malformed output is an ``invalid`` Evaluation with a reason.
    """
    zero = {"max_kvpr": 0.0, "success_rate": 0.0}
    outs = result.get("cases") if isinstance(result, dict) else None
    if not isinstance(outs, list) or len(outs) != len(cases):
        return Evaluation(status="invalid", reason="malformed harness output", metrics=zero)
    pressures: list[tuple[int, float]] = []
    errors: list[str] = []
    try:
        for n, (case, out) in enumerate(zip(cases, outs)):
            if not isinstance(out, dict) or out.get("ok") is not True:
                errors.append(
                    f"case {n}: "
                    f"{str(out.get('error', 'failed'))[:200] if isinstance(out, dict) else 'failed'}")
                continue
            pressures.append((n, case_max_kvpr(case, _check_case(n, case, out))))
    except _Invalid as exc:
        return Evaluation(status="invalid", reason=str(exc), metrics=zero,
                          diagnostics=f"Invalid placement: {exc}")
    success_rate = len(pressures) / len(cases)
    if not pressures:
        return Evaluation(status="failed", reason=f"every case failed; first: {errors[0]}", metrics=zero,
                          diagnostics="\n".join(errors[:3]))
    # a failed case counts as a full GPU (partial failure never pays)
    mean_pressure = fmean([p for _, p in pressures] + [FULL_GPU_KVPR] * (len(cases) - len(pressures)))
    max_kvpr = 1.0 / mean_pressure if mean_pressure > 0 else 0.0
    worst_n, worst_p = max(pressures, key=lambda t: t[1])
    lines = [
        f"{len(pressures)}/{len(cases)} cases placed; mean worst-GPU KVPR {mean_pressure:.4f}"
        + (" (failed cases count as a full GPU, KVPR 1e6)" if errors else ""),
        f"hardest case {worst_n} ({cases[worst_n].gpu_num} GPUs): worst-GPU KVPR {worst_p:.4f}",
    ]
    lines += errors[:2]
    return Evaluation(
        status="ok",
        metrics={"max_kvpr": max_kvpr, "success_rate": success_rate},
        combined_score=max_kvpr + success_rate,
        diagnostics="\n".join(lines),
    )
