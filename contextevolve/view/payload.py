"""What the live view shows, as JSON-ready dicts built from a run's stored data.

:func:`search` is the page's whole-run picture (every child's point, the best so far, tokens and seconds by
role and phase); :func:`child` one child's context: what it was made from (parent and its abstract, the
trajectory the Navigator read, the guidance, the candidates retrieval offered and the exemplars chosen),
what came of it (its abstract, the evaluator's verdict and feedback, its repairs) and what it cost. Both
read :class:`contextevolve.report.data.RunData`, the report's own reading of a run.
"""

from __future__ import annotations

from contextevolve.memory.records import ProgramRecord
from contextevolve.report.data import RunData
from contextevolve.roles import total_tokens

TEXT_LIMIT = 4000
"""Characters kept of one long text field (diagnostics, traceback, a repair's reason)."""


def _brief(data: RunData, program: ProgramRecord) -> dict:
    """What a list or a chart shows of a program.

    ``cost``: dollars, None without prices; ``twin_of``: the program a behavioural twin's results equal;
    ``sibling_of``: the first child of the prompt the program was a later reply to (``""``: none).
    """
    return {"id": program.id, "iteration": program.iteration, "parent_id": program.parent_id,
            "status": program.status, "score": program.combined_score if program.status == "ok" else None,
            "reason": program.reason[:300], "failure_kind": program.failure_kind, "worker": program.worker,
            "tokens": total_tokens(program.tokens), "seconds": round(sum(program.seconds.values()), 2),
            "cost": data.cost(program.tokens), "twin_of": program.behavioural_twin_of,
            "sibling_of": program.sibling_of,
            "repairs": len(program.repairs)}


def search(data: RunData) -> dict:
    """The whole run: programs in iteration order, the best score after each, usage by role and phase.

    Returns a dict with ``task`` (name, title, ``higher_is_better``), ``programs`` (one :func:`_brief` each),
    ``best_so_far`` (score of the best valid program after each program, ``None`` while none),
    ``best_id``, ``improvements`` (ids), ``tokens_by_role`` (prompt / completion per role),
    ``seconds_by_phase``, ``total_tokens``, ``total_cost`` and ``cost_by_role`` (dollars; None without
    prices).
    """
    by_id = data.by_id
    return {
        "run_dir": str(data.run_dir),
        "task": {"name": data.settings.get("task", ""), "title": data.task.title,
                 "higher_is_better": data.task.higher_is_better},
        "programs": [_brief(data, p) for p in data.programs],
        "best_so_far": [by_id[b].combined_score if b else None for b in data.best_so_far],
        "best_id": data.best.id if data.best else None,
        "improvements": list(data.improvements),
        "tokens_by_role": data.tokens_by_role(),
        "seconds_by_phase": data.seconds_by_phase(),
        "total_tokens": data.total_tokens(),
        "total_cost": data.cost(data.tokens_by_role()),
        "cost_by_role": {role: data.cost({role: usage}) for role, usage in data.tokens_by_role().items()},
    }


def _related(data: RunData, ids: list[str], chosen: set[str] = frozenset()) -> list[dict]:
    """The programs ``ids`` names (those still stored), with their abstracts; ``chosen`` marks exemplars."""
    by_id = data.by_id
    return [{**_brief(data, by_id[i]), "abstract": by_id[i].abstract, "chosen": i in chosen}
            for i in ids if i in by_id]


def child(data: RunData, program_id: str) -> dict:
    """One program's context, verdict and cost.

    Returns a dict with the program's :func:`_brief` fields and ``metrics``, ``abstract``, ``guidance``
    (``navigator_guidance``: the Navigator's, when a person replaced it),
    ``parent`` (its brief and abstract, or ``None``), ``trajectory`` (the steps' children the Navigator
    read), ``candidates`` (retrieval's offer, each marked ``chosen`` when it became an exemplar) and
    ``exemplars`` (those shown), ``feedback`` (the evaluator's ``diagnostics``, ``traceback``),
    ``attempts`` (its failed versions, each repaired), ``tokens_by_role``, ``seconds_by_phase``,
    ``llm_calls``, ``diff`` (against its parent) and ``source``.

    Raises:
        KeyError: no committed program has that id.
    """
    program = data.by_id[program_id]
    parent = data.by_id.get(program.parent_id or "")
    chosen = set(program.exemplar_ids)
    return {
        **_brief(data, program),
        "metrics": program.metrics,
        "abstract": program.abstract,
        "guidance": program.guidance,
        "navigator_guidance": program.navigator_guidance,
        "parent": {**_brief(data, parent), "abstract": parent.abstract} if parent else None,
        "trajectory": _related(data, program.trajectory_ids),
        "candidates": _related(data, program.candidate_ids, chosen),
        "exemplars": _related(data, program.exemplar_ids, chosen),
        "feedback": {"reason": program.reason, "diagnostics": program.diagnostics[:TEXT_LIMIT],
                     "traceback": program.traceback[:TEXT_LIMIT]},
        "attempts": [{"attempt": a.attempt, "method": a.method, "status": a.status,
                      "reason": a.reason[:TEXT_LIMIT], "failure_kind": a.failure_kind,
                      "tokens": total_tokens(a.tokens)} for a in program.attempts],
        "tokens_by_role": program.tokens,
        "seconds_by_phase": program.seconds,
        "llm_calls": [call.model_dump() for call in program.llm_calls],
        "diff": data.diff(program),
        "source": program.source,
    }
