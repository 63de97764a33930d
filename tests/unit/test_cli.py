"""The command line: tasks, evaluate, status, run errors — as a user calls it."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from contextevolve.api import evolve
from contextevolve.cli import main

ROOT = Path(__file__).resolve().parents[2]
INITIAL = ROOT / "contextevolve" / "tasks" / "model_placement" / "initial_program.py"


def cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "contextevolve.cli", *args], cwd=ROOT, capture_output=True,
                          text=True, timeout=120)


def test_tasks_lists_all_five_adrs_tasks():
    out = cli("tasks")
    assert out.returncode == 0
    lines = {line.split("\t")[0]: line for line in out.stdout.splitlines() if "\t" in line}
    assert set(lines) == {"model_placement", "txn_scheduling", "llm_sql", "eplb", "sparse_attention"}
    assert lines["model_placement"].startswith("model_placement\tModel Placement")
    assert "density (lower is better)" in lines["sparse_attention"]
    assert "contextevolve run --problem DIR" in out.stdout  # and how to run your own problem


def test_evaluate_any_task_from_a_file(tmp_path):
    program = tmp_path / "fifo.py"
    program.write_text("def get_best_schedule(workload, num_seqs):\n    o = list(range(workload.num_txns))\n"
                       "    return workload.makespan(o), o\n")
    out = cli("evaluate", "--task", "txn_scheduling", str(program))
    assert out.returncode == 0, out.stderr
    result = json.loads(out.stdout)
    assert result["status"] == "ok" and result["metrics"]["makespan"] == 799.0
    assert result["combined_score"] == 1e6 / 800


def test_baselines_table_for_one_task():
    out = cli("baselines", "--task", "txn_scheduling", "--json")
    assert out.returncode == 0, out.stderr
    rows = {r["baseline"]: r for r in json.loads(out.stdout)}
    assert set(rows) == {"initial", "heuristic", "human_sota"}
    assert all(r["status"] == "ok" and r["task"] == "txn_scheduling" for r in rows.values())
    assert (rows["heuristic"]["combined_score"] < rows["initial"]["combined_score"]
            < rows["human_sota"]["combined_score"])
    table = cli("baselines", "--task", "txn_scheduling")
    assert table.returncode == 0 and "Human-SOTA" in table.stdout and "makespan" in table.stdout


def test_baselines_unknown_task_is_a_clear_error():
    out = cli("baselines", "--task", "nope")
    assert out.returncode == 2 and "unknown task 'nope'" in out.stderr


def test_evaluate_prints_metrics_json(tmp_path):
    out = cli("evaluate", "--task", "model_placement", str(INITIAL))
    data = json.loads(out.stdout)
    assert out.returncode == 0 and data["status"] == "ok" and data["reason"] == ""
    assert data["combined_score"] == pytest.approx(21.8916, abs=1e-4)
    bad = tmp_path / "bad.py"
    bad.write_text("def compute_model_placement(gpu_num, models):\n    return {}\n")
    out = cli("evaluate", "--task", "model_placement", str(bad))
    data = json.loads(out.stdout)
    assert out.returncode == 1 and data["status"] == "invalid" and data["combined_score"] == 0
    assert "models not placed" in data["reason"]


def test_bad_input_gets_a_clear_error(tmp_path, capsys):
    assert main(["evaluate", "--task", "model_placement", str(tmp_path / "missing.py")]) == 2
    assert "cannot read program file" in capsys.readouterr().err
    assert main(["evaluate", "--task", "nope", str(INITIAL)]) == 2
    assert "known tasks: eplb, llm_sql, model_placement" in capsys.readouterr().err
    assert main(["status", str(tmp_path)]) == 2
    assert "holds no run" in capsys.readouterr().err
    assert main(["run", "--run-dir", str(tmp_path / "r"), "--resume"]) == 2
    assert "nothing to resume" in capsys.readouterr().err
    assert main(["run", "--role-model", "generator"]) == 2
    assert "ROLE=MODEL" in capsys.readouterr().err


def test_status_json_keys(tmp_path, models):
    evolve("model_placement", iterations=2, run_dir=tmp_path / "r", max_retries=0)
    out = cli("status", str(tmp_path / "r"), "--json")
    data = json.loads(out.stdout)
    assert data["iterations"] == 2 and data["programs"] == 3
    assert data["initial_score"] == pytest.approx(21.8916, abs=1e-4)
    assert data["best_score"] >= data["initial_score"]
    # the sampler is only called once there are more candidates than exemplars
    assert {"summarizer", "navigator", "generator"} <= set(data["tokens"])
    assert data["tokens"]["generator"] == {"prompt": 1800, "completion": 800}
    # seconds by phase and LLM calls by role beside the tokens
    assert data["llm"]["generator"]["prompt"] == 1800 and data["llm"]["generator"]["calls"] == 2
    assert (data["seconds"]["generate"] >= data["seconds"]["generate.llm"] >= 0
            and data["seconds"]["evaluate"] > 0)
    shown = cli("status", str(tmp_path / "r"))
    text = shown.stdout + shown.stderr
    assert "Seconds by phase" in text and "median seconds per iteration" in text
    assert [e["resumed"] for e in data["served_by"]] == [False]
    assert "served by: chat models given in code" in text
    # each worker's phase: the one worker stopped once every iteration of the budget was claimed
    assert data["workers"] == {"0": {"next": [], "child_id": None, "committed": 2,
                                     "stop_reason": "iteration budget reached (2/2)"}}
    assert ("worker 0: stopped (iteration budget reached (2/2)); 2 children committed"
            in " ".join(text.split()))


def test_run_with_scripted_models_prints_summary(tmp_path, models, capsys):
    assert main(["run", "--iterations", "2", "--run-dir", str(tmp_path / "r"), "--seed", "3"]) == 0
    err = capsys.readouterr().err
    assert "best combined score" in err and "Tokens by role" in err and "best_program.py" in err
    assert "served by: chat models given in code" in err
    assert main(["run", "--iterations", "2", "--run-dir", str(tmp_path / "r")]) == 2
    assert "already holds a run" in capsys.readouterr().err


def test_log_prompts_keeps_every_request_and_reply(tmp_path, models):
    from contextevolve.llm.transcript import TRANSCRIPT_FILE

    assert main(["run", "--iterations", "2", "--run-dir", str(tmp_path / "r"), "--log-prompts",
                 "--no-report"]) == 0
    lines = [json.loads(line) for line in (tmp_path / "r" / TRANSCRIPT_FILE).read_text().splitlines()]
    by_role = {role: [x for x in lines if x["role"] == role] for role in {x["role"] for x in lines}}
    # one line per model call, in the order made: as many as each scripted model answered
    assert {role: len(calls) for role, calls in by_role.items()} == {
        role: len(m.seen) for role, m in models.items() if m.seen}
    first = by_role["generator"][0]
    assert first["messages"][0]["type"] == "system" and "## Task" in first["messages"][1]["content"]
    assert first["reply"].startswith("Here is the improved program.\n```python")
    assert first["usage"] == {"generator": {"prompt": 900, "completion": 400}} and first["attempt"] == 1
    assert json.loads((tmp_path / "r" / "run.json").read_text())["log_prompts"] is True
    assert main(["run", "--iterations", "1", "--run-dir", str(tmp_path / "quiet"), "--no-report"]) == 0
    assert not (tmp_path / "quiet" / TRANSCRIPT_FILE).exists()


def test_run_flags_and_run_settings_agree():
    """Every ``run`` flag sets a run setting (flat name), and every setting has a flag or is API-only.

    The sandbox flags' help states the defaults the run actually uses.
    """
    from contextevolve.cli import build_parser
    from contextevolve.flags import API_ONLY_SETTINGS, run_settings
    from contextevolve.graph.context import (
        SANDBOX_DEFAULTS,
        RunContext,
        check_setting_names,
        flat_setting_names,
    )

    everything = ["run", "--base-url", "http://h/v1", "--model", "m", "--role-model", "generator=g",
                  "--max-retries", "1", "--retry-wait", "0.5", "--request-timeout", "7", "--top-p", "0.8",
                  "--top-k", "20", "--seed", "3", "--target-score", "30",
                  "--token-budget", "9", "--cost-budget", "0.5", "--price", "m=1,2", "--embedded",
                  "--time-budget", "1.5", "--edit-form", "diff",
                  "--no-import-fixes",
                  "--no-prechecks", "--unguided-hotter", "0", "--no-code-stop",
                  "--no-server-per-role", "--stale-after", "3", "--stale-rest", "2", "--no-behavioural-twins",
                  "--summarize-invalid",
                  "--navigator-sampler-share", "0.5",
                  "--samples-per-prompt", "2", "--log-prompts",
                  "--eval-timeout", "5",
                  "--exemplars", "1", "--trajectories", "2",
                  "--context-budget", "900", "--summary-variant", "novel_only", "--guidance-variant",
                  "implementation", "--sampling-variant", "top_score", "--chroma-url", "http://c:1",
                  "--workers", "2", "--parent-selection", "pareto",
                  "--llm-concurrency", "3", "--no-summarize-behind", "--eval-workers", "2",
                  "--executor", "ray", "--ray-address", "auto", "--disable", "summarizer",
                  "--disable", "navigator", "--disable", "sampler", "--eval-cpu", "2",
                  "--eval-memory-mb", "512", "--eval-max-processes", "8",
                  "--eval-output-kb", "8", "--eval-files-mb", "8", "--eval-allow-network",
                  "--mutation", "swap two items", "--mutation", "change a constant"]
    settings = run_settings(build_parser().parse_args(everything))
    check_setting_names(settings)  # raises on a key that is not a RunContext field
    assert all(value is not None for value in settings.values())  # each flag reached its field
    assert set(settings) | API_ONLY_SETTINGS == flat_setting_names()
    assert not set(settings) & API_ONLY_SETTINGS
    assert RunContext(**settings).time_budget_s == 90  # and the values are valid (minutes become seconds)
    assert RunContext(**settings).search.mutations == ("swap two items", "change a constant")
    assert (RunContext(**settings).parallelism.workers, RunContext(**settings).llm_slots,
            RunContext(**settings).eval_slots) == (2, 3, 2)
    with pytest.raises(SystemExit):  # the flag of rounds of lanes is gone: --workers replaced it
        build_parser().parse_args(["run", "--lanes", "2"])
    help_text = " ".join(build_parser().parse_args(["run"]).parser.format_help().split())
    for flag, default in (("--eval-memory-mb", SANDBOX_DEFAULTS.memory_mb),
                          ("--eval-files-mb", SANDBOX_DEFAULTS.files_mb),
                          ("--eval-output-kb", SANDBOX_DEFAULTS.output_kb),
                          ("--eval-max-processes", SANDBOX_DEFAULTS.max_processes)):
        assert f"(default {default})" in help_text.split(flag)[-1][:200]
    assert RunContext().sandbox.memory_mb == SANDBOX_DEFAULTS.memory_mb
