"""The task interface: what ContextEvolve needs to know about a problem it evolves code for.

A task bundles a prose description (used in every agent prompt), an initial program,
the direction of each metric, and an evaluator that scores untrusted candidate source.
Evaluators must recompute every metric from the candidate's *outputs* with their own
copy of the inputs; the candidate runs in a child process (see
:mod:`contextevolve.evaluation.isolation`).
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from importlib import resources
from typing import Literal

from pydantic import BaseModel, Field, model_validator

from contextevolve.evaluation.isolation import run_candidate
from contextevolve.evaluation.jobs import Call, EvalJob
from contextevolve.evaluation.limits import SandboxLimits
from contextevolve.evaluation.results import CallResult, CandidateRun, outputs_digest
from contextevolve.evaluation.tracebacks import candidate_excerpt
from contextevolve.memory.records import FailureKind, kind_of_status

__all__ = ["Call", "CallResult", "CandidateRun", "EvalJob", "EvalStatus", "Evaluation", "MetricSpec", "Task"]

EvalStatus = Literal["ok", "invalid", "failed", "timeout"]
"""Outcome of one evaluation.

``ok``: ran and produced valid outputs. ``invalid``: ran but its outputs break the
task's contract (a model missing, memory exceeded, ...). ``failed``: could not run
(syntax error, exception in every case, malformed LLM output). ``timeout``: killed
at the wall-clock limit.
"""


class Evaluation(BaseModel):
    """The evaluator's verdict on one candidate program.

    ``metrics`` maps metric name to value (units per task, see ``Task.metrics``);
    ``combined_score`` is the scalar the search ranks by (oriented by
    ``Task.higher_is_better``); anything not ``ok`` scores the task's worst value.
    """

    status: EvalStatus
    metrics: dict[str, float] = Field(default_factory=dict)
    combined_score: float = 0.0
    reason: str = ""
    """Why the status is not ``ok``, for people and the LLM; empty when it is."""
    failure_kind: FailureKind = ""
    """What kind of failure (:data:`~contextevolve.memory.records.FailureKind`); when not given, the
    one the status implies (``failed`` → ``runtime``, ``invalid``, ``timeout``), ``""`` when ok."""
    diagnostics: str = ""
    """Short text (a few lines) that later prompts may show the LLM."""
    traceback: str = ""
    """Where the candidate failed: the frames of its own file (``line N, in fn`` and the code) and the
    exception (:func:`~contextevolve.evaluation.tracebacks.candidate_excerpt`); empty for ok programs."""
    seconds: float = 0.0
    """Wall-clock seconds the evaluation took, candidate process included."""
    import_seconds: float = 0.0
    """Of ``seconds``, the sandbox's time to start the candidate's interpreter and import it."""
    call_seconds: float = 0.0
    """Of ``seconds``, the candidate's timed calls (the supervisor's measurements, summed)."""
    notes: list[str] = Field(default_factory=list)
    """Sandbox guarantees this host could not enforce for this evaluation (empty when all were)."""
    outputs_digest: str = ""
    """What the candidate returned, as :func:`~contextevolve.evaluation.results.outputs_digest` (ok
    evaluations of a task with :attr:`Task.outputs_identify_behaviour`; else ``""``)."""

    @model_validator(mode="after")
    def _kind_from_status(self) -> Evaluation:
        if self.status == "ok":
            self.failure_kind = ""
        elif not self.failure_kind:
            self.failure_kind = kind_of_status(self.status)
        return self


class MetricSpec(BaseModel):
    """One named metric of a task and the direction in which it improves."""

    name: str
    higher_is_better: bool = True
    description: str = ""
    worst: float = 0.0
    """Value recorded for a program that produced no valid output (the metric's worst end)."""

    def oriented(self, value: float) -> float:
        """``value`` (or a difference of two values) signed so that larger is better."""
        return value if self.higher_is_better else -value


class Task(ABC):
    """A problem ContextEvolve can evolve a program for.

    Subclasses set the class attributes and implement :meth:`job` (the calls the candidate
    gets, each with its inputs) and :meth:`grade_run` (the trusted grader);
    :meth:`evaluate` runs the sandbox between them. A grader recomputes every metric from the
    returned outputs with its own inputs and counts a failed call at its worst value, so that a
    hostile candidate cannot forge its score (docs/tasks.md, *Rules shared by every grader*).
    """

    name: str
    """Registry key, e.g. ``"model_placement"``."""
    title: str
    """Human-readable name."""
    description: str
    """Problem statement shown to every agent: the function contract and the objective."""
    metrics: list[MetricSpec]
    """The task's metrics; trajectories are categorised over these."""
    higher_is_better: bool = True
    """Orientation of ``combined_score`` for the search."""
    timeout_s: float = 60.0
    """Default wall-clock limit of one evaluation, seconds."""
    worst_score: float = 0.0
    """``combined_score`` of a rejected program: the worst end of the score's range (0 when
    higher is better; a lower-is-better task sets its maximum)."""
    score_tolerance: float = 0.0
    """Least difference of ``combined_score`` that counts as better (:meth:`better`): 0 for a task
    whose score is deterministic; a task whose score has a timing term sets the change that term
    makes for timing noise, so a copy that ran a few milliseconds faster is not a new best."""

    outputs_identify_behaviour: bool = True
    """The candidate's outputs (each call's value and blobs) are what the grader scores, so two programs
    with the same outputs behave the same (their :attr:`Evaluation.outputs_digest` says so). Off for a
    user's problem, whose one call returns the evaluator's metrics rather than the program's outputs."""

    abstract_feedback: bool = False
    """Show the Summarizer the evaluator's diagnostics of each program. Off for the built-in tasks (their
    descriptions say what is measured); on for a user's problem, whose metrics and artifacts are the
    agents' only statement of what its evaluator measures."""

    baseline_files: dict[str, str] = {}
    """Table 1 baselines shipped with the task: label -> file in the task's package
    (``heuristic``, ``human_sota``); the initial program is always a baseline too."""

    @property
    def initial_program(self) -> str:
        """Source of the program evolution starts from (``initial_program.py`` of the task package)."""
        return self.package_file("initial_program.py")

    def package_file(self, name: str) -> str:
        """Text of file ``name`` shipped in the task's own package."""
        package = type(self).__module__.rpartition(".")[0]
        return resources.files(package).joinpath(name).read_text(encoding="utf-8")

    def baselines(self) -> dict[str, str]:
        """Baseline programs as label -> source: ``initial`` first, then :attr:`baseline_files`."""
        out = {"initial": self.initial_program}
        out.update({label: self.package_file(f) for label, f in self.baseline_files.items()})
        return out

    @abstractmethod
    def job(self) -> EvalJob:
        """What the sandbox gets for one evaluation: harness module, entry function, the calls."""

    @abstractmethod
    def grade_run(self, run: CandidateRun) -> Evaluation:
        """Score a run whose calls were all reported (``run.calls``, one per call of :meth:`job`).

        The trusted grader. It should return an ``invalid``/``failed`` Evaluation for bad
        output; an exception it raises anyway is turned into ``invalid`` by :meth:`grade_safely`.
        """

    def evaluate(self, source: str, *, timeout_s: float | None = None,
                 limits: SandboxLimits | None = None) -> Evaluation:
        """Score candidate ``source`` in the sandbox; never raises for a bad candidate.

        Args:
            source: the candidate program (untrusted).
            timeout_s: wall-clock limit, seconds; overrides ``limits.timeout_s``; default
                :attr:`timeout_s`.
            limits: sandbox limits (default :class:`SandboxLimits`).

        Returns:
            The grader's :class:`Evaluation` (``notes`` lists sandbox guarantees this host
            could not enforce), or a rejection with the worst score when no result came back.
        """
        limits = limits or SandboxLimits()
        limits = limits.resolved(timeout_s or limits.timeout_s or self.timeout_s)
        run = run_candidate(source, self.job(), limits=limits)
        if run.status != "ok":
            evaluation = self.rejected(run.status, run.reason, seconds=run.seconds,  # type: ignore[arg-type]
                                       diagnostics=(run.reason + "\n"
                                                    + (run.traceback or run.stderr_tail)[-400:]).strip(),
                                       traceback=candidate_excerpt(run.traceback),
                                       failure_kind=run.failure_kind)  # type: ignore[arg-type]
        else:
            evaluation = self.grade_safely(run)
            evaluation.seconds = run.seconds
            if evaluation.status == "ok" and self.outputs_identify_behaviour:
                evaluation.outputs_digest = outputs_digest(run.calls)
            if evaluation.status != "ok":
                failed = [c for c in run.calls if c.status != "ok" and c.traceback]
                evaluation.traceback = candidate_excerpt(failed[0].traceback) if failed else ""
        evaluation.notes = list(run.notes)
        evaluation.import_seconds = run.import_seconds
        evaluation.call_seconds = sum(c.seconds for c in run.calls)
        return evaluation

    def grade_safely(self, run: CandidateRun) -> Evaluation:
        """:meth:`grade_run`, total: nothing raises out.

        Any exception while grading, or a metric or score that is not a finite number, makes the program
        ``invalid`` with the reason.
        """
        try:
            evaluation = self.grade_run(run)
        except Exception as exc:  # noqa: BLE001 - whatever the candidate returned must not stop the run
            return self.rejected("invalid",
                                 f"output could not be graded: {type(exc).__name__}: {str(exc)[:200]}")
        values = {"combined_score": evaluation.combined_score, **evaluation.metrics}
        bad = [name for name, value in values.items()
               if not isinstance(value, (int, float)) or isinstance(value, bool) or not math.isfinite(value)]
        if bad:
            return self.rejected("invalid", f"grading produced a non-finite {bad[0]} ({values[bad[0]]!r})")
        if evaluation.status != "ok":  # a rejection always carries the worst score and metrics
            worst = self.rejected(evaluation.status, evaluation.reason or "rejected",
                                  diagnostics=evaluation.diagnostics, failure_kind=evaluation.failure_kind)
            return worst
        return evaluation

    @staticmethod
    def refusal(value: object) -> str:
        """Why an array task's harness value is not the empty ``{}`` of a good call; ``""`` when it is.

        Its ``{"bad": why}`` (the harness refused the program's return value), or a malformed value.
        """
        if not isinstance(value, dict) or not set(value) <= {"bad"}:
            keys = sorted(map(str, value))[:5] if isinstance(value, dict) else type(value).__name__
            return f"malformed harness output ({keys})"
        return str(value["bad"])[:300] if "bad" in value else ""

    @staticmethod
    def call_failures(run: CandidateRun) -> list[str]:
        """``"call i: reason"`` for every call that did not return a result (in call order)."""
        return [f"call {i}: {c.status}: {c.error}" for i, c in enumerate(run.calls) if c.status != "ok"]

    def rejected(self, status: EvalStatus, reason: str, *, seconds: float = 0.0, diagnostics: str = "",
                 traceback: str = "", failure_kind: FailureKind = "") -> Evaluation:
        """An Evaluation for a program with no valid output: worst score and worst metrics.

        ``failure_kind`` defaults to the one ``status`` implies.
        """
        return Evaluation(status=status, reason=reason, seconds=seconds, combined_score=self.worst_score,
                          failure_kind=failure_kind,
                          metrics={m.name: m.worst for m in self.metrics}, traceback=traceback,
                          diagnostics=diagnostics or (f"Rejected: {reason}" if status == "invalid" else ""))

    def smoke_job(self) -> EvalJob | None:
        """One small case for the pre-check's smoke run; None: no smoke run.

        The smoke run is :mod:`contextevolve.tasks.prechecks`'s.

        Default: the first call of :meth:`job`. Tasks whose first case is large override it.
        """
        job = self.job()
        return job.model_copy(update={"calls": job.calls[:1]})

    def smoke_refusal(self, value: object) -> str:  # noqa: ARG002 - tasks that can tell override it
        """Why the smoke call's harness value already shows a broken contract, or ``""``.

        ``""`` (the default) when it cannot tell without the full grader.
        """
        return ""

    def observe(self, metrics: dict[str, float]) -> None:  # noqa: ARG002 - tasks with fixed metrics ignore it
        """Note the metric names of a stored evaluation.

        A task whose evaluator decides its metrics (a user's problem) lists them in :attr:`metrics` from
        then on. Default: nothing (the metrics are fixed).
        """

    def better(self, a: float | None, b: float | None) -> bool:
        """True when combined score ``a`` is better than ``b`` by more than :attr:`score_tolerance`.

        ``None`` is worst.
        """
        if a is None:
            return False
        if b is None:
            return True
        return a - b > self.score_tolerance if self.higher_is_better else b - a > self.score_tolerance
