"""What a run directory holds, read without running anything: its summary and its workers' states.

``run_status`` (``contextevolve status``), ``worker_states`` and ``thread_state`` read the Evolve Buffer
and the checkpoints read-only; :mod:`contextevolve.api` re-exports them.
"""

from __future__ import annotations

import functools
import json
import statistics
from pathlib import Path
from typing import Any

from contextevolve.graph.context import DEFAULT_TASK
from contextevolve.llm import serving
from contextevolve.llm.pricing import saved_cost
from contextevolve.memory.buffer import EvolveBuffer
from contextevolve.memory.store import BUFFER_FILE
from contextevolve.roles import total_tokens
from contextevolve.tasks.problem.source import staged_task
from contextevolve.tasks.registry import get_task
from contextevolve.timing import add_seconds, llm_by_phase, llm_by_role, wall
from contextevolve.workers import CHECKPOINT_FILE, checkpointed_states, worker_phases

SETTINGS_FILE = "run.json"
"""The run's settings (``RunContext`` without the API key), in the run directory."""


class RunDirError(ValueError):
    """The run directory does not fit the request (already used, or nothing to resume)."""


def run_status(run_dir: str | Path) -> dict[str, Any]:
    """Summary of a run directory, read from its Evolve Buffer only (fast; loads no models).

    Keys: ``run_dir``, ``task``, ``iterations``, ``programs`` (committed, failed ones included),
    ``statuses`` (count per status), ``failure_kinds`` (count per failure kind), ``behavioural_twins``
    (valid programs whose results equal an earlier one's),
    ``prompts`` (composed prompts the children were replies to) and ``children_per_prompt``,
    ``initial_score``, ``best_score``, ``best_id``, ``repairs``
    (``attempted``: repair calls, ``succeeded``: children they made ok), ``tokens`` (by role),
    ``total_tokens``, ``cost`` (dollars at the run's prices, None without), ``seconds`` (wall seconds by
    phase, summed over programs; see :mod:`contextevolve.timing`), ``llm`` (per usage role: ``calls``,
    ``seconds``, ``prompt``, ``completion``), ``seconds_per_iteration`` (median over the children),
    ``served_by`` (what answered the LLM calls at each start or resume, oldest first:
    :func:`contextevolve.llm.serving.recorded`),
    ``workers`` (each worker's phase: :func:`contextevolve.workers.worker_phases`).

    Raises:
        RunDirError: ``run_dir`` holds no run.
    """
    root = Path(run_dir)
    if not (root / BUFFER_FILE).exists():
        raise RunDirError(f"{root} holds no run (no {BUFFER_FILE})")
    settings = json.loads((root / SETTINGS_FILE).read_text()) if (root / SETTINGS_FILE).exists() else {}
    task = get_task(staged_task(settings.get("task", DEFAULT_TASK), root))
    buffer = EvolveBuffer(root / BUFFER_FILE, read_only=True)  # (an older run is read, not migrated)
    try:
        records = buffer.committed()
        best = buffer.best_by(task.better)
        tokens = buffer.token_usage()
    finally:
        buffer.close()
    statuses: dict[str, int] = {}
    kinds: dict[str, int] = {}
    for r in records:
        statuses[r.status] = statuses.get(r.status, 0) + 1
        if r.failure_kind:
            kinds[r.failure_kind] = kinds.get(r.failure_kind, 0) + 1
    initial = next((r for r in records if r.iteration == 0), None)
    seconds = functools.reduce(add_seconds, (r.seconds for r in records), {})
    children = [wall(r.seconds) for r in records if r.iteration and r.seconds]
    prompts = sum(1 for r in records if r.iteration and not r.sibling_of)
    return {
        "run_dir": str(root),
        "task": task.name,
        "iterations": max((r.iteration for r in records), default=0),
        "programs": len(records),
        "statuses": statuses,
        "failure_kinds": kinds,
        "behavioural_twins": sum(bool(r.behavioural_twin_of) for r in records),
        "prompts": prompts,
        "children_per_prompt": round((len(records) - 1) / prompts, 2) if prompts and initial else None,
        "initial_score": initial.combined_score if initial else None,
        "best_score": best.combined_score if best else None,
        "best_id": best.id if best else None,
        "repairs": {"attempted": sum(len(r.repairs) for r in records),
                    "succeeded": sum(1 for r in records if r.status == "ok" and r.repairs)},
        "tokens": tokens,
        "total_tokens": total_tokens(tokens),
        "cost": saved_cost(settings, tokens),
        "seconds": seconds,
        "llm": llm_by_role(c for r in records for c in r.llm_calls),
        "llm_by_phase": llm_by_phase(c for r in records for c in r.llm_calls),
        "seconds_per_iteration": round(statistics.median(children), 1) if children else None,
        "served_by": serving.recorded(root),
        "workers": worker_phases(root),
    }


def worker_states(run_dir: str | Path) -> dict[int, dict[str, Any]]:
    """The latest checkpointed state of each worker's thread.

    See :func:`contextevolve.workers.checkpointed_states`.

    Raises:
        RunDirError: ``run_dir`` has no checkpoints.
    """
    try:
        return checkpointed_states(Path(run_dir))
    except FileNotFoundError:
        raise RunDirError(f"{run_dir} has no checkpoints ({CHECKPOINT_FILE})") from None


def _format_of(root: Path) -> int:
    """The buffer format of the run in ``root`` (read-only)."""
    buffer = EvolveBuffer(root / BUFFER_FILE, read_only=True)
    try:
        return buffer.stored_format()
    finally:
        buffer.close()


def thread_state(run_dir: str | Path, worker: int = 0) -> dict[str, Any]:
    """The latest checkpointed state of worker ``worker``'s thread (:func:`worker_states`).

    Raises:
        RunDirError: ``run_dir`` has no checkpoints, or no such worker.
    """
    states = worker_states(run_dir)
    if worker not in states:
        root = Path(run_dir)
        before_workers = not states and (root / BUFFER_FILE).is_file() and _format_of(root) == 1
        older = (" (a run from before workers keeps one thread, 'main': resume it once to go on with workers)"
                 if before_workers else "")
        raise RunDirError(f"{run_dir} has no worker {worker} (workers: {sorted(states) or 'none'}){older}")
    return states[worker]
