"""Python API: run (or resume) an evolution in a run directory and get the best program back.

Run directory layout (read without running anything: :mod:`contextevolve.run_dir`)::

    RUN_DIR/run.json            run settings (RunContext without the API key)
    RUN_DIR/buffer.sqlite       Evolve Buffer: every program, abstract, metrics, status, lineage, tokens
    RUN_DIR/chroma/             Chroma index of abstracts
    RUN_DIR/checkpoints.sqlite  LangGraph checkpoints (one thread per worker: "worker-0", "worker-1", ...)
    RUN_DIR/best_program.py     best program so far (written at the end of each call)
    RUN_DIR/programs.jsonl      every committed program, one JSON record per line (ditto)
"""

from __future__ import annotations

import json
import sqlite3
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from contextevolve.evaluation.executors import executor_for
from contextevolve.graph.context import (
    RunContext,
    UnknownSettingError,
    check_setting_names,
    upgraded,
)
from contextevolve.llm import serving
from contextevolve.llm.faults import EndpointUnavailable
from contextevolve.llm.pricing import cost, unpriced_models
from contextevolve.loop.steering import steering_for
from contextevolve.memory.buffer import EvolveBuffer
from contextevolve.memory.records import program_id
from contextevolve.memory.store import BUFFER_FILE, close_memory
from contextevolve.roles import TokenUsage, total_tokens
from contextevolve.run_dir import SETTINGS_FILE, RunDirError, run_status, thread_state, worker_states
from contextevolve.tasks.problem.source import PREFIX as PROBLEM_PREFIX
from contextevolve.tasks.problem.source import ProblemSource, staged_task
from contextevolve.tasks.registry import get_task
from contextevolve.workers import CHECKPOINT_FILE, Workers

__all__ = ["RunDirError", "RunResult", "SETTINGS_FILE", "default_run_dir", "evolve", "prepare_context",
           "run_status", "saved_settings", "thread_state", "worker_states"]


@dataclass
class RunResult:
    """Outcome of :func:`evolve`. Scores are combined scores recomputed by the task's evaluator."""

    run_dir: Path
    iterations: int
    programs: int
    initial_score: float | None
    best_score: float | None
    best_id: str | None
    best_program: str
    best_path: Path
    tokens: TokenUsage = field(default_factory=dict)
    stop_reason: str | None = None
    seconds: float = 0.0
    cost: float | None = None
    """US dollars of ``tokens`` at the run's prices; None when a model it called has none."""

    @property
    def total_tokens(self) -> int:
        """Prompt plus completion tokens over all roles."""
        return total_tokens(self.tokens)


def _write_json(path: Path, data: Any) -> None:
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(json.dumps(data, indent=2))
    tmp.replace(path)


def prepare_context(run_dir: str | Path, *, resume: bool, **settings: Any) -> RunContext:
    """Validate ``run_dir`` for a new or resumed run and return its :class:`RunContext`.

    New run: ``run_dir`` must not hold a run yet; unset settings take RunContext's defaults
    (task ``model_placement``, 10 iterations). Resume: every setting, the task included,
    comes from ``run.json``; non-None ``settings`` override them (e.g. more iterations), but
    a different ``task`` is refused.

    Raises (before anything is written):
        UnknownSettingError: a setting that is not a RunContext field (a ValueError naming the
            nearest valid one).
        RunDirError: the directory does not fit, or its run.json is unreadable or names an unknown setting.
        ValueError, KeyError: bad values; an unknown task.
    """
    root = Path(run_dir)
    saved_path = root / SETTINGS_FILE
    settings = {k: v for k, v in settings.items() if v is not None}
    check_setting_names(settings)
    settings["run_dir"] = str(root)
    if resume:
        if not saved_path.exists():
            raise RunDirError(f"nothing to resume: {saved_path} does not exist")
        try:
            saved = json.loads(saved_path.read_text())
        except ValueError as exc:
            raise RunDirError(f"{saved_path} is not valid JSON: {exc}") from None
        if not isinstance(saved, dict):
            raise RunDirError(f"{saved_path} does not hold run settings (a JSON object)")
        if settings.get("task", saved.get("task")) != saved.get("task"):
            raise RunDirError(f"{root} holds a {saved.get('task')!r} run; cannot resume it as "
                              f"{settings['task']!r} (leave out --task to resume it)")
        try:
            check_setting_names(upgraded(saved))
        except UnknownSettingError as exc:
            raise RunDirError(f"{saved_path}: {exc}") from None
        ctx = RunContext.from_json(saved, **settings)
        ctx.task = staged_task(ctx.task, root)  # a problem's own copy, wherever the run directory now is
    else:
        if saved_path.exists() or (root / BUFFER_FILE).exists():
            raise RunDirError(f"{root} already holds a run; use --resume to continue it or pick another "
                              "--run-dir")
        ctx = RunContext(**settings)
    if resume or not ctx.task.startswith(PROBLEM_PREFIX):  # a new problem is checked by ProblemSource.read
        get_task(ctx.task)  # unknown task -> KeyError naming the known ones
    return ctx


def saved_settings(run_dir: str | Path) -> dict[str, Any]:
    """The settings in ``run_dir``'s run.json, or ``{}`` when there is none (or it is unreadable)."""
    try:
        data = json.loads((Path(run_dir) / SETTINGS_FILE).read_text())
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _export(root: Path, buffer: EvolveBuffer, best_id: str | None) -> Path:
    records = buffer.committed()
    with open(root / "programs.jsonl.tmp", "w") as fh:
        for r in records:
            fh.write(r.model_dump_json() + "\n")
    (root / "programs.jsonl.tmp").replace(root / "programs.jsonl")
    best_path = root / "best_program.py"
    best = next((r for r in records if r.id == best_id), None)
    if best is not None:
        best_path.write_text(best.source)
    return best_path


def _problem(problem: str | Path | ProblemSource | None, pieces: dict[str, Any],
             settings: dict[str, Any]) -> ProblemSource | None:
    """The user's problem named by :func:`evolve`'s arguments, read and checked (None: none given)."""
    if isinstance(problem, ProblemSource):
        return problem
    if problem is None and not any(v is not None for v in pieces.values()):
        return None
    return ProblemSource.read(problem, **pieces, timeout_s=settings.get("eval_timeout_s"))


def default_run_dir(task: str | None, problem: ProblemSource | None = None) -> Path:
    """Where a new run goes without ``run_dir``: ``runs/<task or problem title>-<local time>``."""
    name = problem.spec.title if problem is not None else task or RunContext.task
    return Path(f"runs/{name}-{time.strftime('%Y%m%d-%H%M%S')}")


def evolve(task: str | None = None, *, iterations: int | None = None, run_dir: str | Path | None = None,
           resume: bool = False, on_update: Callable[[str, dict], None] | None = None,
           on_phase: Callable[[str, str | None], None] | None = None,
           on_commit: Callable[[dict], None] | None = None,
           problem: str | Path | ProblemSource | None = None, program: str | Path | None = None,
           evaluator: str | Path | None = None, config: str | Path | None = None,
           description: str | None = None, minimize: bool | None = None, **settings: Any) -> RunResult:
    """Run ContextEvolve on ``task`` for ``iterations`` iterations (total in the run) and return the result.

    Args:
        task: registered task name (``None``: ``model_placement`` for a new run, run.json's on resume;
            resuming under another task is refused).
        problem: instead of a task, your own problem in OpenEvolve's form: a folder holding
            ``initial_program.py``, ``evaluator.py`` (``evaluate(program_path)`` returning a dict of
            metrics or an ``EvaluationResult``) and optionally ``config.yaml``; or a
            :class:`~contextevolve.tasks.problem.source.ProblemSource`. It is copied into
            ``RUN_DIR/problem`` (a resumed run uses that copy: leave the problem out on resume).
        program: the problem's initial program (overrides the folder's).
        evaluator: the problem's evaluator file (overrides the folder's).
        config: the problem's OpenEvolve ``config.yaml`` (overrides the folder's).
        description: the task description every agent sees (``@FILE`` reads it from FILE; default:
            the config's ``prompt.system_message``, else one built from the evaluator's docstring).
        minimize: the problem's score is better when lower.
        iterations: iteration budget of the whole run (``None``: 10 for a new run, run.json's on
            resume); a resumed run continues up to it.
        run_dir: run directory (default ``runs/<task>-<timestamp>``).
        resume: continue the run in ``run_dir`` from its last checkpoint (after a crash or
            SIGKILL) or extend a finished one to ``iterations``.
        on_update: called as ``on_update(node_name, state_update)`` after every node of every worker,
            with what the node wrote (workers run side by side, so their calls interleave; one at a time).
        on_phase: called as ``on_phase(node_name, child_id)`` when a node starts; ``child_id`` is
            the id of the child the worker is making (``None`` for initialize and claim).
        on_commit: called with :func:`contextevolve.workers.commit_report` (status, score, reason,
            repairs, tokens, seconds, run totals) once c_0 is in and after every committed child.
        **settings: any :class:`RunContext` field (``base_url``, ``models``, ``seed``, ...); on
            resume, those given (not None) override run.json's.

    Raises:
        RunDirError, ValueError, KeyError: bad run directory or settings (nothing written); an
            unknown setting name is an ``UnknownSettingError`` (a ValueError) naming the nearest field.
        contextevolve.llm.faults.EndpointUnavailable: an LLM endpoint stayed down (connection
            refused, 429/5xx after ``max_retries`` retries) or refused a request (4xx). Everything
            done so far is checkpointed; ``exc.run_dir`` is set and ``evolve(..., resume=True)``
            (``exc.resume_command()`` on the command line) continues the run.
        contextevolve.evaluation.executors.ExecutorError: Ray missing or unreachable (nothing written).
        contextevolve.llm.embedded.EmbeddedModelError: the embedded LLM cannot start.
    """
    from langgraph.checkpoint.sqlite import SqliteSaver

    from contextevolve.graph.builder import build_graph
    from contextevolve.llm import embedded, models
    from contextevolve.loop import behind
    from contextevolve.loop.policy import IgnoredSettingWarning, ignored_settings

    source = _problem(problem, dict(program=program, evaluator=evaluator, config=config,
                                    description=description, minimize=minimize), settings)
    if source is not None:
        if resume:
            raise RunDirError("a resumed run evolves its own copy of the problem (RUN_DIR/problem): "
                              "leave out the problem's folder and files on --resume")
        if task is not None:
            raise ValueError("give a task or a problem, not both")
        settings = {**source.settings, **{k: v for k, v in settings.items() if v is not None}}
        # in the problem's spec: the call's limit, and 30 s more for the sandbox
        settings.pop("eval_timeout_s", None)
        configured = settings.pop("max_iterations", None)
        iterations = iterations if iterations is not None else configured
    root = Path(run_dir or default_run_dir(task, source))
    if source is not None:
        task = PROBLEM_PREFIX + str((root / "problem").resolve())
    ctx = prepare_context(root, resume=resume, task=task, max_iterations=iterations, **settings)
    unpriced = unpriced_models(ctx) if ctx.cost_budget is not None else []
    if unpriced:
        raise ValueError(f"a cost budget needs a price for every model the run calls: none for "
                         f"{', '.join(map(repr, unpriced))} (give --price MODEL=INPUT,OUTPUT, dollars per "
                         "million tokens)")
    if ctx.review_guidance:
        raise ValueError("review_guidance pauses every worker for a person's answer, which evolve() cannot "
                         "give: drive build_graph(checkpointer) yourself and resume with "
                         "Command(resume=...), or use langgraph dev")
    executor_for(ctx.parallelism.executor, ctx.eval_slots, ctx.parallelism.ray_address)  # fail before writing
    for ignored in ignored_settings(ctx):
        warnings.warn(ignored, IgnoredSettingWarning, stacklevel=2)
    served = serving.describe(ctx)  # and if a server variable is malformed
    if resume and (root / BUFFER_FILE).exists():
        # an older format is migrated (or refused) before anything runs
        EvolveBuffer(root / BUFFER_FILE).close()
    root.mkdir(parents=True, exist_ok=True)
    if source is not None:
        source.stage(root / "problem")
    _write_json(root / SETTINGS_FILE, ctx.to_json())
    serving.record(root, served, resumed=resume)
    started = time.perf_counter()
    conn = sqlite3.connect(root / CHECKPOINT_FILE, check_same_thread=False)
    own_server = models.needs_embedded(ctx)  # a server this run did not need is someone else's: left running
    finals: list[dict] = []
    try:
        if own_server:  # start them all before the first node, side by side
            generator = models.embedded_server_key("generator", ctx)
            keys = models.embedded_server_keys(ctx)
            embedded.start_shared_servers(keys, {k: ctx.server_slots(k == generator) for k in keys})
        graph = build_graph(SqliteSaver(conn))
        run = Workers(graph, ctx, root, on_update=on_update, on_phase=on_phase, on_commit=on_commit)
        steering_for(root).open()
        finals = run.drive(resume)
    except EndpointUnavailable as exc:
        exc.run_dir = root
        behind.drain(root)
        close_memory(root)
        raise
    finally:
        steering_for(root).stop()  # a pause asked for this run does not hold the next one in this process
        behind.drain(root)  # (a worker that failed may leave a child being summarized)
        conn.close()
        if own_server:
            embedded.stop_shared_server()
    return _result(root, ctx, finals, time.perf_counter() - started)


def _result(root: Path, ctx: RunContext, finals: list[dict], seconds: float) -> RunResult:
    """The :class:`RunResult` of a run, read from its buffer; also writes best_program.py and programs.jsonl.

    The workers' final states give the stop reason.
    """
    buffer = EvolveBuffer(root / BUFFER_FILE)
    try:
        task = get_task(ctx.task)
        best = buffer.best_by(task.better)
        initial = buffer.get(program_id(0))
        best_path = _export(root, buffer, best.id if best else None)
        reasons = [f.get("stop_reason") for f in finals if f.get("stop_reason")]
        result = RunResult(
            run_dir=root, iterations=max(0, buffer.count() - 1), programs=buffer.count(),
            initial_score=initial.combined_score if initial else None,
            best_score=best.combined_score if best else None, best_id=best.id if best else None,
            best_program=best.source if best else "", best_path=best_path, tokens=buffer.token_usage(),
            stop_reason=reasons[0] if reasons else None, seconds=seconds,
            cost=cost(ctx, buffer.token_usage()))
    finally:
        buffer.close()
        close_memory(root)
    return result
