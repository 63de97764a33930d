"""Repair prompt: a failed child, its error and traceback excerpt → a minimal fix (issue 10).

The Generator's model answers it (tokens are booked under the ``repair`` role). It is asked
for the smallest change that removes the error while keeping the child's idea, as
SEARCH/REPLACE edits against the failing program (``diff`` mode) or the whole fixed program
(``full`` mode); either reply format is accepted (:func:`contextevolve.editing.build_child`).
"""

from __future__ import annotations

from langchain_core.messages import HumanMessage, SystemMessage

from contextevolve.prompts.generator import edit_format

SYSTEM = ("You are an expert Python programmer fixing a bug in a program written for an evolutionary search. "
          "Make the smallest change that fixes the error; keep the program's algorithm and idea.")
ASK_DIFF = "Reply only with one or more SEARCH/REPLACE edits to the program above. "
ASK_FULL = "Reply with the complete fixed program in a single ```python code block, then nothing else."
REPLY_CHARS = 1500
"""Characters of an unusable earlier reply shown back to the model."""


def messages(task_description: str, program: str, reason: str, traceback: str, mode: str, *,
             unusable_reply: str = "", idea: str = "") -> list:
    """Messages asking to repair ``program``.

    Args:
        task_description: the task's prose (the contract the program must keep).
        program: the failing program, or the parent when the Generator's reply never became a program.
        reason: the evaluator's or the editor's reason for the failure.
        traceback: frames of the program's own file and the exception (may be empty).
        mode: ``"diff"`` (ask for SEARCH/REPLACE edits) or ``"full"`` (ask for the whole program).
        unusable_reply: the reply that could not be applied to ``program`` (edit failures only).
        idea: the direction the failed version was following, to keep.
    """
    parts = [f"## Task\n{task_description}", f"## Program\n```python\n{program}```"]
    if unusable_reply:
        parts.append(f"## Your previous reply could not be applied to this program\n{unusable_reply[:REPLY_CHARS]}")
    error = f"## Error\n{reason}"
    if traceback:
        error += f"\nTraceback (lines of the program above):\n{traceback}"
    parts.append(error)
    if idea:
        parts.append(f"## The idea to keep\n{idea}")
    parts.append("## Your job\nFix the error with the smallest change. Keep the function name and signature. "
                 + (ASK_DIFF + edit_format(program) if mode == "diff" else ASK_FULL))
    return [SystemMessage(SYSTEM), HumanMessage("\n\n".join(parts))]
