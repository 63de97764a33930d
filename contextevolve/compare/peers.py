"""OpenEvolve and GEPA on a ContextEvolve task, each in its own process.

``python -m contextevolve.compare.peers SPEC.json`` runs the system a :class:`PeerSpec` names. It scores
candidates only through :func:`contextevolve.compare.ledger.evaluate` (diagnostics handed back as
OpenEvolve *artifacts* / GEPA *side information*), oriented so that higher is better (the ledger keeps the
task's units), and reaches the LLM through the comparison's counting proxy. OpenEvolve 0.4.x runs in the
main thread, its evaluator a generated file importing :func:`openevolve_evaluate`; GEPA 0.1.x's
``optimize_anything`` evolves the whole program text, ``max_candidate_proposals`` = the candidate budget.
Their settings: docs/compare.md, *Same task, same evaluator*.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path

from pydantic import BaseModel

from contextevolve.compare import ledger
from contextevolve.tasks.base import Evaluation, Task
from contextevolve.tasks.registry import get_task

SPEC_ENV = "CONTEXTEVOLVE_COMPARE_SPEC"
"""Environment variable naming the spec file, for OpenEvolve's evaluator in its worker processes."""


class PeerSpec(BaseModel):
    """What a peer system runs on; written as JSON by the comparison, read by this module."""

    system: str
    """``openevolve`` or ``gepa``."""
    task: str
    """Registered task name."""
    out_dir: str
    """The system's own output folder."""
    ledger: str
    """The trusted ledger of its evaluations (JSON lines)."""
    base_url: str
    """OpenAI base URL (the counting proxy's, for this system and seed)."""
    model: str
    """Model name sent with each request."""
    candidates: int
    """Candidate budget: OpenEvolve iterations, GEPA proposals."""
    seed: int = 0
    """Seed of the system's own randomness."""
    temperature: float = 0.8
    """Sampling temperature of every request."""
    max_tokens: int = 1400
    """Completion-token cap of every request."""
    timeout_s: float = 600.0
    """Limit for one LLM request, seconds."""
    workers: int = 1
    """OpenEvolve's worker processes (its ``evaluator.parallel_evaluations``: each runs whole iterations,
    the LLM request included)."""
    options: dict = {}
    """Entries merged into the system's own configuration (OpenEvolve's ``Config`` dict), e.g.
    ``{"diff_based_evolution": False}`` for the ``openevolve-full`` variant."""


FAILED_SCORE = -1e18
"""What the peers are told a program that is not ``ok`` scored: below any real score (a user's problem
stores failures at 0, which may beat valid negative or, when minimised, positive scores)."""


def oriented(task: Task, evaluation: Evaluation) -> float:
    """The evaluation's combined score with higher = better, as both peers maximise.

    A program that is not ``ok`` gets :data:`FAILED_SCORE`.
    """
    if evaluation.status != "ok":
        return FAILED_SCORE
    return evaluation.combined_score if task.higher_is_better else -evaluation.combined_score


def feedback(evaluation: Evaluation) -> dict[str, str]:
    """Our evaluator's diagnostics as text fields for an LLM (artifacts / side information)."""
    info = {"status": evaluation.status, "combined_score": f"{evaluation.combined_score:.6g}",
            "metrics": json.dumps({k: round(v, 6) for k, v in evaluation.metrics.items()})}
    for name in ("reason", "diagnostics", "traceback"):
        if getattr(evaluation, name):
            info[name] = getattr(evaluation, name)[:2000]
    return info


def _spec() -> PeerSpec:
    path = os.environ.get(SPEC_ENV)
    if not path:
        raise RuntimeError(f"{SPEC_ENV} is not set: this evaluator only runs inside a comparison")
    return PeerSpec.model_validate_json(Path(path).read_text())


def openevolve_evaluate(program_path: str):
    """OpenEvolve's evaluator contract: ``evaluate(program_path) -> EvaluationResult``."""
    from openevolve.evaluation_result import EvaluationResult

    spec = _spec()
    task = get_task(spec.task)
    try:
        source = Path(program_path).read_text(errors="replace")
    except OSError as exc:
        source = ""
        print(f"contextevolve compare: cannot read {program_path}: {exc}", file=sys.stderr)
    evaluation = ledger.evaluate(task, source, Path(spec.ledger))
    metrics = {"combined_score": oriented(task, evaluation)}
    metrics.update({f"metric_{k}": float(v) for k, v in evaluation.metrics.items()})
    return EvaluationResult(metrics=metrics, artifacts=feedback(evaluation))


def system_message(task: Task) -> str:
    """The task description both peers get (OpenEvolve's system message, GEPA's background)."""
    goal = "higher" if task.higher_is_better else "lower"
    return (f"You are an expert in systems algorithms improving a program.\n\n## Task\n{task.description}\n\n"
            f"The program's combined score should be {goal}. Keep the entry function's name and signature.")


def run_openevolve(spec: PeerSpec) -> None:
    """Run OpenEvolve for ``spec.candidates`` iterations; call it in a main thread.

    Its process-parallel controller needs a main thread. Cascade evaluation is off (our evaluator is one
    stage); OpenEvolve's other defaults (diffs, islands, MAP-Elites) are kept.
    """
    from openevolve.config import Config
    from openevolve.controller import EvolutionFailedError, OpenEvolve

    task, out = get_task(spec.task), Path(spec.out_dir)
    out.mkdir(parents=True, exist_ok=True)
    program = out / "initial_program.py"
    program.write_text(task.initial_program)
    evaluator = out / "evaluator.py"
    evaluator.write_text("from contextevolve.compare.peers import openevolve_evaluate as evaluate"
                         "  # noqa: F401\n")
    config = Config.from_dict({
        **spec.options,
        "max_iterations": spec.candidates, "random_seed": spec.seed,
        "checkpoint_interval": max(spec.candidates, 1),
        "log_level": "WARNING", "log_dir": str(out / "logs"), "language": "python",
        "llm": {"api_base": spec.base_url, "api_key": "none", "temperature": spec.temperature,
                "max_tokens": spec.max_tokens, "timeout": int(spec.timeout_s), "retries": 2, "retry_delay": 1,
                "random_seed": spec.seed, "models": [{"name": spec.model, "weight": 1.0}]},
        "prompt": {"system_message": system_message(task)},
        "database": {"random_seed": spec.seed, "in_memory": True},
        "evaluator": {"timeout": int(task.timeout_s * 2 + 30), "cascade_evaluation": False,
                      "parallel_evaluations": spec.workers, "max_retries": 0},
    })
    controller = OpenEvolve(initial_program_path=str(program), evaluation_file=str(evaluator), config=config,
                            output_dir=str(out))
    try:
        asyncio.run(controller.run(iterations=spec.candidates))
    except EvolutionFailedError as exc:  # no iteration made a program: a result (0 candidates), not a crash
        print(f"contextevolve compare: OpenEvolve made no candidate: {exc}", file=sys.stderr)


def run_gepa(spec: PeerSpec) -> None:
    """Run GEPA's ``optimize_anything`` for ``spec.candidates`` proposals.

    Single-task mode, the reflection LM a plain callable on the OpenAI client (no litellm), evaluation
    cache on.
    """
    from gepa.optimize_anything import EngineConfig, GEPAConfig, ReflectionConfig, optimize_anything
    from openai import OpenAI

    task, out = get_task(spec.task), Path(spec.out_dir)
    out.mkdir(parents=True, exist_ok=True)
    client = OpenAI(base_url=spec.base_url, api_key="none", timeout=spec.timeout_s, max_retries=2)

    def reflection_lm(prompt) -> str:
        messages = prompt if isinstance(prompt, list) else [{"role": "user", "content": str(prompt)}]
        reply = client.chat.completions.create(model=spec.model, messages=messages,
                                               temperature=spec.temperature, max_tokens=spec.max_tokens,
                                               seed=spec.seed)
        return (reply.choices[0].message.content or "") if reply.choices else ""

    def evaluator(candidate) -> tuple[float, dict]:
        source = candidate if isinstance(candidate, str) else json.dumps(candidate)
        evaluation = ledger.evaluate(task, source, Path(spec.ledger))
        return oriented(task, evaluation), feedback(evaluation)

    config = GEPAConfig(
        engine=EngineConfig(run_dir=str(out / "gepa"), seed=spec.seed,
                            max_candidate_proposals=spec.candidates, parallel=False, max_workers=1,
                            raise_on_exception=False, cache_evaluation=True),
        reflection=ReflectionConfig(reflection_lm=reflection_lm))
    result = optimize_anything(seed_candidate=task.initial_program, evaluator=evaluator,
                               objective=f"Improve the program's combined score ({task.title}).",
                               background=system_message(task), config=config)
    best = result.best_candidate
    (out / "best_program.py").write_text(best if isinstance(best, str) else json.dumps(best))


def main(argv: list[str] | None = None) -> int:
    """``python -m contextevolve.compare.peers SPEC.json``: run the peer the spec names."""
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 1:
        print("usage: python -m contextevolve.compare.peers SPEC.json", file=sys.stderr)
        return 2
    spec_path = Path(argv[0]).resolve()
    spec = PeerSpec.model_validate_json(spec_path.read_text())
    os.environ[SPEC_ENV] = str(spec_path)
    runners = {"openevolve": run_openevolve, "gepa": run_gepa}
    if spec.system not in runners:
        print(f"unknown peer system {spec.system!r}: one of {', '.join(runners)}", file=sys.stderr)
        return 2
    runners[spec.system](spec)
    return 0


if __name__ == "__main__":
    sys.exit(main())
