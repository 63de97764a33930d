"""ContextEvolve's own run in a comparison, and the ledger lines made from its stored children.

Its run goes through :func:`contextevolve.api.evolve` in the comparison's process (the peers run in
processes of their own: :mod:`contextevolve.compare.runner`); its ledger is written after the run from
``programs.jsonl``, one line per version our evaluator ran, so *evaluated* means the same for every system
(docs/compare.md, *Our numbers only*).
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any, NamedTuple

from contextevolve.agents import CONTEXT_AGENTS
from contextevolve.compare import ledger
from contextevolve.compare.schema import CompareSettings
from contextevolve.roles import ROLES, prompt_tokens, total_tokens
from contextevolve.tasks.registry import get_task

ABLATIONS: dict[str, dict[str, bool]] = {f"contextevolve-no-{name}": {f"{name}_enabled": False}
                                          for name in CONTEXT_AGENTS}
"""The paper's three ablations (Fig. 3c): one context agent switched off."""
SET_BY_COMPARE: dict[str, str] = {
    "task": "--task or --problem", "max_iterations": "--iterations", "run_dir": "--out", "seed": "--seeds",
    "base_url": "--base-url", "api_key": "the environment's key", "model": "--model", "models": "--model",
    "embedded": "--base-url", "temperatures": "--temperature", "top_p": "--top-p", "top_k": "--top-k",
    "max_retries": "the comparison (2 retries for every system)", "token_budget": "--token-budget",
    "time_budget_s": "--time-budget", "cost_budget": "--cost-budget", "prices": "--price",
    "log_prompts": "--log-prompts",
}
"""Run settings the comparison gives every ContextEvolve run itself, each with the option that sets it:
a :attr:`CompareSettings.contextevolve_settings` naming one is refused, so that every system runs on the
same endpoint, model, sampling and budget. The sandbox's limits (``eval_*``) are refused too: every
system's candidates are evaluated alike."""


VARIANT_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.]*")
"""What a variant's name may be (:attr:`CompareSettings.variant`): it becomes part of folder names and labels,
whose seed follows the last ``-s``, so it holds no ``-``, ``+`` or path separator."""


def run_name(system: str, variant: str) -> str:
    """The name a system's rows and folders carry in a comparison of ``variant`` (``""``: none).

    A ContextEvolve system (the full one or an ablation) gets ``<system>+<variant>``; a peer keeps its name.
    """
    own = system == "contextevolve" or system in ABLATIONS
    return f"{system}+{variant}" if variant and own else system


def check_variant(variant: str, systems: list[str]) -> None:
    """Refuse a variant name that cannot name folders, or one given to a comparison without ContextEvolve.

    Raises:
        ValueError: ``variant`` is not :data:`VARIANT_NAME`, or ``systems`` holds no ContextEvolve system.
    """
    if not variant:
        return
    if not VARIANT_NAME.fullmatch(variant):
        raise ValueError(f"--variant {variant!r}: a variant's name is letters, digits, '_' and '.', starting "
                         "with a letter or digit (it becomes part of the runs' folder names)")
    if all(run_name(system, variant) == system for system in systems):
        raise ValueError(f"--variant {variant!r} names ContextEvolve's settings, and --systems holds no "
                         "ContextEvolve system")


def check_contextevolve_settings(settings: dict[str, Any]) -> None:
    """Refuse ContextEvolve run settings a comparison cannot take, before any system runs.

    Raises:
        ValueError: an unknown setting (naming the nearest one), one the comparison sets itself
            (:data:`SET_BY_COMPARE`, naming its option), or a value ``RunContext`` refuses.
    """
    from contextevolve.graph.context import GROUPS, SETTINGS, RunContext, check_setting_names

    check_setting_names(settings)
    groups = sorted(name for name in settings if name in GROUPS)
    if groups:
        raise ValueError(f"name ContextEvolve's settings one by one, not as a group: {', '.join(groups)}")
    taken = [f"{name} (set by {SET_BY_COMPARE[name]})" for name in settings if name in SET_BY_COMPARE]
    taken += [f"{name} (every system's candidates are evaluated alike)" for name in settings
              if SETTINGS.get(name, ("",))[0] == "sandbox"]
    if taken:
        raise ValueError(f"a comparison sets these ContextEvolve settings itself: {', '.join(taken)}")
    try:
        RunContext(**settings)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"ContextEvolve settings of the comparison: {exc}") from None


def run_contextevolve(settings: CompareSettings, system: str, seed: int, url: str, model: str,
                      folder: Path) -> tuple[str, int | None, list[int], list[int]]:
    """Run ContextEvolve (or an ablation) in this process and fill the ledger from its stored run.

    Returns ``(why it stopped early or '', its own token total, tokens used by the end of each
    child, the prompt tokens among them)``; the last two are from the children's own token records
    (their ledger entries are written after the run, so their finish times say nothing).
    """
    from contextevolve.api import evolve
    from contextevolve.graph.settings import DEFAULT_TEMPERATURES
    task = get_task(settings.task)
    stopped = ""
    try:
        result = evolve(settings.task, iterations=settings.candidates, run_dir=folder / "run", seed=seed,
                        base_url=url, api_key="none", model=model, max_retries=2,
                        # every role on the comparison's model: a CONTEXTEVOLVE_<ROLE>_MODEL in the
                        # environment would otherwise outrank it and give ContextEvolve another model
                        models={role: model for role in ROLES},
                        temperatures={**DEFAULT_TEMPERATURES, "generator": settings.temperature},
                        token_budget=settings.token_budget, time_budget_s=settings.time_budget_s,
                        cost_budget=settings.cost_budget, prices=settings.prices or None,
                        log_prompts=settings.log_prompts,
                        **{**settings.contextevolve_settings, **ABLATIONS.get(system, {})})
        own = result.total_tokens
        stopped = "" if result.iterations >= settings.candidates else result.stop_reason or ""
    except Exception as exc:  # an endpoint that stayed down: what was stored still counts
        own, stopped = None, f"error: {exc}"[:300]
    records = folder / "run" / "programs.jsonl"
    rows = [json.loads(line) for line in records.read_text().splitlines()] if records.exists() else []
    used, prompts, cumulative, cumulative_prompt = 0, 0, [], []
    for row in sorted(rows, key=lambda r: r["iteration"]):
        used += total_tokens(row.get("tokens"))
        prompts += prompt_tokens(row.get("tokens"))
        if row["iteration"] == 0:
            ledger.record(task, row.get("source", ""), row["status"], row["combined_score"],
                          folder / "ledger.jsonl", reason=row.get("reason", ""),
                          seconds=row.get("eval_seconds", 0.0), initial=True)
            continue
        for version in evaluated_versions(row, used, prompts):
            status, score, reason, seconds = version.status, version.score, version.reason, version.seconds
            if score is None and status == "ok":  # a behavioural twin's score is not kept: score it again
                again = task.evaluate(version.source)
                status, score, reason = again.status, again.combined_score, again.reason
                seconds = again.seconds
            entry = ledger.record(task, version.source, status, task.worst_score if score is None else score,
                                  folder / "ledger.jsonl", reason=reason, seconds=seconds)
            if entry.candidate:
                cumulative.append(version.tokens_used)
                cumulative_prompt.append(version.prompt_tokens_used)
    return stopped, own, cumulative, cumulative_prompt



class EvaluatedVersion(NamedTuple):
    """One version of a ContextEvolve child that our evaluator ran: a ledger candidate."""

    source: str
    status: str
    score: float | None
    """The stored score; None for an earlier version, whose score is not kept (a failed one has the task's
    worst score, a valid one, a behavioural twin, is scored again)."""
    reason: str
    seconds: float
    tokens_used: int
    """The run's tokens by the time this version was made (the ledger's ``cumulative_tokens``)."""
    prompt_tokens_used: int = 0
    """The prompt tokens among :attr:`tokens_used`."""


NOT_EVALUATED = frozenset({"edit", "endpoint", "twin"})
"""Failure kinds of a version that never reached the evaluator: no program came, or the program was a code
twin (the same normalised code as one stored)."""


def evaluated_versions(row: dict, used: int, prompts: int = 0) -> list[EvaluatedVersion]:
    """The versions of the stored child ``row`` that our evaluator ran, in the order they were made.

    A child's versions are its ``attempts`` (each the version a repair, an added import or the ask after a
    behavioural twin started from) and then its final state. Consecutive entries with the same source are
    one version (an ask that made nothing new keeps the version, and a later one may relabel it
    ``edit`` or ``endpoint``); a version counts when one of its entries reached the evaluator (a source,
    a failure kind other than edit / endpoint / twin, not pending), with the verdict of the final state
    when that is the one, else of its first evaluated entry. So a peer's *evaluated* and ContextEvolve's
    count the same thing. ``used`` is the run's tokens by the end of the child; a version is dated before
    the repair requests made after it appeared; ``prompts`` (the prompt tokens among ``used``) is dated so.
    """
    attempts = [a for a in row.get("attempts") or [] if isinstance(a, dict)]
    after = [total_tokens(a.get("tokens")) for a in attempts] + [0]
    after_prompt = [prompt_tokens(a.get("tokens")) for a in attempts] + [0]
    final = {**row, "final": True}
    entries = [*attempts, final]

    def evaluated(entry: dict) -> bool:
        return (bool(entry.get("source")) and entry.get("failure_kind") not in NOT_EVALUATED
                and entry.get("status") != "pending")

    versions, first = [], 0
    for number in range(1, len(entries) + 1):
        if number < len(entries) and entries[number].get("source") == entries[first].get("source"):
            continue
        group = entries[first:number]
        verdict = next((e for e in reversed(group) if e.get("final") and evaluated(e)),
                       next((e for e in group if evaluated(e)), None))
        if verdict is not None:
            made = used - sum(after[first:])
            made_prompt = max(0, prompts - sum(after_prompt[first:]))
            if verdict.get("final"):
                versions.append(EvaluatedVersion(
                    verdict["source"], verdict["status"], verdict["combined_score"],
                    verdict.get("reason", ""), verdict.get("eval_seconds", 0.0), max(0, made), made_prompt))
            else:
                versions.append(EvaluatedVersion(verdict["source"], verdict.get("status", "failed"), None,
                                                 verdict.get("reason", ""), 0.0, max(0, made), made_prompt))
        first = number
    return versions
