"""One way to ask the Generator's model for a program, and the sampling of every such request.

The Generator (phase 5), its second ask after a twin, repairs and restarts all ask the same model for a
program: messages in, a reply that :func:`~contextevolve.editing.build_child` turns into source, or a
failure with its :data:`~contextevolve.memory.records.FailureKind`. :func:`ask_generator` is that one
request; :class:`SamplingPolicy` owns the seed and temperature of each request of an iteration, so a
node only chooses *which* request it makes.

Why each request samples differently: a second request with the same seed and temperature after a
twin or an unchanged reply tends to come back with the same program, so each kind of request of an
iteration gets its own seed and the retries of a failure a hotter temperature.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from contextevolve.editing import EditError, build_child, normalized_code
from contextevolve.graph.context import RunContext
from contextevolve.llm.calls import MalformedReply, Reply, call_role
from contextevolve.memory.records import FailureKind, ProgramRecord
from contextevolve.memory.store import RunMemory
from contextevolve.prompts.generator import mutation_for, stop_after_code
from contextevolve.roles import Role, TokenUsage, booked_as
from contextevolve.splicing import restore_docstrings
from contextevolve.tasks.base import Task

REPLY_EXCERPT = 600
"""Characters of a failed reply kept in the record's diagnostics."""
REASK_HOTTER = 0.3
"""Temperature added to the Generator's for a second ask after a twin."""
REPAIR_HOTTER = 0.2
"""Temperature added per model repair after the first."""
REPAIR_SEED_STRIDE = 1000
"""Seed offset per repair, so no two repair requests of a run share a seed."""
SECOND_ASK_SEED = 500
"""Seed offset of a restart's second ask from the restart's own seed."""


@dataclass(frozen=True)
class Sampling:
    """Seed and temperature of one request."""

    seed: int
    temperature: float


@dataclass(frozen=True)
class SamplingPolicy:
    """The sampling of every Generator-model request of one iteration.

    ``seed`` is the worker's seed (the run's, :meth:`RunContext.worker_seed`), ``temperature`` the Generator's,
    ``iteration`` the worker's iteration: the iterations completed before its child (the child is
    ``iteration + 1``).
    """

    seed: int
    temperature: float
    iteration: int

    @classmethod
    def of(cls, ctx: RunContext, iteration: int, worker: int = 0) -> SamplingPolicy:
        """The policy of ``iteration`` of worker ``worker`` under the run settings ``ctx``."""
        return cls(ctx.worker_seed(worker), ctx.llm.temperature_for("generator"), iteration)

    def first(self, *, hotter: float = 0.0) -> Sampling:
        """The Generator's own request: the worker's seed and the Generator's temperature, ``hotter`` added
        (the run's ``search.unguided_hotter`` when the Navigator gave no guidance)."""
        return Sampling(self.seed, self.temperature + hotter)

    def second_ask(self) -> Sampling:
        """The Generator's second ask after a twin: seed ``seed + 1 + iteration``, ``REASK_HOTTER`` hotter."""
        return Sampling(self.seed + 1 + self.iteration, self.temperature + REASK_HOTTER)

    def repair(self, number: int, *, restart: bool) -> Sampling:
        """Repair ``number`` (1-based): seed ``seed + REPAIR_SEED_STRIDE * number + iteration``; a model
        fix is ``REPAIR_HOTTER * (number - 1)`` hotter (a model that gave the failing program back is
        asked again with other randomness), a restart (a new generation) samples at the Generator's."""
        hotter = 0.0 if restart else REPAIR_HOTTER * (number - 1)
        return Sampling(self.seed + REPAIR_SEED_STRIDE * number + self.iteration, self.temperature + hotter)

    def restart_second_ask(self, number: int) -> Sampling:
        """The second ask after restart ``number`` wrote its parent again: the restart's seed +
        ``SECOND_ASK_SEED``, ``REASK_HOTTER`` hotter."""
        return Sampling(self.repair(number, restart=True).seed + SECOND_ASK_SEED, self.temperature + REASK_HOTTER)

    def mutation(self, *, after_restart: bool = False) -> str:
        """The concrete change a second ask names; a restart's second ask names another than the
        Generator's own (:func:`~contextevolve.prompts.generator.mutation_for`)."""
        return mutation_for(self.seed + int(after_restart), self.iteration)


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


def whole_program(base: str, mode: str) -> Callable[[Reply], None]:
    """A ``call_role`` check: a truncated reply must still yield a complete program, else it is retried.

    Raises (from the returned check):
        MalformedReply: the reply was cut off (``finish_reason="length"``) and no program can be built from it.
    """
    def check(reply: Reply) -> None:
        if not reply.truncated:
            return
        try:
            build_child(base, reply.text, mode, truncated=True)
        except EditError as exc:
            raise MalformedReply(f"completion cut off at the token cap (finish_reason=length): {exc}",
                                 text=reply.text) from None
    return check


def ask_generator(ctx: RunContext, messages: list, sampling: Sampling, *, base: str, mode: str,
                  book: Role = "generator", docstrings_hidden: bool | None = None) -> Outcome:
    """Send ``messages`` to the Generator's model with ``sampling`` and build a program from the reply
    as an edit of ``base`` in edit form ``mode`` (``full``, ``diff``, ``functions``).

    The request stops where the code block closes (:func:`~contextevolve.prompts.generator.stop_after_code`);
    a reply cut off before a whole program is retried (:func:`whole_program`). Its tokens are booked
    under ``book`` (``generator`` or ``repair``).

    ``docstrings_hidden``: ``messages`` show ``base`` without its docstrings (None: as the run's settings
    show programs, :func:`~contextevolve.nodes.compose.shown`); a ``full`` rewrite written from that view
    gets back the docstrings of the parent's top-level functions and classes and of those classes'
    methods (:func:`~contextevolve.splicing.restore_docstrings`), so a lineage does not lose them one
    second ask at a time.

    Returns:
        The :class:`Outcome`; never raises for a bad reply.

    Raises:
        EndpointUnavailable: the endpoint is down (the run stops).
    """
    try:
        reply = call_role("generator", messages, ctx, check=whole_program(base, mode), stop=stop_after_code(mode, ctx),
                          temperature=sampling.temperature, seed=sampling.seed)
    except MalformedReply as exc:  # the endpoint's fault, after the retries
        return Outcome(text=exc.text, usage=booked_as(exc.usage, book), failure="endpoint", problem=str(exc))
    usage = booked_as(reply.usage, book)
    try:
        source = build_child(base, reply.text, mode, truncated=reply.truncated)
        hidden = not ctx.search.docstrings_shown if docstrings_hidden is None else docstrings_hidden
        if mode == "full" and hidden:  # written from a view without them
            source = restore_docstrings(base, source)
    except EditError as exc:  # the model's fault
        if exc.unchanged:
            return Outcome(source=base, text=reply.text, usage=usage, unchanged=True)
        return Outcome(source=exc.source, text=reply.text, usage=usage, failure="edit", problem=str(exc))
    return Outcome(source=source, text=reply.text, usage=usage)


def find_twin(memory: RunMemory, task: Task, source: str, parent: ProgramRecord) -> str | None:
    """Id of the parent or a committed program whose normalised code equals ``source``'s, else None
    (:func:`~contextevolve.editing.normalized_code`: AST without docstrings, comments, unused
    imports and helpers the task's entry function never calls; compared with an ``ok`` program, also
    without its functions' type annotations). "Twin" is this project's one word for "the same program".

    Annotations are left out only against programs that ran: a copy of a working program that adds type
    hints runs the same (the embedded model adds them often: 5 of the 16 working children of five stored
    40,000-token runs were such copies, evaluated and counted as new); a failed program's annotations may
    be what made it fail (a hint naming a class never imported)."""
    entry = task.job().entry
    digest = normalized_code(source, entry)
    if digest is None:
        return None
    loose = normalized_code(source, entry, annotations=False)
    for record in [parent, *memory.buffer.committed()]:
        if not record.source:
            continue
        if normalized_code(record.source, entry) == digest or (
                record.status == "ok" and normalized_code(record.source, entry, annotations=False) == loose):
            return record.id
    return None


def twin_of(memory: RunMemory, task: Task, outcome: Outcome, parent: ProgramRecord) -> str | None:
    """The twin of a program asked for as an edit of ``parent`` (its reply gave the parent back, or
    :func:`find_twin` finds one); None when it is new or no program came."""
    if outcome.failure or not outcome.source:
        return None
    if outcome.unchanged and outcome.source == parent.source:
        return parent.id
    return find_twin(memory, task, outcome.source, parent)


def twin_reason(twin: str) -> str:
    """Reason of a child not evaluated because it is the same program as ``twin``."""
    return (f"duplicate of {twin} (the same code apart from comments, docstrings, type hints, unused imports "
            f"and uncalled helpers); not evaluated")


def reask_mode(mode: str) -> str:
    """Edit form of a second ask after a twin: the changed functions in ``functions`` mode, else the
    whole program (SEARCH/REPLACE edits asked again made fewer valid children, see
    :func:`~contextevolve.prompts.generator.reask_messages`)."""
    return "functions" if mode == "functions" else "full"
