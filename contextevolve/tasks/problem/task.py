"""The :class:`~contextevolve.tasks.base.Task` of a user's problem: the user's evaluator, run in the sandbox.

The user's ``evaluate(program_path)`` imports the candidate, so both run in the sandbox (:mod:`.harness`),
whence the metrics come: a hostile candidate can forge them (docs/own-problem.md, *Where it runs, and
what to trust*). :meth:`ProblemTask.grade_run` checks the reply's shape and sizes; a non-finite or no
numeric metric, a reported ``error``, an exception or a timeout fail the child (``failed`` or
``timeout``); a ``validity`` (or ``valid``, ``is_valid``) of 0 makes it ``invalid``. The score is
``combined_score``, else the numeric metrics' mean. The feedback is the evaluator's artifacts, or, when
it returns none, the end of what it printed in the sandbox.
"""

from __future__ import annotations

import math
import re
import threading
from functools import cached_property
from pathlib import Path

from contextevolve.tasks.base import Call, CandidateRun, EvalJob, Evaluation, MetricSpec, Task
from contextevolve.tasks.problem.harness import STAGED
from contextevolve.tasks.problem.source import (
    PREFIX,
    PROGRAM_FILE,
    SPEC_FILE,
    ProblemError,
    ProblemSpec,
    folder_files,
)

HARNESS = "contextevolve.tasks.problem.harness"
MAX_DIAGNOSTICS = 1500
"""Characters of artifacts and non-numeric metrics kept as the child's diagnostics."""
IMPORT_MARGIN_S = 30.0
"""Seconds added to the evaluator's limit for the sandbox to start and import the program."""
PRINTED_CHARS = 1000
"""Characters kept of the end of what the evaluator (and the program) printed, the feedback of a child
whose evaluator returned no artifacts."""
TIME_METRIC = re.compile(r"(^|_)(time|seconds|secs|latency|duration|runtime|elapsed)$|_m?s$", re.IGNORECASE)
"""Metric names that measure a duration (``eval_time``, ``latency``, ``solve_seconds``, ``step_ms``): such
a metric improves downwards whatever the score's direction. OpenEvolve's examples return an ``eval_time``
beside the score; taken in the score's direction, the slowest program would count as best on it, on the
metrics' Pareto front that parents are drawn from and in the Navigator's per-metric steps."""
VALIDITY_METRICS = ("validity", "valid", "is_valid")
"""Metric names by which an OpenEvolve-style evaluator says a program broke the problem's rules: 0 makes
the child ``invalid``."""


class ProblemTask(Task):
    """A staged problem folder (:mod:`contextevolve.tasks.problem.source`) as a task.

    ``metrics`` lists the numeric metrics seen so far (the evaluator decides them), each taken to
    improve in the score's direction, except durations (:data:`TIME_METRIC`), which improve downwards.
    """

    higher_is_better = True
    worst_score = 0.0
    abstract_feedback = True
    outputs_identify_behaviour = False

    def __init__(self, folder: str | Path) -> None:
        self.folder = Path(folder)
        try:
            self.spec = ProblemSpec.model_validate_json((self.folder / SPEC_FILE).read_text())
        except (OSError, ValueError) as exc:
            raise ProblemError(f"{self.folder} holds no staged problem ({SPEC_FILE}: {exc})") from None
        self.name = PREFIX + str(self.folder)
        self.title = self.spec.title
        self.description = self.spec.description
        self.higher_is_better = not self.spec.minimize
        self.timeout_s = self.spec.timeout_s + IMPORT_MARGIN_S
        self._seen: dict[str, None] = {}

    @property
    def metrics(self) -> list[MetricSpec]:  # type: ignore[override]
        """The numeric metrics seen so far, in order: durations improve downwards, the rest as the score."""
        return [MetricSpec(name=n, higher_is_better=self.higher_is_better and not TIME_METRIC.search(n))
                for n in list(self._seen)]

    def observe(self, metrics: dict[str, float]) -> None:
        """Note a stored evaluation's metric names (a fresh process learns them from the run's programs)."""
        self._seen.update(dict.fromkeys(metrics))

    @property
    def initial_program(self) -> str:
        """Source of the staged ``initial_program.py``."""
        return (self.folder / PROGRAM_FILE).read_text(encoding="utf-8")

    def baselines(self) -> dict[str, str]:
        """Only the initial program: a user's problem ships no other baselines."""
        return {"initial": self.initial_program}

    @cached_property
    def _files(self) -> dict[str, bytes]:
        return {f"{STAGED}/{p.relative_to(self.folder).as_posix()}": p.read_bytes()
                for p in folder_files(self.folder) if p != self.folder / SPEC_FILE}

    def job(self) -> EvalJob:
        """One call: the user's evaluator (or its cascade) on the candidate's file, within ``spec.timeout_s``.

        Built once: callers that only read ``entry`` do not copy the folder's files again.
        """
        return self._job

    @cached_property
    def _job(self) -> EvalJob:
        return EvalJob(harness=HARNESS, entry="", files=self._files, calls=[Call(
            fn="evaluate", timeout_s=self.spec.timeout_s,
            args={"evaluator": self.spec.evaluator, "cascade": self.spec.cascade,
                  "thresholds": self.spec.thresholds})])

    def smoke_job(self) -> None:  # type: ignore[override]
        """None: the one call is the whole evaluation, so there is no cheaper smoke run."""
        return None

    def grade_run(self, run: CandidateRun) -> Evaluation:
        """Check the evaluator's reply and score it (see the module docstring); never raises."""
        if len(run.calls) != 1:
            return self.rejected("failed", f"{len(run.calls)} results for 1 evaluator call")
        call = run.calls[0]
        if call.status == "timeout":
            return self.rejected("timeout", f"the evaluator did not return within {self.spec.timeout_s:g} s")
        if call.status != "ok":
            return self.rejected("failed", f"the evaluator failed: {call.error}"[:500],
                                 diagnostics=call.error[:500])
        value = call.value
        if not isinstance(value, dict) or not isinstance(value.get("metrics"), dict) \
                or not isinstance(value.get("text"), dict):
            return self.rejected("failed", "malformed reply from the evaluator's sandbox")
        text = {str(k)[:100]: str(v)[:2000] for k, v in list(value["text"].items())[:64]}
        diagnostics = _diagnostics(text)
        metrics: dict[str, float] = {}
        for name, number in list(value["metrics"].items())[:64]:
            if (isinstance(number, str) or not isinstance(number, (int, float))
                    or not math.isfinite(number)):
                return self.rejected("failed",
                                     f"the evaluator returned a non-finite metric {name} ({number})",
                                     diagnostics=diagnostics)
            metrics[str(name)[:100]] = float(number)
        printed = printed_tail(run)
        if not diagnostics:  # no artifacts: what the evaluator printed is its feedback
            diagnostics = f"Evaluator output (its last lines):\n{printed}" if printed else ""
        if text.get("error", "").strip():
            return self.rejected("failed", f"the evaluator reported an error: {text['error'][:300]}",
                                 diagnostics=diagnostics)
        invalid = next((name for name in VALIDITY_METRICS if metrics.get(name) == 0.0), None)
        if invalid:
            last = printed.splitlines()[-1][:300] if printed else ""
            return self.rejected("invalid", f"the evaluator reports the program invalid ({invalid} = 0)"
                                 + (f": {last}" if last else ""), diagnostics=diagnostics)
        combined = metrics.get("combined_score")
        others = [v for k, v in metrics.items() if k != "combined_score"]
        if combined is None and not others:
            shown = ", ".join(sorted(text)[:5]) or "nothing"
            return self.rejected("failed", f"the evaluator returned no numeric metric (it returned {shown})",
                                 diagnostics=diagnostics)
        score = combined if combined is not None else sum(others) / len(others)
        self.observe(metrics)  # the numbers are shown as metrics; the diagnostics are the evaluator's text
        return Evaluation(status="ok", metrics=metrics, combined_score=score, diagnostics=diagnostics)


def printed_tail(run: CandidateRun) -> str:
    """The end of what the sandboxed evaluator and program printed (stdout, then stderr); ``""`` for nothing.

    At most :data:`PRINTED_CHARS` characters, from a line start. Untrusted text (the program shares the
    evaluator's process): it is shown to the agents as feedback, never parsed for a score.
    """
    out = "\n".join(part.strip() for part in (run.stdout_tail, run.stderr_tail) if part.strip())
    if len(out) > PRINTED_CHARS:
        out = out[-PRINTED_CHARS:]
        out = out.split("\n", 1)[1] if "\n" in out else out
    return out.strip()


def _diagnostics(text: dict[str, str]) -> str:
    """Artifacts and non-numeric metrics as ``name: value`` lines, cut to :data:`MAX_DIAGNOSTICS` chars."""
    out = "\n".join(f"{k}: {v.strip()}" for k, v in text.items() if v.strip())
    return out[:MAX_DIAGNOSTICS]


_LOADED: dict[tuple[str, int, int], ProblemTask] = {}
_LOCK = threading.Lock()


def problem_task(folder: str | Path) -> ProblemTask:
    """The :class:`ProblemTask` of a staged folder, one instance per folder and version.

    Versions of its ``problem.json`` are told apart by a ``stat`` (every node asks for the task): a folder
    staged again gets a fresh task, the same one keeps its metrics.

    Raises:
        ProblemError: the folder holds no staged problem.
    """
    folder = Path(folder)
    try:
        stat = (folder / SPEC_FILE).stat()
    except OSError as exc:
        raise ProblemError(f"{folder} holds no staged problem ({SPEC_FILE}: {exc})") from None
    with _LOCK:
        key = (str(folder), stat.st_mtime_ns, stat.st_ino)
        if key not in _LOADED:
            _LOADED[key] = ProblemTask(folder)
        return _LOADED[key]
