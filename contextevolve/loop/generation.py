"""One way to ask the Generator's model for a program, and how a program is found to be a twin.

The Generator (phase 5), its second ask after a twin and its ask after a behavioural twin all ask the same
model for a program: messages in, a reply that the run's edit form turns into source
(:meth:`~contextevolve.program.forms.EditForm.build`), or a failure with its
:data:`~contextevolve.memory.records.FailureKind`. :func:`ask_generator` is that one request; its seed,
temperature and stop are the iteration's :class:`~contextevolve.loop.policy.SearchPolicy`'s, so a node only
chooses *which* request it makes.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace

from contextevolve.graph.context import RunContext
from contextevolve.llm.calls import MalformedReply, Reply, call_choices
from contextevolve.loop.policy import Sampling, SearchPolicy
from contextevolve.memory.records import FailureKind, ProgramRecord
from contextevolve.memory.store import RunMemory
from contextevolve.program.docstrings import restore_docstrings
from contextevolve.program.forms import EditForm
from contextevolve.program.replies import EditError
from contextevolve.program.twins import normalized_code
from contextevolve.prompts.generator import reask_messages
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
    """The concrete change the request named (a second ask), else ``""``."""


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


def ask_generator(ctx: RunContext, messages: list, sampling: Sampling, policy: SearchPolicy, *, base: str,
                  form: EditForm | None = None, from_hidden_view: bool | None = None) -> Outcome:
    """Send ``messages`` to the Generator's model and build a program from the reply.

    The request samples with ``sampling`` and stops where ``policy`` says for ``form`` (default:
    ``policy.form``; :meth:`SearchPolicy.stop`); a reply cut off before a whole program is retried
    (:func:`whole_program`). The reply is an edit of ``base`` in ``form``; its tokens are booked under
    ``generator``. ``from_hidden_view``: ``messages`` showed ``base`` without its
    docstrings (None: as the policy shows programs); a rewrite written from that view gets them back
    (:attr:`EditForm.restores_docstrings`).

    Returns:
        The :class:`Outcome`; never raises for a bad reply.

    Raises:
        EndpointUnavailable: the endpoint is down (the run stops).
    """
    return ask_generator_choices(ctx, messages, sampling, policy, 1, base=base, form=form,
                                 from_hidden_view=from_hidden_view)[0]


def ask_generator_choices(ctx: RunContext, messages: list, sampling: Sampling, policy: SearchPolicy,
                          n: int, *, base: str, form: EditForm | None = None,
                          from_hidden_view: bool | None = None) -> list[Outcome]:
    """``n`` outcomes of one prompt: :func:`ask_generator` asking for ``n`` replies at once.

    (:func:`~contextevolve.llm.calls.call_choices`; ``n = 1`` is one request, as :func:`ask_generator`.) The
    first outcome's usage carries the prompt's tokens, each its own reply's; replies that never came are
    ``endpoint`` failures at no cost.

    Raises:
        EndpointUnavailable: the endpoint is down (the run stops).
    """
    form = form or policy.form
    try:
        replies = call_choices("generator", messages, ctx, n, check=whole_program(base, form),
                               stop=policy.stop(form), temperature=sampling.temperature, seed=sampling.seed)
    except MalformedReply as exc:  # the endpoint's fault, after the retries
        failed = Outcome(text=exc.text, usage=booked_as(exc.usage, "generator"), failure="endpoint",
                         problem=str(exc))
        return [failed, *(replace(failed, usage={}, text="") for _ in range(n - 1))]
    outcomes = [outcome_of(reply, policy, base=base, form=form,
                           from_hidden_view=from_hidden_view) for reply in replies]
    missing = "the endpoint gave no usable reply for this choice"
    return outcomes + [Outcome(failure="endpoint", problem=missing) for _ in range(n - len(outcomes))]


def outcome_of(reply: Reply, policy: SearchPolicy, *, base: str, form: EditForm,
               from_hidden_view: bool | None = None) -> Outcome:
    """The :class:`Outcome` of one usable ``reply``: an edit of ``base`` in ``form`` built into a program.

    Arguments as :func:`ask_generator`'s.
    """
    usage = booked_as(reply.usage, "generator")
    try:
        source = form.build(base, reply.text, truncated=reply.truncated)
        hidden = not policy.shows_docstrings if from_hidden_view is None else from_hidden_view
        if form.restores_docstrings and hidden:
            source = restore_docstrings(base, source)
    except EditError as exc:  # the model's fault
        if exc.unchanged:
            return Outcome(source=base, text=reply.text, usage=usage, unchanged=True)
        return Outcome(source=exc.source, text=reply.text, usage=usage, failure="edit", problem=str(exc))
    return Outcome(source=source, text=reply.text, usage=usage)


def second_ask(ctx: RunContext, task: Task, parent: ProgramRecord, policy: SearchPolicy,
               sampling: Sampling) -> Outcome:
    """The second ask after a twin: a new conversation about the parent without its docstrings.

    It names one concrete mutation (:func:`~contextevolve.prompts.generator.reask_messages`, in the policy's
    ``second_form``).
    """
    messages, form, mutation = second_ask_request(task, parent, policy)
    outcome = ask_generator(ctx, messages, sampling, policy, base=parent.source, form=form,
                            from_hidden_view=True)
    return replace(outcome, mutation=mutation)


def second_ask_request(task: Task, parent: ProgramRecord, policy: SearchPolicy) -> tuple[list, EditForm, str]:
    """The messages of :func:`second_ask`, the edit form its reply is read in, and the change it names.

    The change is :meth:`SearchPolicy.mutation`'s.
    """
    form, mutation = policy.second_form, policy.mutation()
    return reask_messages(task.description, parent.source, mutation, task.higher_is_better, form,
                          change_line=True), form, mutation


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
