"""Evaluation executors: a pool of N workers on this machine, or tasks on a Ray cluster.

Both run :meth:`Task.evaluate` (sandboxed child + trusted grader) for a task *name* and a
source string and return the :class:`~contextevolve.tasks.base.Evaluation` — plain data,
so nothing of the candidate's crosses into the caller. At most ``workers`` evaluations run
at once per executor; callers block in :meth:`Executor.evaluate` (the graph's parallel
workers each call it from their own thread) or submit many with :meth:`Executor.map`.
"""

from __future__ import annotations

import functools
import os
import threading
from abc import ABC, abstractmethod
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Literal

from contextevolve.evaluation.limits import SandboxLimits
from contextevolve.tasks.base import Evaluation
from contextevolve.tasks.registry import get_task

ExecutorKind = Literal["local", "ray"]
RAY_GRACE_S = 120.0
"""Seconds past the wall-clock limit after which a Ray evaluation counts as lost (queueing, data build)."""


def evaluate_by_name(task: str, source: str, timeout_s: float | None,
                     limits: SandboxLimits | None) -> Evaluation:
    """``get_task(task).evaluate(source, ...)``: the unit of work every executor runs.

    Never raises for anything a candidate does: an unexpected error in the sandbox or the
    grader becomes a ``failed`` evaluation naming it (an unknown task still raises ``KeyError``).
    """
    spec = get_task(task)
    try:
        return spec.evaluate(source, timeout_s=timeout_s, limits=limits)
    except Exception as exc:  # noqa: BLE001 - one evaluation must never stop its caller
        return spec.rejected("failed", f"evaluation error: {type(exc).__name__}: {str(exc)[:300]}",
                             failure_kind="evaluator")


class ExecutorError(RuntimeError):
    """An executor cannot be set up (Ray missing or unreachable); the message says which and where."""


class Executor(ABC):
    """Runs evaluations, at most :attr:`workers` at a time."""

    workers: int

    @abstractmethod
    def evaluate(self, task: str, source: str, *, timeout_s: float | None = None,
                 limits: SandboxLimits | None = None) -> Evaluation:
        """Evaluate one candidate; blocks until done (waits for a free worker first)."""

    def map(self, task: str, sources: Sequence[str], *, timeout_s: float | None = None,
            limits: SandboxLimits | None = None) -> list[Evaluation]:
        """Evaluate many candidates concurrently (``workers`` at a time); results in input order."""
        with ThreadPoolExecutor(max_workers=max(1, len(sources))) as threads:
            return list(threads.map(lambda s: self.evaluate(task, s, timeout_s=timeout_s, limits=limits),
                                    sources))

    def close(self) -> None:
        """Release the executor's resources."""


class LocalExecutor(Executor):
    """Evaluations on this machine: each one is a sandboxed child process; ``workers`` run at once.

    Args:
        workers: concurrent evaluations (>= 1).

    Raises:
        ValueError: ``workers`` < 1.
    """

    def __init__(self, workers: int = 1):
        if workers < 1:
            raise ValueError(f"eval workers must be >= 1, got {workers}")
        self.workers = workers
        self._slots = threading.BoundedSemaphore(workers)

    def evaluate(self, task: str, source: str, *, timeout_s: float | None = None,
                 limits: SandboxLimits | None = None) -> Evaluation:
        """Evaluate one candidate in a sandboxed child process; blocks until done (after a free worker)."""
        with self._slots:
            return evaluate_by_name(task, source, timeout_s, limits)


class RayExecutor(Executor):
    """Evaluations as Ray tasks (one CPU each), so they spread over a cluster's machines.

    Every node needs this package (installed or on ``PYTHONPATH``); task data is built on each node on
    first use (:mod:`contextevolve.tasks.datacache`).

    Args:
        workers: evaluations in flight at once (>= 1).
        address: Ray address (``"HOST:PORT"``, ``"ray://HOST:10001"`` or ``"auto"``); ``None``
            starts a local Ray instance in this process.

    Raises:
        ValueError: ``workers`` < 1.
        ExecutorError: Ray is not installed (``pip install 'contextevolve[ray]'``), or the cluster at
            ``address`` cannot be reached (the message names it).
    """

    def __init__(self, workers: int = 1, address: str | None = None):
        if workers < 1:
            raise ValueError(f"eval workers must be >= 1, got {workers}")
        try:
            import ray
        except ImportError as exc:
            raise ExecutorError("the Ray executor needs Ray: pip install 'contextevolve[ray]'") from exc
        self.workers = workers
        self.address = address
        self._slots = threading.BoundedSemaphore(workers)
        if not ray.is_initialized():
            source_root = str(Path(__file__).resolve().parents[2])
            path = os.pathsep.join(p for p in (source_root, os.environ.get("PYTHONPATH", "")) if p)
            try:
                ray.init(address=address, include_dashboard=False, log_to_driver=False,
                         runtime_env={"env_vars": {"PYTHONPATH": path}},
                         **({} if address else {"num_cpus": max(workers, os.cpu_count() or 1)}))
            except Exception as exc:  # noqa: BLE001 - ray raises ConnectionError and others
                raise ExecutorError(f"cannot connect to Ray at {address or 'a new local instance'}: {exc}"
                                    f"{_auth_hint(address)}") from exc
        self._remote = ray.remote(num_cpus=1, max_retries=0)(evaluate_by_name)

    def evaluate(self, task: str, source: str, *, timeout_s: float | None = None,
                 limits: SandboxLimits | None = None) -> Evaluation:
        """Run the evaluation as a Ray task; a lost worker or node is a failed evaluation, not an error."""
        import ray

        spec = get_task(task)
        wall = timeout_s or (limits.timeout_s if limits else None) or spec.timeout_s
        with self._slots:
            ref = self._remote.remote(task, source, timeout_s, limits)
            try:  # the sandbox enforces the limit on the node; this only guards against a lost node
                return ray.get(ref, timeout=wall + RAY_GRACE_S)
            except ray.exceptions.GetTimeoutError:
                ray.cancel(ref, force=True)
                return spec.rejected("timeout",
                                     f"no answer from the Ray cluster within {wall + RAY_GRACE_S:g} s")
            except (ray.exceptions.RayTaskError, ray.exceptions.RayError) as exc:
                reason = str(exc).strip().splitlines()[-1] if str(exc).strip() else type(exc).__name__
                return spec.rejected("failed", f"evaluation on the Ray cluster failed: "
                                     f"{type(exc).__name__}: {reason[:300]}", failure_kind="evaluator")


_lock = threading.Lock()


def _auth_hint(address: str | None) -> str:
    """A hint for a refused connection where Ray's token authentication may be why, or ``""``.

    A local ``ray.init`` writes ``~/.ray/auth_token`` (Ray 2.5x), after which a head started with ``ray
    start`` demands the token, which a client sends only with ``RAY_AUTH_MODE=token``.
    """
    token = Path(os.environ.get("RAY_AUTH_TOKEN_PATH") or Path.home() / ".ray" / "auth_token")
    if address is None or "RAY_AUTH_MODE" in os.environ or not token.is_file():
        return ""
    return (f"; if the cluster uses Ray's token authentication ({token} exists), set RAY_AUTH_MODE=token, "
            "or start the head with RAY_AUTH_MODE=disabled")


@functools.cache
def _cached(kind: ExecutorKind, workers: int, address: str | None) -> Executor:
    if kind == "ray":
        return RayExecutor(workers, address)
    if kind == "local":
        return LocalExecutor(workers)
    raise ValueError(f"unknown executor {kind!r}; choose local or ray")


def executor_for(kind: ExecutorKind = "local", workers: int = 1, address: str | None = None) -> Executor:
    """The process-wide executor for these settings (created on first use, then shared by all workers).

    Raises:
        ValueError: unknown ``kind`` or ``workers`` < 1.
        ExecutorError: see :class:`RayExecutor`.
    """
    with _lock:
        return _cached(kind, workers, address)
