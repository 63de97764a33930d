"""Edit forms: the ways a Generator reply may write a child, one object each, kept in one registry.

An edit form says everything that depends on how the model writes its change: the instructions of the
Generator's ask, where its reply stops, which view of a program it shows, how a reply becomes
a child, and which form a second ask after a twin uses. :data:`EDIT_FORMS` is the registry; the ``edit_form``
setting's choices are its keys (:data:`EditFormName`). Adding a form is one :class:`EditForm` here. Why
``full`` is the default: docs/decisions/generation-mode.md.
"""

from __future__ import annotations

import ast
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

from contextevolve.program.edits import apply_rewrite, child_from
from contextevolve.program.replies import evolve_region
from contextevolve.program.splicing import apply_functions

EditFormName = Literal["full", "diff", "functions"]
"""Names of the registered edit forms (the keys of :data:`EDIT_FORMS`)."""

CODE_END = "\n```\n"
"""Where a reply's code block closes (an opening fence is followed by its language and does not match)."""

FULL_FORMAT = "Reply with the complete improved program in a single ```python code block, then nothing else."
FUNCTIONS_FORMAT = ("Reply with only the top-level functions (or classes) you change or add, each written "
                    "out complete from its def line to its last line, plus any new imports, in a single "
                    "```python code block, then nothing else. Do not repeat functions you leave unchanged: "
                    "they are kept as they are.")
EDIT_RULES = ("Write each edit as a SEARCH part holding lines copied character for character from the "
              "current program and a REPLACE part holding the lines that take their place:")
EXAMPLE_LINES = 2
"""Lines of the program itself shown as the SEARCH part of the SEARCH/REPLACE format example."""


def _statement_lines(program: str) -> set[int] | None:
    """1-based numbers of the lines on which an indented statement other than a docstring starts.

    None when ``program`` does not parse.
    """
    try:
        tree = ast.parse(program)
    except SyntaxError:
        return None
    return {node.lineno for node in ast.walk(tree)
            if isinstance(node, ast.stmt) and node.col_offset > 0
            and not (isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant))}


def _example_lines(program: str) -> list[str]:
    """``EXAMPLE_LINES`` consecutive indented statement lines of ``program`` that occur once in it.

    The lines are inside its EVOLVE-BLOCK when it has one, and hold no docstring or comment; ``[]`` when
    there are none.
    """
    region = evolve_region(program)
    first = program[:region[0]].count("\n") if region else 0
    body = program[region[0]:region[1]] if region else program
    lines, statements = body.splitlines(), _statement_lines(program)
    for at in range(len(lines) - EXAMPLE_LINES + 1):
        pick = lines[at:at + EXAMPLE_LINES]
        if statements is not None:
            code = all(first + at + n + 1 in statements for n in range(EXAMPLE_LINES))
        else:
            code = all(line.startswith((" ", "\t")) and line.strip()
                       and not line.strip().startswith(("#", '"', "'"))
                       for line in pick)
        if code and program.count("\n".join(pick)) == 1:
            return pick
    return []


def edit_format(program: str) -> str:
    """How to write SEARCH/REPLACE edits against ``program``, with an example made of its own lines.

    The example's REPLACE part repeats its SEARCH part, so a model that copies it verbatim makes a twin,
    which costs no evaluation (docs/decisions/generation-mode.md).
    """
    pick = _example_lines(program)
    if not pick:
        return (EDIT_RULES + "\n<<<<<<< SEARCH\n(lines of the current program)\n=======\n"
                "(their new version)\n>>>>>>> REPLACE")
    lines = "\n".join(pick)
    return (f"{EDIT_RULES}\n<<<<<<< SEARCH\n{lines}\n=======\n{lines}\n>>>>>>> REPLACE\n"
            "(This example only shows the shape: its REPLACE part repeats the SEARCH lines, so it changes "
            "nothing. Your REPLACE parts must change the code.)")


def _rewrite_job(goal: str, reply_format: str) -> str:
    return (f"Write an improved version of the current program that follows the direction and {goal}. "
            "Change the algorithm inside the EVOLVE-BLOCK (a copy of the current program is worth "
            "nothing). Keep the same function name and signature and keep it correct and fast. "
            + reply_format)


@dataclass(frozen=True)
class EditForm:
    """One way a reply writes a child.

    Attributes:
        name: the registry key, the ``edit_form`` setting's value.
        rewrite: makes a child of ``(parent, reply)`` when the reply is not SEARCH/REPLACE edits.
        edits_win: a reply holding SEARCH/REPLACE edits is applied as edits even when it also has a
            fenced program; otherwise only when its program block is made of edits.
        shows_docstrings: programs (parent and exemplars) are shown with their docstrings; False: without
            them (``diff`` shows them: its SEARCH parts must match the program).
        stops_at_code_end: its requests stop where the reply's code block closes (:data:`CODE_END`);
            False for a form whose edits may come in several blocks.
        second_ask: the form a second ask after a twin uses.
        restores_docstrings: a child written from a view without docstrings gets its parent's back
            (:func:`~contextevolve.program.docstrings.restore_docstrings`).
    """

    name: EditFormName
    rewrite: Callable[[str, str], str]
    edits_win: bool
    shows_docstrings: bool
    stops_at_code_end: bool
    second_ask: EditFormName
    restores_docstrings: bool
    _job: Callable[[str, str], str]
    _reply_format: Callable[[str], str]

    def job(self, goal: str, program: str) -> str:
        """The Generator's instructions for a child of ``program`` that ``goal`` (e.g. "raises the score")."""
        return self._job(goal, program)

    def reply_format(self, program: str) -> str:
        """How a reply to a new conversation about ``program`` must be written (the second ask's ending)."""
        return self._reply_format(program)

    def build(self, parent: str, reply: str, *, truncated: bool = False) -> str:
        """The child ``reply`` makes of ``parent`` (:func:`~contextevolve.program.edits.child_from`).

        Raises:
            EditError: why the reply does not make a child (``unchanged`` set when it gave ``parent`` back).
        """
        return child_from(parent, reply, self.rewrite, edits_win=self.edits_win, truncated=truncated)

    def stop(self, stop_at_code_end: bool) -> list[str] | None:
        """Stop sequences of its requests, given the ``stop_at_code_end`` setting."""
        return [CODE_END] if self.stops_at_code_end and stop_at_code_end else None


def _full_format(program: str) -> str:
    return "Return the whole program. " + FULL_FORMAT


EDIT_FORMS: dict[str, EditForm] = {form.name: form for form in (
    EditForm(name="full", rewrite=apply_rewrite, edits_win=False, shows_docstrings=True,
             stops_at_code_end=True, second_ask="full", restores_docstrings=True,
             _job=lambda goal, program: _rewrite_job(goal, _full_format(program)),
             _reply_format=_full_format),
    EditForm(name="diff", rewrite=apply_rewrite, edits_win=True, shows_docstrings=True,
             stops_at_code_end=False, second_ask="full", restores_docstrings=False,
             _job=lambda goal, program: (
                 f"Edit the current program so that it {goal}, following the direction. Edit only inside "
                 "the EVOLVE-BLOCK. Reply only with one or more SEARCH/REPLACE edits; each SEARCH part must "
                 "match the current program exactly. " + edit_format(program)),
             _reply_format=_full_format),
    EditForm(name="functions", rewrite=apply_functions, edits_win=False, shows_docstrings=False,
             stops_at_code_end=True, second_ask="functions", restores_docstrings=False,
             _job=lambda goal, program: _rewrite_job(goal, FUNCTIONS_FORMAT),
             _reply_format=lambda program: FUNCTIONS_FORMAT),
)}
"""Every edit form by name: ``full`` (the whole program), ``diff`` (SEARCH/REPLACE edits against the
parent), ``functions`` (only the whole functions and classes that change, spliced in by name:
:mod:`contextevolve.program.splicing`)."""


def edit_form(name: str) -> EditForm:
    """The registered edit form ``name``.

    Raises:
        ValueError: no such form (the message names the registered ones).
    """
    try:
        return EDIT_FORMS[name]
    except KeyError:
        raise ValueError(f"unknown edit form {name!r}; choose one of {', '.join(EDIT_FORMS)}") from None


def build_child(parent: str, reply: str, form: str, *, truncated: bool = False) -> str:
    """The child ``reply`` makes of ``parent`` in edit form ``form`` (:meth:`EditForm.build`).

    Raises:
        EditError: why the reply does not make a child.
        ValueError: ``form`` is not a registered edit form.
    """
    return edit_form(form).build(parent, reply, truncated=truncated)
