"""Run settings: unknown names refused everywhere, --resume takes all from run.json, no API key on disk."""

from __future__ import annotations

import json
import re

import pytest

from contextevolve.api import RunDirError, evolve, prepare_context, run_status
from contextevolve.cli import main
from contextevolve.graph.builder import build_graph
from contextevolve.graph.context import RunContext, UnknownSettingError
from contextevolve.llm.models import use_chat_models
from tests.fakes import reply, scripted

API_KEY = "sk-test-NEVER-ON-DISK-0815"


def test_run_context_refuses_unknown_fields_naming_the_nearest():
    with pytest.raises(UnknownSettingError, match="unknown run setting 'bogus'"):
        RunContext(**{"bogus": 1})
    with pytest.raises(TypeError):  # still the TypeError of an unexpected keyword, too
        RunContext(bogus=1)
    with pytest.raises(ValueError, match=r"'max_retry' \(did you mean 'max_retries'\?\)"):
        RunContext(max_retry=1)


def test_settings_are_grouped_and_flat_names_reach_their_group():
    from dataclasses import replace

    from contextevolve.graph.context import SearchSettings

    flat = RunContext(workers=2, stale_after=0, eval_memory_mb=512, base_url="http://h/v1",
                      summarizer_enabled=False)
    grouped = RunContext(parallelism={"workers": 2}, search=SearchSettings(stale_after=0),
                         sandbox={"memory_mb": 512}, llm={"base_url": "http://h/v1"},
                         ablations={"summarizer_enabled": False})
    assert flat == grouped
    assert ((flat.parallelism.workers, flat.search.stale_after, flat.sandbox.memory_mb, flat.llm.base_url)
            == (2, 0, 512, "http://h/v1") and flat.ablations.summarizer_enabled is False)
    # concurrent LLM requests and evaluations default to one per worker
    assert (flat.parallelism.llm_concurrency, flat.parallelism.eval_workers) == (None, None)
    assert (flat.llm_slots, flat.eval_slots) == (2, 2)
    assert (replace(flat, llm_concurrency=1, eval_workers=3).llm_slots,
            replace(flat, llm_concurrency=1, eval_workers=3).eval_slots) == (1, 3)
    # a flat name overrides that field of a group given alongside; the group's other fields stay
    both = RunContext(search=SearchSettings(stale_after=0, num_exemplars=1), stale_after=3)
    assert (both.search.stale_after, both.search.num_exemplars) == (3, 1)
    moved = replace(flat, workers=3, seed=7)
    assert (moved.parallelism.workers, moved.search.stale_after, moved.seed) == (3, 0, 7)
    assert flat.parallelism.workers == 2  # replace copies, the original keeps its groups
    # the setting of rounds of lanes is gone, and its name points to what replaced it
    with pytest.raises(UnknownSettingError, match="the setting 'lanes' was replaced by 'workers'"):
        RunContext(lanes=2)
    with pytest.raises(ValueError, match="workers, eval_workers and llm_concurrency must be >= 1"):
        RunContext(workers=0)
    for group in ({"llm_concurrency": -1}, {"eval_workers": -1}):
        with pytest.raises(ValueError, match="workers, eval_workers and llm_concurrency must be >= 1"):
            RunContext(parallelism=group)
    with pytest.raises(UnknownSettingError,
                       match=r"unknown search setting 'stale_afte' \(did you mean 'stale_after'\?\)"):
        RunContext(search={"stale_afte": 1})
    with pytest.raises(ValueError, match="invalid run settings: sandbox: .*memory_mb"):
        RunContext(eval_memory_mb=1)
    with pytest.raises(ValueError, match="unguided_hotter must be >= 0"):
        RunContext(unguided_hotter=-0.5)


def test_run_json_is_grouped_and_an_older_flat_one_still_loads():
    from dataclasses import replace

    from contextevolve.graph.context import flat_settings

    ctx = RunContext(task="eplb", workers=2, stale_after=1, eval_timeout_s=9.0, api_key=API_KEY,
                     max_iterations=4)
    saved = ctx.to_json()
    assert saved["parallelism"]["workers"] == 2 and saved["search"]["stale_after"] == 1
    assert saved["sandbox"]["timeout_s"] == 9.0 and "api_key" not in saved["llm"] and "workers" not in saved
    assert RunContext.from_json(json.loads(json.dumps(saved))) == replace(ctx, api_key=None)
    older = {"task": "eplb", "workers": 2, "stale_after": 1, "eval_timeout_s": 9.0, "max_iterations": 4}
    assert RunContext.from_json(older) == RunContext.from_json(saved)
    assert RunContext.from_json(saved, workers=3).parallelism.workers == 3  # an override by flat name wins
    assert flat_settings(saved)["workers"] == 2 and flat_settings(older)["eval_timeout_s"] == 9.0
    assert "stale_rest" not in flat_settings(older)  # absent stays absent
    # a run.json from before workers (L lanes per round, flat or grouped) loads as L workers
    lanes = {k: v for k, v in older.items() if k != "workers"} | {"lanes": 2}
    assert RunContext.from_json(lanes) == RunContext.from_json(saved)
    grouped = {**saved, "parallelism": {"lanes": 2, "eval_workers": 1, "executor": "local",
                                        "ray_address": None}}
    assert RunContext.from_json(grouped).parallelism == replace(ctx.parallelism, eval_workers=1)


def test_context_schema_describes_every_setting_for_studio():
    schema = build_graph().get_context_jsonschema()
    groups = {"llm", "search", "parallelism", "ablations", "sandbox"}
    assert groups <= set(schema["properties"])
    assert all(prop.get("description") for prop in schema["properties"].values())
    defs = schema["$defs"]
    described = {name: all(p.get("description") for p in d["properties"].values()) for name, d in defs.items()
                 if name in ("ModelSettings", "SearchSettings", "Parallelism", "Ablations", "SandboxLimits")}
    assert described == dict.fromkeys(("ModelSettings", "SearchSettings", "Parallelism", "Ablations",
                                       "SandboxLimits"), True)


def test_run_json_with_an_unknown_key_is_a_clear_error(tmp_path):
    data = RunContext().to_json() | {"max_iteration": 3}
    with pytest.raises(ValueError, match=r"'max_iteration' \(did you mean 'max_iterations'\?\)"):
        RunContext.from_json(data)
    (tmp_path / "run.json").write_text(json.dumps(data))
    with pytest.raises(RunDirError, match=r"run\.json: unknown run setting 'max_iteration'"):
        prepare_context(tmp_path, resume=True)


def test_a_run_json_with_a_deleted_setting_loads_at_its_old_default_and_is_refused_at_another(tmp_path):
    """Settings tried and not adopted were deleted; an older run.json still names them (to_json wrote all)."""
    from contextevolve.graph.context import REMOVED_SETTINGS

    saved = RunContext().to_json()
    older = {**saved, "search": {**saved["search"], **{n: d for n, (d, _) in REMOVED_SETTINGS.items()}}}
    assert RunContext.from_json(older) == RunContext.from_json(saved)
    assert RunContext.from_json({**saved, "step_changes": 0}) == RunContext.from_json(saved)  # flat, older
    other = {**saved, "search": {**saved["search"], "exemplar_view": "changes"}}
    with pytest.raises(UnknownSettingError, match=r"'exemplar_view' \(deleted, not adopted: "
                                                  r"docs/decisions/copy-warning\.md"):
        RunContext.from_json(other)
    (tmp_path / "run.json").write_text(json.dumps(other))
    with pytest.raises(UnknownSettingError, match=r"unknown search setting 'exemplar_view' \(deleted"):
        prepare_context(tmp_path, resume=True)
    model_repairs = {**saved, "search": {**saved["search"], "repair_attempts": 1}}
    with pytest.raises(UnknownSettingError, match=r"'repair_attempts' \(deleted, not adopted: "
                                                  r"docs/decisions/repair-restart\.md"):
        RunContext.from_json(model_repairs)
    with pytest.raises(UnknownSettingError, match="'step_changes' \\(deleted, not adopted"):
        RunContext(step_changes=0)  # not a setting to give a new run


def test_langgraph_run_context_with_an_unknown_field_is_refused():
    # what `langgraph dev` does with a run's context dict: the graph coerces it into RunContext
    with pytest.raises(UnknownSettingError, match="'sed' \\(did you mean 'seed'\\?\\)"):
        build_graph().invoke({}, context={"task": "model_placement", "sed": 3})


def test_evolve_refuses_unknown_settings_before_writing(tmp_path):
    with pytest.raises(ValueError, match="unknown run setting 'bogus'"):
        evolve("model_placement", iterations=1, run_dir=tmp_path / "r", bogus=1)
    with pytest.raises(ValueError, match=r"did you mean 'max_retries'"):
        evolve("model_placement", iterations=1, run_dir=tmp_path / "r", max_retrys=0)
    assert not (tmp_path / "r").exists()


def test_cli_refuses_unknown_options_naming_the_nearest(tmp_path, capsys):
    assert main(["run", "--run-dir", str(tmp_path / "r"), "--seeds", "3"]) == 2
    err = capsys.readouterr().err
    assert "unknown option --seeds (did you mean --seed?)" in err and "Traceback" not in err
    assert main(["status", str(tmp_path), "--jsn"]) == 2
    assert "did you mean --json?" in capsys.readouterr().err
    assert not (tmp_path / "r").exists()


def test_resume_takes_task_and_settings_from_run_json(tmp_path):
    root = tmp_path / "r"
    root.mkdir()
    (root / "run.json").write_text(json.dumps(RunContext(task="txn_scheduling", max_iterations=7, seed=5,
                                                         run_dir=str(root)).to_json()))
    ctx = prepare_context(root, resume=True, task=None, max_iterations=None)
    assert (ctx.task, ctx.max_iterations, ctx.seed) == ("txn_scheduling", 7, 5)
    assert prepare_context(root, resume=True, max_iterations=9, seed=None).max_iterations == 9
    assert prepare_context(root, resume=True, task="txn_scheduling").task == "txn_scheduling"
    with pytest.raises(RunDirError,
                       match="holds a 'txn_scheduling' run; cannot resume it as 'model_placement'"):
        prepare_context(root, resume=True, task="model_placement")
    # a new run without a task keeps the default
    assert prepare_context(tmp_path / "new", resume=False, task=None).task == "model_placement"
    # a run from before workers resumes with as many workers as it had lanes
    saved = json.loads((root / "run.json").read_text())
    saved["parallelism"] = {"lanes": 3, "eval_workers": 1, "executor": "local", "ray_address": None}
    (root / "run.json").write_text(json.dumps(saved))
    assert prepare_context(root, resume=True).parallelism.workers == 3


def test_cli_resume_of_another_task_without_task_flag(tmp_path, models, capsys):
    root = tmp_path / "r"
    with use_chat_models(generator=scripted(reply("I cannot help with that."))):  # no program: no evaluation
        assert main(["run", "--task", "txn_scheduling", "--iterations", "0", "--run-dir", str(root)]) == 0
        assert main(["run", "--run-dir", str(root), "--resume", "--task", "model_placement"]) == 2
        assert "cannot resume it as 'model_placement'" in capsys.readouterr().err
        assert main(["run", "--run-dir", str(root), "--resume", "--iterations", "1"]) == 0
    status = run_status(root)
    assert status["task"] == "txn_scheduling" and status["iterations"] == 1 and status["programs"] == 2
    assert json.loads((root / "run.json").read_text())["max_iterations"] == 1


def test_api_key_never_reaches_run_json_or_checkpoints(tmp_path, models):
    root = tmp_path / "r"
    ctx = RunContext(api_key=API_KEY)
    assert API_KEY not in repr(ctx) and "api_key" not in ctx.to_json()
    result = evolve("model_placement", iterations=2, run_dir=root, max_retries=0, api_key=API_KEY)
    assert result.iterations == 2
    assert (root / "checkpoints.sqlite").stat().st_size > 0
    assert "api_key" not in json.loads((root / "run.json").read_text())
    leaked = [p for p in root.rglob("*") if p.is_file() and API_KEY.encode() in p.read_bytes()]
    assert leaked == []


def test_a_setting_of_another_type_is_named_when_the_run_is_configured(tmp_path):
    """A flat keyword or a group dict of the wrong type fails at RunContext, not in the node that reads it."""
    assert RunContext(stale_after="3", temperatures={"generator": 1}).search.stale_after == 3
    cases = {"stale_after": ("x", "stale_after: input should be a valid integer", "x"),
             "workers": (1.5, "workers: input should be a valid integer", 1.5),
             "temperatures": ({"generator": "hot"}, "temperatures.generator: input should be",
                              "hot"),
             "prices": ({"m": {"input": "a", "output": 1}}, "the price of 'm' must be {'input': X, 'output'",
                        {"input": "a", "output": 1}),
             "mutations": ("swap two items", "mutations: input should be a valid tuple", "swap two items")}
    for name, (value, message, bad) in cases.items():
        pattern = f"invalid run settings: {re.escape(message)}.*not {re.escape(repr(bad))}"
        with pytest.raises(ValueError, match=pattern):
            RunContext(**{name: value})
    typed = RunContext(token_budget="40000", run_dir=tmp_path / "r", target_score=1)
    assert (typed.token_budget, typed.run_dir, typed.target_score) == (40_000, str(tmp_path / "r"), 1.0)
    for name, value in (("max_iterations", "ten"), ("seed", 1.5), ("log_prompts", "maybe")):
        with pytest.raises(ValueError, match=f"invalid run settings: {name}: input should be a valid"):
            RunContext(**{name: value})
    with pytest.raises(ValueError, match="invalid run settings: num_exemplars: input should be a valid int"):
        RunContext(search={"num_exemplars": "many"})
    with pytest.raises(ValueError, match="stale_rest: input should be a valid integer"):
        evolve("model_placement", iterations=1, run_dir="/nonexistent/never-written", stale_rest="four")


def test_a_choice_setting_given_as_a_flat_keyword_is_checked():
    """A Literal setting's value is one of its choices, named in the message, however it is given."""
    for name, value, choices in (("parent_selection", "x", "pareto, tournament"),
                                 ("edit_form", "patch", "full, diff"), ("executor", "k8s", "local, ray"),
                                 ("summary_variant", "x", "inherited")):
        with pytest.raises(ValueError, match=f"{name} must be one of {choices}.*not '{value}'"):
            RunContext(**{name: value})
    assert RunContext(parent_selection="best", edit_form="functions").search.parent_selection == "best"
