"""ShinkaEvolve 0.0.7 on one ContextEvolve task, run with ShinkaEvolve's own virtual environment.

Usage (the comparison starts it; :func:`contextevolve.compare.shinka_peer.prepare` gives the command)::

    .venv-shinka/bin/python contextevolve/compare/shinka_driver.py SPEC.json

It imports only ShinkaEvolve (and its NumPy) and the standard library: ContextEvolve's packages are not
installed in that environment. ``SPEC.json`` is a :class:`contextevolve.compare.peer_spec.PeerSpec`; its
``out_dir`` holds what ``prepare`` wrote: ``initial_program.py``, ``task_description.txt``, ``evaluate.py``
(run by ShinkaEvolve's local job runner with the main environment's python for every program) and
``shinka_setup.json`` (that python, the evaluation time limit). ShinkaEvolve's defaults are kept except
where :func:`configs` says why; ``spec.options`` entries override fields of its ``EvolutionConfig``,
``DatabaseConfig``, ``LocalJobConfig`` or the runner's concurrency arguments. Protocol: docs/compare.md.
"""

from __future__ import annotations

import dataclasses
import json
import os
import random
import sys
from pathlib import Path

SETUP_FILE = "shinka_setup.json"
"""Written by ``prepare`` into ``out_dir``: ``evaluator_python`` and ``eval_timeout_s``."""
RUNNER_OPTIONS = ("max_evaluation_jobs", "max_proposal_jobs", "max_db_workers", "verbose")
"""``spec.options`` keys passed to ``ShinkaEvolveRunner`` itself (its defaults otherwise)."""


def _hms(seconds: float) -> str:
    seconds = max(int(seconds), 1)
    return f"{seconds // 3600:02d}:{seconds // 60 % 60:02d}:{seconds % 60:02d}"


def configs(spec: dict, out: Path) -> tuple:
    """ShinkaEvolve's configuration objects for ``spec``: ``(evolution, database, job, runner kwargs)``.

    Its class defaults (those of its Python API) are kept except: the task's description as
    ``task_sys_msg``; the comparison's model behind ``base_url`` as the only LLM (``local/<model>@<url>``),
    with the spec's temperature and token cap; ``num_generations`` = candidates + 1 (generation 0 is the
    initial program); no embedding model (there is no embedding endpoint offline; its novelty judge is off
    by default anyway); text feedback on (our evaluator's diagnostics reach the LLM, as for the other
    peers); the bandit seeded; results under ``out_dir``; evaluations run by our python with our time
    limit (ShinkaEvolve's own adaptive limit could kill our evaluator while it writes the ledger).

    Raises:
        ValueError: an option that is no field of any of them.
    """
    from shinka.core import EvolutionConfig
    from shinka.database import DatabaseConfig
    from shinka.defaults import default_llm_dynamic_selection_kwargs
    from shinka.launch import LocalJobConfig

    setup = json.loads((out / SETUP_FILE).read_text())
    evolution = {
        "task_sys_msg": (out / "task_description.txt").read_text(),
        "num_generations": spec["candidates"] + 1,
        "llm_models": [f"local/{spec['model']}@{spec['base_url']}"],
        "llm_kwargs": {"temperatures": [spec["temperature"]], "max_tokens": spec["max_tokens"]},
        "llm_dynamic_selection_kwargs": {**default_llm_dynamic_selection_kwargs(), "seed": spec["seed"]},
        "embedding_model": None,
        "use_text_feedback": True,
        "init_program_path": str(out / "initial_program.py"),
        "results_dir": str(out / "results"),
    }
    database: dict = {}
    job = {"eval_program_path": str(out / "evaluate.py"), "python_executable": setup["evaluator_python"],
           "time": _hms(setup["eval_timeout_s"])}
    runner: dict = {}
    targets = ((evolution, EvolutionConfig), (database, DatabaseConfig), (job, LocalJobConfig))
    for key, value in (spec.get("options") or {}).items():
        if key in RUNNER_OPTIONS:
            runner[key] = value
            continue
        target = next((d for d, cls in targets if key in {f.name for f in dataclasses.fields(cls)}), None)
        if target is None:
            raise ValueError(f"unknown ShinkaEvolve option {key!r}")
        target[key] = value
    return EvolutionConfig(**evolution), DatabaseConfig(**database), LocalJobConfig(**job), runner


def run(spec: dict, evolution, database, job, runner: dict) -> None:
    """Run ShinkaEvolve's ``ShinkaEvolveRunner`` on the :func:`configs` of ``spec``."""
    import numpy as np
    import shinka.llm.client as llm_client
    from shinka.core import ShinkaEvolveRunner

    random.seed(spec["seed"])
    np.random.seed(spec["seed"])
    llm_client.TIMEOUT = spec["timeout_s"]  # its clients' request timeout (20 min by default)
    os.environ.setdefault("LOCAL_OPENAI_API_KEY", "none")
    ShinkaEvolveRunner(evo_config=evolution, job_config=job, db_config=database, **runner).run()


def main(argv: list[str] | None = None) -> int:
    """``shinka_driver.py SPEC.json``: run ShinkaEvolve on the spec."""
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 1:
        print("usage: .venv-shinka/bin/python shinka_driver.py SPEC.json", file=sys.stderr)
        return 2
    spec = json.loads(Path(argv[0]).read_text())
    try:
        settings = configs(spec, Path(spec["out_dir"]).resolve())
    except ValueError as exc:
        print(f"contextevolve compare: {exc}", file=sys.stderr)
        return 2
    run(spec, *settings)
    return 0


if __name__ == "__main__":
    sys.exit(main())
