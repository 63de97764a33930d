"""GEPA 0.1.x as a peer in ``contextevolve compare``.

Its ``optimize_anything`` evolves the whole program text in the peer's process, ``max_candidate_proposals``
= the candidate budget, our diagnostics as its *side information*. Its settings: docs/compare.md, *Same
task, same evaluator*.
"""

from __future__ import annotations

import json
from pathlib import Path

from contextevolve.compare import ledger
from contextevolve.compare.peer_spec import PeerSpec, feedback, oriented, system_message
from contextevolve.tasks.registry import get_task


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
