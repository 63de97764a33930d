"""Cheap checks a child must pass before its full evaluation.

Cheapest first: the program compiles and defines the task's entry function with the contract's
positional parameters; then one small case (:meth:`~contextevolve.tasks.base.Task.smoke_job`) runs in
the sandbox under a short limit. A failure is ``failed`` (kind ``compile`` or ``precheck``, reason
starting ``pre-check:``) and costs no full evaluation. A smoke call that only times out passes: a slow
program is the full evaluation's to judge (docs/search.md).
"""

from __future__ import annotations

import ast

from contextevolve.evaluation.isolation import run_candidate
from contextevolve.evaluation.limits import SandboxLimits
from contextevolve.evaluation.tracebacks import candidate_excerpt
from contextevolve.memory.records import FailureKind
from contextevolve.tasks.base import Evaluation, Task

SMOKE_WALL_S = 20.0
"""Wall-clock cap of the smoke run, seconds (the task's own limit when that is lower)."""
PREFIX = "pre-check: "
"""Start of the reason of a program stopped by a pre-check."""


def _positional(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> tuple[int, int]:
    """(required, accepted) positional parameters of ``fn``; accepted is -1 with ``*args``."""
    params = [*fn.args.posonlyargs, *fn.args.args]
    required = len(params) - len(fn.args.defaults)
    return required, -1 if fn.args.vararg else len(params)


def _entry(tree: ast.Module, name: str) -> ast.FunctionDef | ast.AsyncFunctionDef | None:
    found = None
    for node in tree.body:  # the last top-level definition wins, as at import
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name == name:
            found = node
    return found


def static_check(task: Task, source: str) -> str:
    """Why ``source`` cannot be ``task``'s program without running it; ``""`` when it can.

    It is :func:`static_failure`'s reason.
    """
    return static_failure(task, source)[1]


def static_failure(task: Task, source: str) -> tuple[FailureKind, str]:
    """``(kind, reason)`` of why ``source`` cannot be ``task``'s program without running it, or ``("", "")``.

    Checks that it compiles (kind ``compile``) and that it defines ``task.job().entry`` at top level
    taking the contract's positional arguments (kind ``precheck``; as many as the initial program's
    entry function; a name bound another way, e.g. ``entry = other_fn``, is accepted and left to the
    smoke run).
    """
    try:
        tree = ast.parse(source)
        compile(tree, "candidate.py", "exec")
    except SyntaxError as exc:
        text = (exc.text or "").strip()[:120]
        return "compile", (f"{PREFIX}SyntaxError: {exc.msg} (line {exc.lineno}"
                           + (f": {text})" if text else ")"))
    except (ValueError, MemoryError, RecursionError) as exc:
        return "compile", f"{PREFIX}the program does not compile: {type(exc).__name__}"
    name = task.job().entry
    if not name:  # the task's evaluator decides what it calls (a user's problem)
        return "", ""
    fn = _entry(tree, name)
    if fn is None:
        assigned = any(isinstance(n, (ast.Assign, ast.ImportFrom, ast.Import, ast.ClassDef))
                       for n in tree.body)
        return ("", "") if assigned else ("precheck",
                                          f"{PREFIX}the program defines no top-level function {name}()")
    contract = _entry(ast.parse(task.initial_program), name)
    if contract is None:
        return "", ""
    need, _ = _positional(contract)
    required, accepted = _positional(fn)
    if required > need or (accepted != -1 and accepted < need):
        wanted = ", ".join(a.arg for a in [*contract.args.posonlyargs, *contract.args.args][:need])
        return "precheck", (f"{PREFIX}{name}() must take {need} positional arguments ({wanted}) "
                            "as in the contract")
    return "", ""


def smoke_check(task: Task, source: str, limits: SandboxLimits) -> Evaluation | None:
    """Run ``task.smoke_job()`` on ``source`` in the sandbox; a ``failed`` Evaluation if it raised or died.

    Else None (timeouts pass, see module doc). Never raises for a bad candidate.
    """
    job = task.smoke_job()
    if job is None:
        return None
    wall = min(SMOKE_WALL_S, limits.timeout_s or task.timeout_s)
    small = limits.model_copy(update={"timeout_s": wall, "cpu_s": min(limits.cpu_s or wall, wall)})
    run = run_candidate(source, job, limits=small)
    if run.status == "timeout":
        return None
    if run.status != "ok":
        return task.rejected("failed", PREFIX + run.reason, seconds=run.seconds,
                             traceback=candidate_excerpt(run.traceback), failure_kind="precheck")
    for call in run.calls:
        if call.status in ("error", "crashed"):
            return task.rejected("failed", f"{PREFIX}smoke run: {call.error}"[:500], seconds=run.seconds,
                                 traceback=candidate_excerpt(call.traceback), failure_kind="precheck")
        if call.status == "ok" and (why := task.smoke_refusal(call.value)):
            return task.rejected("failed", f"{PREFIX}smoke run: {why}"[:500], seconds=run.seconds,
                                 failure_kind="precheck")
    return None


def precheck(task: Task, source: str, limits: SandboxLimits) -> Evaluation | None:
    """:func:`static_check` then :func:`smoke_check`: the failed Evaluation of the first to fail, or None."""
    kind, reason = static_failure(task, source)
    if kind:
        return task.rejected("failed", reason, failure_kind=kind)
    return smoke_check(task, source, limits.resolved(task.timeout_s))
