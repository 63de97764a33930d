"""The search's switches for one iteration, resolved once into one object the nodes ask.

The settings that shape how a child is asked for and repaired (the edit form, ``stop_at_code_end``,
``unguided_hotter``, ``import_fixes``) interact; :class:`SearchPolicy` resolves them in one place for an
iteration (the requests it makes of the Generator are :mod:`contextevolve.loop.requests`'), and
:func:`ignored_settings` names each setting the others make ignored (the run warns when it starts). How
they interact: docs/decisions/search-settings.md.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from contextevolve.graph.context import RunContext
from contextevolve.graph.state import WorkerState
from contextevolve.loop.stopping import worker_budget_spent
from contextevolve.memory.records import ProgramRecord, repairable
from contextevolve.nodes.sample import CANDIDATE_POOL, SAMPLER_CHOICE
from contextevolve.program.docstrings import without_docstrings
from contextevolve.program.fixes import missing_import
from contextevolve.program.forms import EditForm, edit_form
from contextevolve.program.mutations import MUTATIONS
from contextevolve.roles import TokenUsage

Strategy = Literal["import", "no_effect"]
"""How a repair makes the child's next version (stored as :attr:`RepairAttempt.method`): ``import``, a
missing import added without a model; ``no_effect``, the Generator asked again because a valid version
changed no result (a behavioural twin). Older runs also stored ``model`` and ``restart``, the model repairs
they made (docs/decisions/repair-restart.md)."""

IMPORT_FIXES = 3
"""Most imports added to one child without a model (each adds a line the source lacks, so the bound
only keeps a program that keeps failing on new names from looping)."""


@dataclass(frozen=True)
class SearchPolicy:
    """How one iteration of one worker asks for its child and repairs it.

    Attributes:
        form: the run's edit form; second_form: the form of a second ask after a twin.
        shows_docstrings: programs (the parent, the exemplars) are shown to the Generator with their
            docstrings (the edit form's :attr:`~contextevolve.program.forms.EditForm.shows_docstrings`).
        stop_at_code_end: requests in a form that allows it stop where the reply's code block closes
            (:meth:`stop`).
        unguided_hotter: temperature added to the first ask when it has no guidance (0 with the
            Navigator off, so that ablation changes one thing).
        import_fixes: missing imports are added without a model.
        behavioural_twins: a valid child that changed no result is asked again once.
        mutations: the concrete changes an ask after a twin names, in turn
            (:data:`~contextevolve.loop.requests.KINDS`).
        seed: the worker's seed; temperature: the Generator's; iteration: iterations completed before
            the child (the child is ``iteration + 1``).
    """

    form: EditForm
    second_form: EditForm
    shows_docstrings: bool
    stop_at_code_end: bool
    unguided_hotter: float
    import_fixes: bool
    behavioural_twins: bool
    seed: int
    temperature: float
    iteration: int
    mutations: tuple[str, ...] = MUTATIONS

    @classmethod
    def of(cls, ctx: RunContext, iteration: int, worker: int | None = 0) -> SearchPolicy:
        """The policy of ``iteration`` of worker ``worker`` under the run settings ``ctx``."""
        search, form = ctx.search, edit_form(ctx.search.edit_form)
        return cls(form=form, second_form=edit_form(form.second_ask),
                   shows_docstrings=form.shows_docstrings,
                   stop_at_code_end=search.stop_at_code_end,
                   unguided_hotter=search.unguided_hotter if ctx.ablations.navigator_enabled else 0.0,
                   import_fixes=search.import_fixes, behavioural_twins=search.behavioural_twins,

                   mutations=tuple(search.mutations),
                   seed=ctx.worker_seed(worker or 0),
                   temperature=ctx.llm.temperature_for("generator"), iteration=iteration)

    def stop(self, form: EditForm | None = None) -> list[str] | None:
        """Stop sequences of a request whose reply is written in ``form`` (default: the run's)."""
        return (form or self.form).stop(self.stop_at_code_end)

    def shown(self, source: str) -> str:
        """``source`` as the Generator sees it (without docstrings unless :attr:`shows_docstrings`)."""
        return source if self.shows_docstrings else without_docstrings(source)

    def import_fix(self, child: ProgramRecord) -> str:
        """The import line that would fix ``child``'s failure, else ``""``.

        The failure is a NameError of a known importable name its source lacks, at most
        :data:`IMPORT_FIXES` per child; always ``""`` without :attr:`import_fixes`.
        """
        if (not self.import_fixes or not child.source
                or sum(a.method == "import" for a in child.attempts) >= IMPORT_FIXES):
            return ""
        line = missing_import(f"{child.reason}\n{child.traceback}")
        return line if line and line not in child.source.splitlines() else ""

    def repair_due(self, child: ProgramRecord, budget_spent: bool = False) -> bool:
        """Whether the stored ``child`` has a next version to make.

        A failure of a repairable kind has one while an import fix is left (:meth:`import_fix`, free,
        whatever the budget); a valid behavioural twin has one ask after it (with :attr:`behavioural_twins`,
        once, and ``budget_spent`` False: the worker's share of the token budget is not spent).
        """
        if child.status == "ok":  # a behavioural twin gets one more ask (and it is not free)
            return (self.behavioural_twins and bool(child.behavioural_twin_of)
                    and not child.asked_after_no_effect and not budget_spent)
        if child.status == "pending" or not repairable(child.failure_kind):
            return False
        return bool(self.import_fix(child))

    def strategy_for(self, child: ProgramRecord) -> tuple[Strategy, str]:
        """``(strategy, import line)`` of ``child``'s next repair.

        ``no_effect`` for a valid child (a behavioural twin); else ``import``, with the line
        :meth:`import_fix` has (a failed child's only repair: :meth:`repair_due`).
        """
        if child.status == "ok":
            return "no_effect", ""
        return "import", self.import_fix(child)


def repair_due(ctx: RunContext, state: WorkerState, child: ProgramRecord,
               usage: TokenUsage | None = None) -> bool:
    """Whether the stored ``child`` has a repair left (:meth:`SearchPolicy.repair_due`).

    The worker's share of the token budget is counted with ``usage``
    (:func:`~contextevolve.loop.stopping.worker_budget_spent`).
    """
    policy = SearchPolicy.of(ctx, state.iteration, state.worker)
    return policy.repair_due(child, worker_budget_spent(ctx, state, usage))


class IgnoredSettingWarning(UserWarning):
    """A setting changed from its default that the run's other settings make ignored."""


def _changed(group: object, name: str) -> bool:
    """True when setting ``name`` of ``group`` differs from its default."""
    return getattr(group, name) != getattr(type(group)(), name)


def ignored_settings(ctx: RunContext) -> list[str]:
    """One sentence for each setting changed from its default that the run's other settings make ignored.

    The run warns about each when it starts.
    """
    search, form, out = ctx.search, edit_form(ctx.search.edit_form), []
    if _changed(search, "stop_at_code_end") and not form.stops_at_code_end:
        out.append(f"stop_at_code_end is ignored with edit form {form.name!r}: its replies never stop at a "
                   "code end")
    if _changed(search, "unguided_hotter") and not ctx.ablations.navigator_enabled:
        out.append("unguided_hotter is ignored with the Navigator switched off (every ask is then unguided, "
                   "so that ablation changes one thing)")
    if CANDIDATE_POOL < search.num_exemplars + SAMPLER_CHOICE and ctx.ablations.sampler_enabled:
        out.append(f"the Sampler agent is never asked: its {CANDIDATE_POOL} candidates are fewer than "
                   f"num_exemplars {search.num_exemplars} + {SAMPLER_CHOICE}, so retrieval's first programs "
                   "are always the exemplars")
    if ctx.llm.embedded_server_per_role and not ctx.llm.server_per_role(ctx.parallelism.workers):
        out.append("embedded_server_per_role is ignored with more than one worker (several workers would run "
                   "several servers at once on the same cores)")
    return out

