"""Repair prompt: a failed child, its error and traceback excerpt → a minimal fix.

The Generator's model answers it (tokens booked under the ``repair`` role), asked for the smallest change that
removes the error while keeping the child's idea, written as the run's edit form says
(:mod:`contextevolve.program.forms`); any reply format is accepted. The system message and the task
description come first and are the Generator's own, so a server reuses them from the Generator's request just
before. The last repair may instead start again from the parent (:func:`restart_messages`).
"""

from __future__ import annotations

from langchain_core.messages import HumanMessage, SystemMessage

from contextevolve.program.forms import EditForm
from contextevolve.prompts.generator import SYSTEM

FIX = ("You are fixing a bug in a program written for an evolutionary search: make the smallest change that "
       "fixes the error and keep the program's algorithm and idea.")
REPLY_CHARS = 1500
"""Characters of an unusable earlier reply shown back to the model."""


def _error_section(head: str, reason: str, traceback: str, whose: str) -> str:
    """``head`` + the failure's reason, and its traceback excerpt (line numbers of ``whose`` code)."""
    return head + reason + (f"\nTraceback (lines of {whose}):\n{traceback}" if traceback else "")


def messages(task_description: str, program: str, reason: str, traceback: str, form: EditForm, *,
             unusable_reply: str = "", idea: str = "") -> list:
    """Messages asking to repair ``program``.

    Args:
        task_description: the task's prose (the contract the program must keep).
        program: the failing program, or the parent when the Generator's reply never became a program.
        reason: the evaluator's or the editor's reason for the failure.
        traceback: frames of the program's own file and the exception (may be empty).
        form: the run's edit form (how the reply must be written: :meth:`EditForm.repair_format`).
        unusable_reply: the reply that could not be applied to ``program`` (edit failures only).
        idea: the direction the failed version was following, to keep.
    """
    parts = [f"## Task\n{task_description}", f"## Program\n```python\n{program}```"]
    if unusable_reply:
        parts.append(f"## Your previous reply could not be applied to this program\n"
                     f"{unusable_reply[:REPLY_CHARS]}")
    parts.append(_error_section("## Error\n", reason, traceback, "the program above"))
    if idea:
        parts.append(f"## The idea to keep\n{idea}")
    parts.append(f"## Your job\n{FIX} Keep the function name and signature. " + form.repair_format(program))
    return [SystemMessage(SYSTEM), HumanMessage("\n\n".join(parts))]


def restart_messages(task_description: str, parent: str, reason: str, traceback: str, form: EditForm, *,
                     idea: str = "", parent_text: str = "") -> list:
    """Messages asking for the child again, written from its (valid) parent, told the failed version's error.

    The last repair, with ``repair_restart``. The failed version's error is shown as a warning, its code
    is not (why: docs/decisions/repair-restart.md).

    Args:
        task_description: the task's prose.
        parent: the parent's source (valid: it was admitted and selected).
        reason: the failed version's reason.
        traceback: the failed version's frames of its own file and the exception (may be empty).
        form: the run's edit form (its repair instructions, against ``parent``).
        idea: the direction the failed version was following.
        parent_text: the parent's section exactly as the Generator's prompt showed it
            (:func:`contextevolve.prompts.generator.parent_section`), so the request starts with the
            tokens the server has just read. Default: the parent's code under ``## Program``.
    """
    parts = [f"## Task\n{task_description}",
             parent_text.rstrip("\n") or f"## Program\n```python\n{parent}```"]
    if idea:
        parts.append(f"## Direction\n{idea}")
    parts.append(_error_section("## A previous attempt failed\n"
                                "An earlier version written from this program failed: ",
                                reason, traceback, "that version"))
    parts.append("## Your job\nAn earlier attempt at the change failed: write it again, correctly, starting "
                 "from the current program above and following the direction, without that error. Use the "
                 "inputs exactly as the task describes them, and do not define stand-ins for them. Keep the "
                 "function name and signature. "
                 + form.repair_format(parent))
    return [SystemMessage(SYSTEM), HumanMessage("\n\n".join(parts))]
