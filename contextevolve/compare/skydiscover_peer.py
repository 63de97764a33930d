"""SkyDiscover's own searches, AdaEvolve and EvoX, as peers in ``contextevolve compare``.

:func:`run_skydiscover` runs ``skydiscover.api.run_discovery`` (SkyDiscover 0.1.0) in the peer's process
with SkyDiscover's defaults: ``Config()`` and the search's own database config (``AdaEvolveDatabaseConfig()``
or ``EvoxDatabaseConfig()``). What it changes, and why:

- LLM: ``api_base`` the counting proxy, the model ``spec.model`` (their guide model too), no API key;
  ``temperature``, ``max_tokens`` (their 32000 exceeds a small local model's context) and ``timeout`` the
  spec's, as for every system; ``random_seed`` the spec's seed; iterations ``spec.candidates``.
- Prompt: the system message is the task description all peers get (theirs is a generic placeholder).
- Evaluator: the generated ``evaluator.py`` calls :func:`skydiscover_evaluate`, which scores through
  :func:`contextevolve.compare.ledger.evaluate` only; its docstring says what is scored, as AdaEvolve's
  paradigm prompt and EvoX's label prompt show the evaluator's source. SkyDiscover calls it in the
  peer's process, in a thread of asyncio's default executor. ``max_retries`` 0 (a retry after an
  exception would enter the same candidate in the ledger again), ``cascade_evaluation`` off (one stage;
  theirs falls back to it with a warning), the time limit OpenEvolve gets.
- EvoX's search-strategy side: the 0.1.0 wheel (and its sdist) lacks its ``search/evox/config`` files,
  so this writes that side's config (the authors' ``search.yaml`` settings in 0.1.0's names, on the
  proxy) into ``out_dir``, and gives EvoX's context builder :data:`EVOX_SEARCH_PROMPT`, our own statement of
  the strategy contract 0.1.0 checks, where it would read the missing system prompt (the installed package
  is not written to). Strategy programs are checked by SkyDiscover's own validator, never our evaluator:
  they are not candidates of the task.

``spec.options`` set fields of SkyDiscover's ``Config`` (``diff_based_generation=False``: whole programs
instead of SEARCH/REPLACE diffs, SkyDiscover's own full-rewrite mode, for the ``-full`` variants).

The monitor, human feedback, agentic mode and LLM feedback stay off (their defaults); logs and checkpoints
go under ``out_dir``. On SIGTERM SkyDiscover finishes the iteration under way and returns.
"""

from __future__ import annotations

from pathlib import Path

from contextevolve.compare.peer_spec import (
    PeerSpec,
    feedback_text,
    peer_metrics,
    score_file,
    spec_from_env,
    system_message,
)
from contextevolve.tasks.base import Task
from contextevolve.tasks.registry import get_task

SEARCHES = ("adaevolve", "evox")
"""SkyDiscover's own search methods this module runs."""

EVOX_SEARCH_PROMPT_NAME = "evox_search_sys_prompt.txt"
"""The file EvoX 0.1.0 reads its strategy-writing system prompt from (absent from the wheel)."""
EVOX_SEARCH_PROMPT = Path(__file__).with_name("evox_strategy_prompt.txt")
"""Our statement of what an EvoX search strategy must be (its class, methods, labels, rules and the score
EvoX gives it), read in place of the missing file."""

_EVALUATOR = '''"""SkyDiscover's evaluator: ContextEvolve's sandboxed evaluator of the task {title!r}.

combined_score: the task's combined score{orientation}; a program that fails scores -1e18, with
validity 0 and the reason as error. Diagnostics come back as the artifact "feedback".
The task's metrics, as metric_<name>:
{metrics}
"""
from contextevolve.compare.skydiscover_peer import skydiscover_evaluate as evaluate  # noqa: F401
'''


def skydiscover_evaluate(program_path: str):
    """SkyDiscover's evaluator contract: ``evaluate(program_path) -> EvaluationResult``."""
    from skydiscover.evaluation.evaluation_result import EvaluationResult

    task, evaluation = score_file(spec_from_env(), program_path)
    metrics = peer_metrics(task, evaluation)
    if evaluation.status != "ok":  # SkyDiscover's marks of a failed program (EvoX retries it)
        metrics.update({"validity": 0, "error": evaluation.reason or evaluation.status})
    return EvaluationResult(metrics=metrics, artifacts={"feedback": feedback_text(evaluation)})


def _evaluator_source(task: Task) -> str:
    metrics = "\n".join(f"- {m.name} ({'higher' if m.higher_is_better else 'lower'} is better): "
                        f"{m.description}" for m in task.metrics)
    orientation = "" if task.higher_is_better else ", negated (lower is better for the task)"
    return _EVALUATOR.format(title=task.title, orientation=orientation, metrics=metrics)


def _evox_search_config(spec: PeerSpec, out: Path) -> Path:
    """Write the config of EvoX's search-strategy side into ``out/evox``; returns its path.

    The settings are those of the authors' ``search/evox/config/search.yaml`` (type, two inspirations,
    whole programs, evaluator limits, a guide model capped at 8000 tokens), with 0.1.0's names and
    the proxy, model, sampling and seed of the spec.
    """
    import yaml

    folder = out / "evox"  # laid out as their search/evox/config
    folder.mkdir(parents=True, exist_ok=True)
    (folder / EVOX_SEARCH_PROMPT_NAME).write_text(EVOX_SEARCH_PROMPT.read_text())
    endpoint = {"name": spec.model, "api_base": spec.base_url, "api_key": "none"}
    settings = {
        "max_iterations": 100, "checkpoint_interval": 1, "log_level": "INFO", "random_seed": spec.seed,
        "llm": {"api_base": spec.base_url, "api_key": "none", "temperature": spec.temperature,
                "max_tokens": spec.max_tokens, "timeout": int(spec.timeout_s), "models": [endpoint],
                "guide_models": [{**endpoint, "max_tokens": min(8000, spec.max_tokens),
                                  "timeout": int(min(300, spec.timeout_s))}]},
        "search": {"type": "evolve_search_strategy", "num_inspirations": 2},
        "prompt": {"template": "evox", "system_message": EVOX_SEARCH_PROMPT_NAME},  # a file beside it
        "evaluator": {"timeout": 3600, "max_retries": 3, "cascade_evaluation": False},
        "diff_based_generation": False, "max_solution_length": 60000,
    }
    path = folder / "search.yaml"
    path.write_text(yaml.safe_dump(settings, sort_keys=False))
    return path


def _read_evox_prompt_from(folder: Path) -> None:
    """Make EvoX's context builder open ``folder``'s copy of its missing strategy prompt.

    It opens a fixed path inside the installed package; only that path is redirected, in this process.
    """
    import builtins

    from skydiscover.prompt.evox import prompt as evox_prompt

    def redirected(file, *args, **kwargs):
        if Path(str(file)).name == EVOX_SEARCH_PROMPT_NAME and not Path(str(file)).exists():
            file = folder / EVOX_SEARCH_PROMPT_NAME
        return builtins.open(file, *args, **kwargs)

    evox_prompt.open = redirected  # the module's own name for open, looked up before the builtin


def run_skydiscover(spec: PeerSpec, search: str) -> None:
    """Run SkyDiscover's ``search`` (``adaevolve`` or ``evox``) for ``spec.candidates`` iterations.

    An AdaEvolve iteration evaluates at most one program. EvoX counts each attempt as an iteration (its
    manager retries a failed or unparsable program up to twice), so its last iteration can evaluate two
    programs past ``spec.candidates``. Writes ``best_program.py`` into ``spec.out_dir``.

    Raises:
        ValueError: ``search`` is not one of :data:`SEARCHES`.
    """
    from skydiscover.api import run_discovery
    from skydiscover.config import AdaEvolveDatabaseConfig, Config, EvoxDatabaseConfig, SearchConfig

    if search not in SEARCHES:
        raise ValueError(f"unknown SkyDiscover search {search!r}: one of {', '.join(SEARCHES)}")
    task, out = get_task(spec.task), Path(spec.out_dir)
    out.mkdir(parents=True, exist_ok=True)
    program = out / "initial_program.py"
    program.write_text(task.initial_program)
    evaluator = out / "evaluator.py"
    evaluator.write_text(_evaluator_source(task))
    config = Config(random_seed=spec.seed)
    config.llm.api_key = "none"
    config.llm.temperature, config.llm.max_tokens = spec.temperature, spec.max_tokens
    config.llm.timeout = int(spec.timeout_s)
    config.evaluator.timeout = int(task.timeout_s * 2 + 30)
    config.evaluator.max_retries, config.evaluator.cascade_evaluation = 0, False
    for name, value in spec.options.items():  # a variant's settings (``diff_based_generation``)
        if not hasattr(config, name):
            raise ValueError(f"SkyDiscover's Config has no setting {name!r}")
        setattr(config, name, value)
    database = (AdaEvolveDatabaseConfig() if search == "adaevolve"
                else EvoxDatabaseConfig(config_path=str(_evox_search_config(spec, out))))
    if search == "evox":
        _read_evox_prompt_from(out / "evox")
    config.search = SearchConfig(type=search, database=database)
    result = run_discovery(str(program), str(evaluator), config=config, iterations=spec.candidates,
                           output_dir=str(out), cleanup=False, model=spec.model, search=search,
                           system_prompt=system_message(task), api_base=spec.base_url)
    (out / "best_program.py").write_text(result.best_solution or task.initial_program)


def run_adaevolve(spec: PeerSpec) -> None:
    """Run SkyDiscover's AdaEvolve on ``spec`` (:func:`run_skydiscover`)."""
    run_skydiscover(spec, "adaevolve")


def run_evox(spec: PeerSpec) -> None:
    """Run SkyDiscover's EvoX on ``spec`` (:func:`run_skydiscover`)."""
    run_skydiscover(spec, "evox")
