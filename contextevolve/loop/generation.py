"""What a reply of the Generator's model becomes, and how a program is found to be a twin.

Every Generator request (:mod:`contextevolve.loop.requests`) wants a program back: each reply becomes an
:class:`Outcome`, source that the request's edit form built from it
(:meth:`~contextevolve.program.forms.EditForm.build`), or a failure with its
:data:`~contextevolve.memory.records.FailureKind`. A program that is its parent or a stored program again
is a twin (:func:`twin_of`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from contextevolve.llm.calls import MalformedReply, Reply
from contextevolve.memory.records import FailureKind, ProgramRecord
from contextevolve.memory.store import RunMemory
from contextevolve.program.docstrings import restore_docstrings
from contextevolve.program.forms import EditForm
from contextevolve.program.replies import EditError
from contextevolve.program.twins import normalized_code
from contextevolve.roles import TokenUsage, booked_as
from contextevolve.tasks.base import Task

REPLY_EXCERPT = 600
"""Characters of a failed reply kept in the record's diagnostics."""


@dataclass
class Outcome:
    """What one request to the Generator's model became."""

    source: str = ""
    """The program built from the reply; on an ``edit`` failure the child as far as it was built (one
    that does not compile, which a repair can start from), else empty."""
    text: str = ""
    """The reply's text (what is kept of a failed one goes to the record's diagnostics)."""
    usage: TokenUsage = field(default_factory=dict)
    """Tokens of the request, every retry included, booked under the asking role."""
    failure: FailureKind = ""
    """``endpoint`` (no usable reply after the retries) or ``edit`` (the reply did not become a
    program); ``""`` when ``source`` is a program."""
    problem: str = ""
    """Why, for people and the LLM (empty when there is no failure)."""
    unchanged: bool = False
    """The reply gave the base program back (no failure, ``source`` is the base)."""
    mutation: str = ""
    """The concrete change the request named (an ask after a twin), else ``""``."""


def whole_program(base: str, form: EditForm) -> Callable[[Reply], None]:
    """A ``call_role`` check: a truncated reply must still yield a complete program, else it is retried.

    Raises (from the returned check):
        MalformedReply: the reply was cut off (``finish_reason="length"``) and no program can be built
            from it.
    """
    def check(reply: Reply) -> None:
        if not reply.truncated:
            return
        try:
            form.build(base, reply.text, truncated=True)
        except EditError as exc:
            raise MalformedReply(f"completion cut off at the token cap (finish_reason=length): {exc}",
                                 text=reply.text) from None
    return check


def outcome_of(reply: Reply, *, base: str, form: EditForm, hidden_view: bool) -> Outcome:
    """The :class:`Outcome` of one usable ``reply``: an edit of ``base`` in ``form`` built into a program.

    ``hidden_view``: the request showed ``base`` without its docstrings; a rewrite written from that view
    gets them back (:attr:`EditForm.restores_docstrings`). Its tokens are booked under ``generator``.
    """
    usage = booked_as(reply.usage, "generator")
    try:
        source = form.build(base, reply.text, truncated=reply.truncated)
        if form.restores_docstrings and hidden_view:
            source = restore_docstrings(base, source)
    except EditError as exc:  # the model's fault
        if exc.unchanged:
            return Outcome(source=base, text=reply.text, usage=usage, unchanged=True)
        return Outcome(source=exc.source, text=reply.text, usage=usage, failure="edit", problem=str(exc))
    return Outcome(source=source, text=reply.text, usage=usage)


def find_twin(memory: RunMemory, task: Task, source: str, parent: ProgramRecord,
              siblings: tuple[ProgramRecord, ...] = ()) -> str | None:
    """Id of the parent, a committed program or one of ``siblings`` whose normalised code equals ``source``'s.

    None when there is none; ``siblings``: earlier replies to the same prompt, not committed yet.

    Normalised code is :func:`~contextevolve.program.twins.normalized_code`; compared with an ``ok``
    program, it is also taken without the functions' type annotations. "Twin" is this project's one word
    for "the same program". Why annotations count only against failed programs:
    docs/decisions/twin-identity.md.
    """
    entry = task.job().entry
    digest = normalized_code(source, entry)
    if digest is None:
        return None
    loose = normalized_code(source, entry, annotations=False)
    for record in [parent, *memory.buffer.committed(), *siblings]:
        if not record.source:
            continue
        if normalized_code(record.source, entry) == digest or (
                record.status == "ok" and normalized_code(record.source, entry, annotations=False) == loose):
            return record.id
    return None


def twin_of(memory: RunMemory, task: Task, outcome: Outcome, parent: ProgramRecord,
            siblings: tuple[ProgramRecord, ...] = ()) -> str | None:
    """The twin of a program asked for as an edit of ``parent``; None when it is new or no program came.

    The twin is the parent when the reply gave it back, else what :func:`find_twin` finds.
    """
    if outcome.failure or not outcome.source:
        return None
    if outcome.unchanged and outcome.source == parent.source:
        return parent.id
    return find_twin(memory, task, outcome.source, parent, siblings)
