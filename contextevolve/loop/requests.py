"""The Generator's requests as data: each kind declared once, one function that sends any of them.

A run asks the Generator's model for programs in three kinds of request (:data:`KINDS`):

* ``first``: the composed prompt of an iteration (:mod:`contextevolve.loop.composing`), for ``n`` children
  (``search.samples_per_prompt``);
* ``second_ask``: after replies that were twins (the parent, a stored program or an earlier reply to the
  same prompt again), a new conversation about the parent that names one concrete change (a mutation), a
  reply per twin;
* ``no_effect``: after a valid child whose every result equals a stored program's (a behavioural twin), a
  new conversation about that version, told it had no effect, naming another change.

A :class:`GeneratorRequest` holds everything that decides the reply (messages, seed, temperature, ``n``,
stop sequences, the edit form its replies are read in, the base program they edit) and the kind that made
it; :func:`send` sends one and turns each reply into an :class:`~contextevolve.loop.generation.Outcome`.
A kind's seed and temperature rule is its :class:`Kind` entry: seed = worker's seed + offset + iteration,
so that every request of an iteration samples differently (an endpoint that honours seeds would otherwise
repeat a reply, a twin: docs/decisions/second-ask.md). With ``--log-prompts`` each request's data goes to
the transcript beside its messages (:meth:`GeneratorRequest.label`), so replays send what the run sent.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Literal

from contextevolve.graph.context import RunContext
from contextevolve.llm.calls import MalformedReply, call_choices
from contextevolve.loop.behaviour import measured_effect
from contextevolve.loop.generation import Outcome, outcome_of, whole_program
from contextevolve.loop.policy import SearchPolicy
from contextevolve.memory.records import ProgramRecord
from contextevolve.program.forms import EditForm, edit_form
from contextevolve.program.mutations import mutation_for
from contextevolve.prompts.generator import no_effect_messages, reask_messages
from contextevolve.roles import booked_as
from contextevolve.tasks.base import Task

RequestKind = Literal["first", "second_ask", "no_effect"]
"""The kinds of Generator request a run makes (this module's docstring)."""

REASK_HOTTER = 0.3
"""Temperature added to the Generator's for an ask after a twin, of either kind."""


@dataclass(frozen=True)
class Kind:
    """How one kind of request samples: its seed rule, its temperature and the mutation it names.

    Attributes:
        seed_offset: the request's seed is the worker's seed + ``seed_offset`` + the iteration.
        hotter: added to the Generator's temperature.
        mutation_offset: the mutation named is
            :func:`~contextevolve.program.mutations.mutation_for` of the worker's seed + this offset and
            the iteration; None: the request names none.
    """

    seed_offset: int
    hotter: float
    mutation_offset: int | None = None


KINDS: dict[RequestKind, Kind] = {
    # 300: away from the asks after a twin, whose seeds count up from +1 with the iteration
    "first": Kind(seed_offset=300, hotter=0.0),
    "second_ask": Kind(seed_offset=1, hotter=REASK_HOTTER, mutation_offset=0),
    # (+2 for its mutation: +1 named a restart's, in runs that made model repairs)
    "no_effect": Kind(seed_offset=700, hotter=REASK_HOTTER, mutation_offset=2),
}
"""Every kind of Generator request, declared once."""


@dataclass(frozen=True)
class GeneratorRequest:
    """One request to the Generator's model, as data.

    Attributes:
        kind: which of :data:`KINDS` made it.
        messages: the conversation sent (LangChain messages).
        seed: the request's seed (a ``j``-th reply asked for alone gets ``seed + j``:
            :func:`~contextevolve.llm.calls.call_choices`).
        temperature: its sampling temperature.
        n: replies wanted (>= 1), each a child.
        stop: stop sequences, or None.
        form: the name of the edit form its replies are read in
            (:data:`~contextevolve.program.forms.EDIT_FORMS`).
        base: the program its replies edit.
        hidden_view: the messages showed ``base`` without its docstrings, so a rewrite gets them back.
        mutation: the concrete change it names (``""``: none).
    """

    kind: RequestKind
    messages: list
    seed: int
    temperature: float
    n: int
    stop: list[str] | None
    form: str
    base: str
    hidden_view: bool
    mutation: str = ""

    def label(self) -> dict:
        """What the transcript keeps of the request besides its messages (JSON-ready)."""
        return {"kind": self.kind, "seed": self.seed, "temperature": self.temperature, "n": self.n,
                "stop": self.stop, "form": self.form, "hidden_view": self.hidden_view,
                "mutation": self.mutation}


def _sampled(kind: RequestKind, policy: SearchPolicy, *, hotter: float = 0.0) -> tuple[int, float, str]:
    """``(seed, temperature, mutation)`` of a request of ``kind`` in ``policy``'s iteration."""
    rule = KINDS[kind]
    mutation = ("" if rule.mutation_offset is None
                else mutation_for(policy.seed + rule.mutation_offset, policy.iteration, policy.mutations))
    return (policy.seed + rule.seed_offset + policy.iteration, policy.temperature + rule.hotter + hotter,
            mutation)


def first(policy: SearchPolicy, messages: list, guidance: str, base: str, n: int = 1) -> GeneratorRequest:
    """The iteration's composed prompt (``messages``) for ``n`` children of ``base``, in the run's edit form.

    ``policy.unguided_hotter`` is added to the temperature when ``guidance`` is empty.
    """
    hotter = policy.unguided_hotter if not guidance.strip() else 0.0
    seed, temperature, _ = _sampled("first", policy, hotter=hotter)
    return GeneratorRequest("first", messages, seed, temperature, n, policy.stop(), policy.form.name, base,
                            hidden_view=not policy.shows_docstrings)


def second_ask(task: Task, parent: ProgramRecord, policy: SearchPolicy, n: int = 1) -> GeneratorRequest:
    """The ask after a twin: the parent without its docstrings and one mutation, ``n`` replies.

    (:func:`~contextevolve.prompts.generator.reask_messages`, in the policy's ``second_form``.)
    """
    seed, temperature, mutation = _sampled("second_ask", policy)
    form = policy.second_form
    messages = reask_messages(task.description, parent.source, mutation, task.higher_is_better, form,
                              change_line=True)
    return GeneratorRequest("second_ask", messages, seed, temperature, n, policy.stop(form), form.name,
                            parent.source, hidden_view=True, mutation=mutation)


def no_effect(task: Task, version: ProgramRecord, twin: ProgramRecord,
              policy: SearchPolicy) -> GeneratorRequest:
    """The ask after a behavioural twin: ``version`` changed no result (every result equals ``twin``'s).

    (:func:`~contextevolve.prompts.generator.no_effect_messages`, in the policy's ``second_form``.)
    """
    seed, temperature, mutation = _sampled("no_effect", policy)
    form = policy.second_form
    messages = no_effect_messages(task.description, version.source, measured_effect(twin), mutation,
                                  task.higher_is_better, form, change_line=True)
    return GeneratorRequest("no_effect", messages, seed, temperature, 1, policy.stop(form), form.name,
                            version.source, hidden_view=True, mutation=mutation)


def send(ctx: RunContext, request: GeneratorRequest) -> list[Outcome]:
    """Send ``request`` and build a program from each reply: ``request.n`` outcomes, in order.

    A reply cut off before a whole program is retried (:func:`~contextevolve.loop.generation.whole_program`);
    tokens are booked under ``generator``, the prompt's on the first outcome, each reply's completion on its
    own; replies that never came are ``endpoint`` failures at no cost. Each outcome carries the request's
    mutation.

    Returns:
        The outcomes; never raises for a bad reply.

    Raises:
        EndpointUnavailable: the endpoint is down (the run stops).
    """
    form: EditForm = edit_form(request.form)
    try:
        replies = call_choices("generator", request.messages, ctx, request.n,
                               check=whole_program(request.base, form), stop=request.stop,
                               temperature=request.temperature, seed=request.seed, label=request.label())
    except MalformedReply as exc:  # the endpoint's fault, after the retries
        failed = Outcome(text=exc.text, usage=booked_as(exc.usage, "generator"), failure="endpoint",
                         problem=str(exc), mutation=request.mutation)
        return [failed, *(replace(failed, usage={}, text="") for _ in range(request.n - 1))]
    outcomes = [replace(outcome_of(reply, base=request.base, form=form, hidden_view=request.hidden_view),
                        mutation=request.mutation)
                for reply in replies[:request.n]]  # (an endpoint that gave more than asked: the rest unread)
    missing = "the endpoint gave no usable reply for this choice"
    return outcomes + [Outcome(failure="endpoint", problem=missing, mutation=request.mutation)
                       for _ in range(request.n - len(outcomes))]
