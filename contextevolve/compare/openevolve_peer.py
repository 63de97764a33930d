"""OpenEvolve 0.4.x as a peer in ``contextevolve compare``.

It runs in the peer process's main thread (its process-parallel controller needs one); its evaluator is a
generated file importing :func:`openevolve_evaluate`, which scores through our ledger and hands our
diagnostics back as OpenEvolve *artifacts*. Its settings: docs/compare.md, *Same task, same evaluator*.
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

from contextevolve.compare.peer_spec import (
    PeerSpec,
    feedback,
    peer_metrics,
    score_file,
    spec_from_env,
    system_message,
)
from contextevolve.tasks.registry import get_task


def openevolve_evaluate(program_path: str):
    """OpenEvolve's evaluator contract: ``evaluate(program_path) -> EvaluationResult``."""
    from openevolve.evaluation_result import EvaluationResult

    task, evaluation = score_file(spec_from_env(), program_path)
    return EvaluationResult(metrics=peer_metrics(task, evaluation), artifacts=feedback(evaluation))


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
    evaluator.write_text("from contextevolve.compare.openevolve_peer import openevolve_evaluate as evaluate"
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
