"""Generator prompt: parent code + guidance g + exemplars → child (paper Eq. 2 with Φ = (z_p, g, E))."""

from __future__ import annotations

from dataclasses import dataclass

from langchain_core.messages import HumanMessage, SystemMessage

from contextevolve.llm.calls import estimate_tokens
from contextevolve.program.docstrings import without_docstrings
from contextevolve.program.forms import EditForm

SYSTEM = "You are an expert systems programmer improving a program in an evolutionary search."
"""The one system message of every Generator-model request (first asks, asks after a twin):
with the task description first in the user message, every such request starts with the same tokens,
which a server reuses from the request just before instead of reading them again (a second ask right
after its Generator request)."""
def goal_of(higher_is_better: bool) -> str:
    """What a better program does to the score, as the asks name it."""
    return "raises the score (higher is better)" if higher_is_better else "lowers the score (lower is better)"


CHANGE_FIRST = ("Before the code, write one line that begins with `Change:` and names the lines of the "
                "current program you will change and what they will compute instead. Then ")
"""What an ask with a change line adds before its reply format: the reply names its edit before it writes the
program. Asked so, the small model copies its parent less often (docs/decisions/change-line.md)."""


def with_change_line(job: str, reply_format: str) -> str:
    """``job`` asking for the ``Change:`` line (:data:`CHANGE_FIRST`) just before its ``reply_format``.

    ``job`` unchanged when it does not hold ``reply_format`` (the diff form's job, whose SEARCH/REPLACE
    edits name their change anyway).
    """
    if not reply_format or reply_format not in job:
        return job
    return job.replace(reply_format, CHANGE_FIRST + reply_format[0].lower() + reply_format[1:], 1)


def reply_ending(form: EditForm, source: str, change_line: bool) -> str:
    """How an ask after a twin ends: ``form``'s reply format for ``source``.

    With ``change_line`` the request for the ``Change:`` line comes first (:func:`with_change_line`).
    """
    ending = form.reply_format(source)
    return with_change_line(ending, ending) if change_line else ending


def reask_messages(task_description: str, parent_source: str, mutation: str, higher_is_better: bool,
                   form: EditForm, *, change_line: bool = False) -> list:
    """The Generator's second ask after a twin: a new conversation, not a follow-up of the first.

    It holds only the task, the current program without its docstrings and one concrete ``mutation``
    to make, and wants code back as ``form`` (the run's form's ``second_ask``) writes it; with
    ``change_line``, as a run always asks it, the reply first names its edit in one line
    (:func:`with_change_line`; without: the wording the replays compare). Why a new conversation:
    docs/decisions/second-ask.md.
    """
    ending = reply_ending(form, parent_source, change_line)
    return [SystemMessage(SYSTEM), HumanMessage(
        f"## Task\n{task_description}\n\n"
        f"## Current program\n```python\n{without_docstrings(parent_source)}```\n\n"
        f"## Your job\nMake one concrete change to how this program computes its result: {mutation}. "
        f"The change should be one that {goal_of(higher_is_better)}. Keep the function name and signature. "
        f"{ending}")]


def no_effect_messages(task_description: str, version_source: str, effect: str, mutation: str,
                       higher_is_better: bool, form: EditForm, *, change_line: bool = False) -> list:
    """The Generator's ask after a behavioural twin: its valid version changed no result.

    A new conversation like :func:`reask_messages`, holding the version that had no effect (without its
    docstrings), what was measured (``effect``: that every result equals a stored program's, as
    ``loop.behaviour.measured_effect`` words it) and one concrete
    ``mutation``, so that the next change alters what the program computes; with ``change_line``, as a run
    always asks it, the reply first names its edit in one line (:func:`with_change_line`).
    """
    ending = reply_ending(form, version_source, change_line)
    return [SystemMessage(SYSTEM), HumanMessage(
        f"## Task\n{task_description}\n\n"
        f"## Current program\n```python\n{without_docstrings(version_source)}```\n\n"
        f"## What your last change did\nIt ran correctly but had no effect: {effect}. Rewording, renaming, "
        f"reordering independent statements or adding code whose result is never used does not change "
        f"what the program returns.\n\n"
        f"## Your job\nMake one concrete change to how this program computes its result: {mutation}. "
        f"The change must alter the result it returns, in a way that {goal_of(higher_is_better)}. Keep the "
        f"function name and signature. {ending}")]


@dataclass
class Exemplar:
    """One reference program as the Generator sees it.

    ``code``: its program; None: abstract only.
    """

    status: str
    score: float
    abstract: str
    code: str | None = None
    reason: str = ""


def _scores(metrics: dict[str, float]) -> str:
    return ", ".join(f"{k} {v:.4g}" for k, v in metrics.items())


def parent_section(code: str, abstract: str, score: float, metrics: dict[str, float],
                   diagnostics: str) -> str:
    """The current program: scores, abstract, code and the evaluator's notes."""
    notes = f"\nEvaluator notes: {diagnostics.strip()}" if diagnostics.strip() else ""
    return (f"## Current program (score {score:.4g}; {_scores(metrics)})\nAbstract: {abstract}\n"
            f"```python\n{code}```{notes}\n")


def exemplar_section(n: int, ex: Exemplar) -> str:
    """One reference program: outcome, abstract and, if budgeted, its code."""
    if ex.status == "ok":
        head = f"### Reference {n} (score {ex.score:.4g})"
    else:
        head = (f"### Reference {n} (FAILED, {ex.status}: {ex.reason[:160]}). Its idea may be worth keeping; "
                "do not repeat its error.")
    code = f"```python\n{ex.code}```\n" if ex.code else ""
    return f"{head}\nAbstract: {ex.abstract}\n{code}"


def exemplars_part(sections: list[str]) -> str:
    """The prompt's part that shows the reference programs (rendered sections, in order); "" for none."""
    return "## Reference programs\n" + "\n".join(sections) if sections else ""


@dataclass(frozen=True)
class GeneratorPrompt:
    """The Generator's prompt Φ = (z_p, g, E_ctx) as its parts.

    Built by :func:`contextevolve.loop.composing.build_prompt` (``compose`` chooses its exemplars) and
    sent by ``generate``.
    """

    task: str
    """The task's description (the ``## Task`` part)."""
    parent: str
    """The parent's part (:func:`parent_section`)."""
    guidance: str
    """g: the direction the child follows (empty: none)."""
    exemplars: tuple[str, ...]
    """The rendered reference programs (:func:`exemplar_section`), in the Sampler's order."""
    job: str
    """The ``## Your job`` part: the edit form's instructions (:meth:`EditForm.job`)."""
    exemplar_ids: tuple[str, ...] = ()
    """Ids of the programs behind ``exemplars`` (what the child's record keeps)."""
    code_ids: tuple[str, ...] = ()
    """Those of them shown with their code (the others by abstract)."""

    def text(self) -> str:
        """The user message: the parts that are not empty, joined by blank lines."""
        parts = [f"## Task\n{self.task}", self.parent]
        if self.guidance:
            parts.append(f"## Direction\n{self.guidance}")
        if self.exemplars:
            parts.append(exemplars_part(list(self.exemplars)))
        parts.append(f"## Your job\n{self.job}")
        return "\n\n".join(parts)

    def messages(self) -> list:
        """The request's messages: :data:`SYSTEM` and :meth:`text`."""
        return [SystemMessage(SYSTEM), HumanMessage(self.text())]

    @property
    def tokens(self) -> int:
        """Estimated tokens of the request (:func:`~contextevolve.llm.calls.estimate_tokens` per message)."""
        return estimate_tokens(SYSTEM) + estimate_tokens(self.text())


def generator_prompt(task_description: str, parent: str, guidance: str, exemplars: list[str],
                     form: EditForm, higher_is_better: bool, parent_source: str,
                     exemplar_ids: list[str] | None = None,
                     code_ids: list[str] | None = None) -> GeneratorPrompt:
    """The Generator's prompt from rendered parts.

    ``form`` writes its job for ``parent_source``, the parent's program as it is (the diff form's
    example is made of its lines). It asks for no ``Change:`` line: only an ask after a twin does
    (docs/decisions/change-line.md).
    """
    job = form.job(goal_of(higher_is_better), parent_source)
    return GeneratorPrompt(task=task_description, parent=parent, guidance=guidance,
                           exemplars=tuple(exemplars), job=job,
                           exemplar_ids=tuple(exemplar_ids or ()), code_ids=tuple(code_ids or ()))
