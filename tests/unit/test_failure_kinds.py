"""Failure kinds: set where a failure is known, read by every consumer; a reason's text never decides."""

from __future__ import annotations

import ast
import json
from pathlib import Path

from contextevolve.api import run_status
from contextevolve.evaluation.limits import SandboxLimits
from contextevolve.graph.context import RunContext
from contextevolve.loop.policy import SearchPolicy
from contextevolve.memory.records import ProgramRecord, RepairAttempt, legacy_failure_kind, repairable
from contextevolve.tasks.prechecks import precheck
from contextevolve.tasks.registry import get_task
from tests.fakes import BETTER_PROGRAM, INITIAL, fenced, reply, scripted
from tests.unit.test_repair import NAME_ERROR, run

ROOT = Path(__file__).resolve().parents[2]
TASK = get_task("model_placement")

SEARCHES = {"startswith", "endswith", "search", "match", "fullmatch", "findall", "finditer", "find", "index",
            "count", "missing_import"}
"""Calls that look into text: a reason handed to one of them is being read by code."""
ALLOWED = {
    ("contextevolve/memory/records.py", "legacy_failure_kind"):
        "gives a record stored before records carried a kind its kind, once, on load",
    ("contextevolve/loop/policy.py", "import_fix"):
        "parses the candidate's own NameError (CPython's fixed message) to add an import, not our reason",
}
"""(file, function) -> why it may read a reason's text."""


def _reason_named(node: ast.AST) -> bool:
    return any(isinstance(n, ast.Name) and "reason" in n.id.lower() or isinstance(n, ast.Attribute)
               and "reason" in n.attr.lower() and n.attr != "stop_reason" for n in ast.walk(node))


def reason_readers(path: Path) -> list[tuple[str, int]]:
    """``(enclosing function, line)`` of every place in ``path`` where code searches a reason's text.

    That is, where it searches or compares a reason's text (``reason.startswith``, ``"x" in reason``,
    ``reason == "x"``, ``re.search(p, reason)``).
    """
    found = []
    tree = ast.parse(path.read_text())
    for fn in [n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]:
        for node in ast.walk(fn):
            if isinstance(node, ast.Call):
                name = (node.func.attr if isinstance(node.func, ast.Attribute)
                        else getattr(node.func, "id", ""))
                receiver = [node.func.value] if isinstance(node.func, ast.Attribute) else []
                if name in SEARCHES and any(_reason_named(a) for a in [*receiver, *node.args]):
                    found.append((fn.name, node.lineno))
            elif isinstance(node, ast.Compare) and any(isinstance(op, (ast.In, ast.NotIn, ast.Eq, ast.NotEq))
                                                       for op in node.ops):
                sides = [node.left, *node.comparators]
                if any(_reason_named(s) for s in sides) and any(
                        isinstance(s, ast.Constant) and isinstance(s.value, str) for s in sides):
                    found.append((fn.name, node.lineno))
    return found


def test_no_code_path_decides_by_a_reasons_text():
    readers = []
    for path in sorted([*(ROOT / "contextevolve").rglob("*.py"), *(ROOT / "benchmarks").rglob("*.py")]):
        rel = str(path.relative_to(ROOT))
        readers += [f"{rel}:{line} in {fn}()" for fn, line in reason_readers(path)
                    if (rel, fn) not in ALLOWED]
    assert not readers, ("decides by a reason's text (set and read a failure kind instead):\n"
                         + "\n".join(readers))


def test_the_check_sees_a_reason_read_as_text(tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text("def f(record, reason):\n    if record.reason.startswith('endpoint'):\n        return 1\n"
                   "    return 'duplicate' in reason\n\n"
                   "def g(r):\n    return r.stop_reason == 'x' or r.status == 'ok'\n")
    assert reason_readers(bad) == [("f", 2), ("f", 4)]


def test_records_written_before_failure_kinds_load_with_one():
    """Old run directories still load: a record without ``failure_kind`` gets the one its reason implies."""
    old = {"id": "it00003", "iteration": 3, "status": "failed",
           "reason": "duplicate of it00001 (the same code)"}
    assert ProgramRecord.model_validate(old).failure_kind == "twin"
    assert ProgramRecord.model_validate_json(json.dumps({**old, "reason": "endpoint fault: empty completion"})
                                             ).failure_kind == "endpoint"
    assert legacy_failure_kind("failed", "pre-check: SyntaxError: invalid syntax (line 3)") == "compile"
    assert legacy_failure_kind("failed", "pre-check: smoke run: ZeroDivisionError") == "precheck"
    assert legacy_failure_kind("failed", "repair 1 could not be applied: no code block") == "edit"
    assert legacy_failure_kind("failed", "every case failed; first: KeyError") == "runtime"
    assert legacy_failure_kind("timeout", "wall-clock limit") == "timeout"
    assert legacy_failure_kind("ok", "") == ""
    assert RepairAttempt.model_validate(
        {"attempt": 1, "status": "invalid", "reason": "x"}).failure_kind == "invalid"
    # a record written now keeps its kind whatever its reason says
    now = ProgramRecord(id="a", iteration=1, status="failed", reason="duplicate of it00001",
                        failure_kind="runtime")
    assert ProgramRecord.model_validate_json(now.model_dump_json()).failure_kind == "runtime"


def test_repairable_kinds():
    assert [k for k in ("endpoint", "edit", "twin", "compile", "precheck", "runtime", "invalid", "timeout",
                        "evaluator", "") if repairable(k)] == ["edit", "compile", "precheck", "runtime",
                                                               "invalid", "evaluator"]


def test_prechecks_and_evaluations_carry_their_kind():
    limits = SandboxLimits()
    assert precheck(TASK, "def compute_model_placement(gpu_num, models:\n    pass\n",
                    limits).failure_kind == "compile"
    assert precheck(TASK, "def f(a, b):\n    return {}\n", limits).failure_kind == "precheck"
    assert precheck(TASK, NAME_ERROR, limits).failure_kind == "precheck"  # the smoke run raised
    assert TASK.evaluate(NAME_ERROR).failure_kind == "runtime"
    assert TASK.evaluate(INITIAL).failure_kind == ""


def test_a_child_has_the_kind_of_where_it_failed_not_of_what_its_reason_says(tmp_path):
    """A program whose own error text reads like an endpoint fault is still the program's fault."""
    lying = BETTER_PROGRAM.replace("    ordered = sorted(",
                                   "    raise RuntimeError('endpoint fault: duplicate of it00000')\n"
                                   "    ordered = sorted(")
    generator = scripted(reply(fenced(lying), 900, 400), reply(fenced(BETTER_PROGRAM), 900, 400), cycle=False)
    _, records, _ = run(tmp_path, generator)
    child = records[1]
    assert len(generator.seen) == 1 and child["attempts"] == []  # neither a twin nor a missing import
    assert child["status"] == "failed" and child["failure_kind"] == "precheck"
    assert "endpoint fault" in child["reason"]


def test_a_twin_is_a_failed_child_of_kind_twin_and_is_not_repaired(tmp_path):
    generator = scripted(reply(fenced(INITIAL), 900, 400), reply(fenced(INITIAL), 900, 400),
                         reply(fenced(BETTER_PROGRAM), 900, 400), cycle=False)
    _, records, _ = run(tmp_path, generator)
    child = records[1]
    assert len(generator.seen) == 2  # the first ask and its second ask; no repair of a twin
    assert child["status"] == "failed" and child["failure_kind"] == "twin" and not child["attempts"]
    assert run_status(tmp_path / "r")["failure_kinds"] == {"twin": 1}


def test_workers_sample_with_seeds_of_their_own():
    """Each worker samples with a seed of its own; worker 0 keeps the run's seed.

    The workers' first iterations ask with the same prompt (same parent, no guidance yet): with one seed
    an endpoint that honours seeds answers them with the same program.
    """
    ctx = RunContext(seed=7, workers=3)
    policies = [SearchPolicy.of(ctx, iteration, worker) for worker, iteration in enumerate((4, 5, 6))]
    requests = [_three_kinds(p) for p in policies]
    assert (policies[0].seed, policies[0].temperature, policies[0].iteration) == (7, 0.8, 4)
    assert [ctx.worker_seed(worker) for worker in range(3)] == [7, 10_007, 20_007]
    seeds = [r.seed for worker in requests for r in worker]
    assert len(set(seeds)) == len(seeds) == 9


def _three_kinds(policy: SearchPolicy) -> list:
    """A request of each kind (loop.requests.KINDS) in ``policy``'s iteration."""
    from contextevolve.loop import requests
    from contextevolve.memory.records import ProgramRecord

    task = get_task("model_placement")
    parent = ProgramRecord(id="it00000", iteration=0, source=INITIAL, status="ok", combined_score=1.0)
    return [requests.first(policy, [], "go", base=INITIAL), requests.second_ask(task, parent, policy),
            requests.no_effect(task, parent, parent, policy)]


def test_every_kind_of_request_of_an_iteration_has_its_own_seed():
    first, second, no_effect = _three_kinds(SearchPolicy.of(RunContext(seed=7), 4))
    assert [first.seed, second.seed, no_effect.seed] == [311, 12, 711]
    assert second.temperature == no_effect.temperature > first.temperature
    assert second.mutation and no_effect.mutation and second.mutation != no_effect.mutation
    assert (first.kind, second.kind, no_effect.kind) == ("first", "second_ask", "no_effect")
    assert second.hidden_view and no_effect.hidden_view and not first.hidden_view  # the full form


def test_a_failure_on_our_side_of_the_sandbox_is_kind_evaluator(monkeypatch):
    from contextevolve.evaluation import isolation

    def broken(*args, **kwargs):
        raise OSError("no space left on device")

    monkeypatch.setattr(isolation, "_supervise", broken)
    result = TASK.evaluate(INITIAL)
    assert (result.status == "failed" and result.failure_kind == "evaluator"
            and "no space left" in result.reason)
    assert legacy_failure_kind("failed", "a restart's second ask could not be applied: no code") == "edit"
    assert legacy_failure_kind("failed", "evaluation on the Ray cluster failed: RayError: x") == "evaluator"
