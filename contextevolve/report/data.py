"""What a run report shows, read from a run directory: programs, lineage, improvements, tokens.

Everything comes from what the run stored (``buffer.sqlite`` and ``run.json``); nothing is
re-evaluated. Only committed programs count (an iteration in flight is not shown).
"""

from __future__ import annotations

import difflib
import functools
import json
from dataclasses import dataclass, field
from pathlib import Path

from contextevolve.graph.context import DEFAULT_TASK, RunContext
from contextevolve.llm.pricing import cost
from contextevolve.memory.buffer import EvolveBuffer
from contextevolve.memory.records import ProgramRecord
from contextevolve.memory.store import BUFFER_FILE
from contextevolve.roles import USAGE_ROLES, TokenUsage, add_usage, total_tokens
from contextevolve.tasks.base import Task
from contextevolve.tasks.problem.source import staged_task
from contextevolve.tasks.registry import get_task
from contextevolve.timing import add_seconds, by_phase


class ReportError(ValueError):
    """The directory holds no run a report can be made of (the message names what is missing)."""


@dataclass
class RunData:
    """One run as the report shows it.

    Attributes:
        run_dir: the run directory.
        task: the run's task (orientation of its score and metrics).
        settings: ``run.json`` (the run's settings; ``{}`` when absent).
        programs: committed programs by iteration (``programs[0]`` is the initial program).
        best_so_far: after each program, the id of the best valid program so far (``None`` while none).
        improvements: ids of the programs that beat the best so far when they were admitted.
    """

    run_dir: Path
    task: Task
    settings: dict
    programs: list[ProgramRecord]
    best_so_far: list[str | None] = field(default_factory=list)
    improvements: list[str] = field(default_factory=list)

    @property
    def by_id(self) -> dict[str, ProgramRecord]:
        """Programs by id."""
        return {p.id: p for p in self.programs}

    @property
    def best(self) -> ProgramRecord | None:
        """The best valid program (``None`` when none is valid)."""
        return self.by_id[self.best_so_far[-1]] if self.best_so_far and self.best_so_far[-1] else None

    @property
    def edges(self) -> list[tuple[str, str]]:
        """Lineage edges (parent id, child id)."""
        return [(p.parent_id, p.id) for p in self.programs if p.parent_id]

    def tokens_by_role(self) -> dict[str, dict[str, int]]:
        """Prompt and completion tokens per role over the whole run (``USAGE_ROLES`` order)."""
        out: TokenUsage = {role: {"prompt": 0, "completion": 0} for role in USAGE_ROLES}
        for program in self.programs:
            out = add_usage(out, program.tokens)
        return out

    def seconds_by_phase(self) -> dict[str, dict[str, float]]:
        """Per phase, slowest first: ``{"seconds", "llm", "share"}`` (:func:`contextevolve.timing.by_phase`).

        Wall seconds summed over programs, the part spent on LLM replies, and the phase's share of all
        phases.
        """
        return by_phase(functools.reduce(add_seconds, (p.seconds for p in self.programs), {}))

    def total_tokens(self) -> int:
        """Prompt plus completion tokens of every role and program."""
        return sum(total_tokens(p.tokens) for p in self.programs)

    @functools.cached_property
    def run_context(self) -> RunContext | None:
        """The run's settings as read from ``run.json`` (None when absent or unreadable by this version)."""
        try:
            return RunContext.from_json(self.settings) if self.settings else None
        except ValueError:
            return None

    def cost(self, usage: TokenUsage) -> float | None:
        """Dollars of ``usage`` at the run's prices (None when a model it called has none)."""
        ctx = self.run_context
        return cost(ctx, usage) if ctx is not None and ctx.llm.prices else None

    def tokens_per_improvement(self) -> float | None:
        """Tokens spent per improvement of the best (``None`` without improvements)."""
        return self.total_tokens() / len(self.improvements) if self.improvements else None

    def diff(self, program: ProgramRecord) -> str:
        """Unified diff of ``program``'s source against its parent's ('' for the initial program or none)."""
        parent = self.by_id.get(program.parent_id or "")
        if parent is None or not program.source:
            return ""
        return "".join(difflib.unified_diff(parent.source.splitlines(keepends=True),
                                            program.source.splitlines(keepends=True),
                                            fromfile=parent.id, tofile=program.id))


def load_run(run_dir: str | Path) -> RunData:
    """Read the run in ``run_dir`` for a report.

    Raises:
        ReportError: no ``buffer.sqlite`` (not a run directory), no committed program yet, or a
            task name in ``run.json`` that is not registered.
    """
    root = Path(run_dir)
    if not (root / BUFFER_FILE).is_file():
        raise ReportError(f"{root} is not a run directory: it has no {BUFFER_FILE}")
    settings = json.loads((root / "run.json").read_text()) if (root / "run.json").is_file() else {}
    buffer = EvolveBuffer(root / BUFFER_FILE, read_only=True)
    try:
        programs = sorted(buffer.committed(), key=lambda p: p.iteration)
    finally:
        buffer.close()
    if not programs:
        raise ReportError(f"{root} holds no committed program yet (the initial program is scored first)")
    try:
        task = get_task(staged_task(settings.get("task", DEFAULT_TASK), root))
    except KeyError as exc:
        raise ReportError(f"{root}/run.json names a task that is not registered: {exc}") from None
    except ValueError as exc:  # a user's problem whose staged copy is gone
        raise ReportError(f"{root}/run.json names a problem that cannot be loaded: {exc}") from None
    for program in programs:
        if program.status == "ok":
            task.observe(program.metrics)
    data = RunData(root, task, settings, programs)
    best: ProgramRecord | None = None
    for program in programs:
        if program.status == "ok" and (best is None
                                       or task.better(program.combined_score, best.combined_score)):
            if best is not None:
                data.improvements.append(program.id)
            best = program
        data.best_so_far.append(best.id if best else None)
    return data
