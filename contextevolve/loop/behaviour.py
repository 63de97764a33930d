"""Behavioural twins: valid children whose change had no effect on any result.

A code twin (:mod:`contextevolve.program.twins`) is the same program text and is never evaluated. A
*behavioural twin* is new text that behaves as a stored program does: it ran, and its results equal
that program's. It costs an evaluation but teaches nothing, so it is not offered as a parent, it counts
toward the stale-parent rule, the Summarizer is not asked about it, the Navigator sees its step as
"no effect", and the Generator is asked once more, told that its change had no effect
(:func:`no_effect_reason`). Why: docs/decisions/behavioural-twins.md.
"""

from __future__ import annotations

from collections.abc import Iterable

from contextevolve.memory.records import ProgramRecord
from contextevolve.tasks.base import Task


def same_results(task: Task, child: ProgramRecord, other: ProgramRecord) -> bool:
    """Whether valid ``child`` behaves as valid ``other`` did.

    Either every metric and the combined score are equal to the bit (other outputs with the same results:
    the change had no effect on any result), or, when both carry an outputs digest (a task whose outputs
    are what it scores, :attr:`Task.outputs_identify_behaviour`), the outputs are the same and the score is
    within the task's timing tolerance of ``other``'s either way (:meth:`Task.better`; the same outputs
    computed faster is an improvement of a timed task, slower a decline, neither a twin).
    """
    if child.status != "ok" or other.status != "ok":
        return False
    if child.metrics and child.metrics == other.metrics and child.combined_score == other.combined_score:
        return True
    return (bool(child.outputs_digest) and child.outputs_digest == other.outputs_digest
            and not task.better(child.combined_score, other.combined_score)
            and not task.better(other.combined_score, child.combined_score))


def behavioural_twin(task: Task, child: ProgramRecord, parent: ProgramRecord,
                     stored: Iterable[ProgramRecord]) -> str:
    """Id of the first of ``parent`` and ``stored`` whose results ``child``'s equal, else ``""``.

    Only programs with a behaviour of their own are compared with (a twin's twin is an earlier program).
    """
    for other in (parent, *stored):
        if other.id != child.id and not other.behavioural_twin_of and same_results(task, child, other):
            return other.id
    return ""


def measured_effect(twin: ProgramRecord) -> str:
    """What was measured of a behavioural twin of ``twin``: every result equals ``twin``'s."""
    return (f"every result equals {twin.id}'s (score {twin.combined_score:.6g}), so the change did not alter "
            f"what the program computes")


def no_effect_reason(twin: ProgramRecord) -> str:
    """Why a behavioural twin of ``twin`` was asked again: ``no effect:`` and :func:`measured_effect`."""
    return f"no effect: {measured_effect(twin)}"
