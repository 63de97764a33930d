"""Salvage (issue 10, after repair): keep the part of a failed child's change that still works.

Not in the paper's Algorithm 1, and off with ``repair_attempts = 0`` (the paper's algorithm) or
``RunContext.search.salvage = False``. A child that is still failed or invalid when no repair is
due — its repairs are spent, or the last one gave back a known program — gets one salvage:
for its latest failed versions (newest first, at most ``SALVAGE_VERSIONS``), the largest set of
that version's changed hunks that, applied to the parent, compiles, is no twin of a known
program, survives the smoke run and returns something else than the parent there
(:mod:`contextevolve.hunks`): replayed on the failed children of earlier runs, salvage without
that last condition mostly kept changes that do nothing (classes never used, type annotations),
and the children scored exactly their parent's score. The program found replaces the
child's source and goes to ``evaluate`` for its full evaluation; the version it came from is kept
in the child's ``attempts`` (method ``salvage``, no tokens: no model is asked). When nothing
passes, the child stays as it was and goes to ``summarize``.
"""

from __future__ import annotations

from typing import Literal

from langgraph.runtime import Runtime

from contextevolve.graph.context import RunContext
from contextevolve.graph.state import LaneState
from contextevolve.hunks import SALVAGE_CHECKS, salvage as salvage_change
from contextevolve.memory.records import ProgramRecord, RepairAttempt
from contextevolve.nodes.generate import find_twin
from contextevolve.nodes.resources import memory_of, task_of
from contextevolve.tasks.prechecks import smoke_run, static_check

SALVAGE_VERSIONS = 2
"""Failed versions of a child searched, newest first."""


def salvage_due(ctx: RunContext, state: LaneState, child: ProgramRecord, status: str, repair_due: bool) -> bool:
    """True when the lane's child, ending with ``status``, should go to :func:`salvage`: it failed or is
    invalid, no repair is due, salvage is on (and repairs are: ``repair_attempts >= 1``), it has not
    run for this child, and ``child`` (its record) holds a failed version to salvage from."""
    return (ctx.search.salvage and ctx.search.repair_attempts >= 1 and not state.salvaged and not repair_due
            and status in ("failed", "invalid") and bool(child.source or any(a.source for a in child.attempts)))


def after_salvage(state: LaneState) -> Literal["evaluate", "summarize"]:
    """A salvaged program goes to evaluate; a child salvage found nothing for goes to summarize."""
    return "evaluate" if state.child_status == "pending" else "summarize"


def salvage(state: LaneState, runtime: Runtime[RunContext]) -> dict:
    """Search the child's failed versions for a passing part of their change (module docstring).

    Returns ``child_status`` ``pending`` when a program was found (stored as the child's source),
    else the child's status unchanged; ``salvaged`` is always set, so salvage runs once per child.
    A replay after a crash finds the stored program pending and sends it on to evaluate.
    """
    ctx = runtime.context
    task, memory = task_of(ctx), memory_of(ctx)
    child = memory.buffer.require(state.child_id)
    done = {"salvaged": True, "salvage_due": False, "repair_due": False}
    if child.status == "pending":  # replayed after a crash: the salvaged program is stored
        return {**done, "child_status": "pending"}
    parent = memory.buffer.require(child.parent_id)
    versions: list[str] = []
    for source in [child.source, *(a.source for a in reversed(child.attempts))]:
        if source and source != parent.source and source not in versions:
            versions.append(source)
    limits, entry = ctx.sandbox.resolved(task.timeout_s), task.job().entry

    def cheap(source: str) -> bool:
        return not static_check(task, source) and find_twin(memory, source, parent, entry) is None

    _, parent_values = smoke_run(task, parent.source, limits)

    def costly(source: str) -> bool:  # passes the smoke run and does something else than the parent there
        failure, values = smoke_run(task, source, limits)
        return failure is None and (values is None or parent_values is None or values != parent_values)

    for version in versions[:SALVAGE_VERSIONS]:
        found, kept, total = salvage_change(parent.source, version, cheap, costly, SALVAGE_CHECKS)
        if found is None:
            continue
        which = "this version's" if version == child.source else "an earlier failed version's"
        attempt = RepairAttempt(attempt=len(child.attempts) + 1, method="salvage", status=child.status,
                                reason=f"{child.reason} (salvage kept {kept} of {total} changed hunks of {which} "
                                       f"change)", source=child.source)
        memory.buffer.update(child.id, source=found, status="pending", reason="", diagnostics="", traceback="",
                             attempts=[*child.attempts, attempt])
        return {**done, "child_status": "pending"}
    return {**done, "child_status": child.status}
