"""A user's own problem in OpenEvolve's form through the real graph with scripted models.

The problem is an initial program + evaluator.py [+ config.yaml]; checked are scores, diagnostics in the
prompts, failed children, resume, report.
"""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest

from contextevolve.api import evolve, run_status
from contextevolve.cli import main
from contextevolve.llm.models import use_chat_models
from contextevolve.tasks.problem.config import ConfigError, read_config
from contextevolve.tasks.problem.source import ProblemError, ProblemSource
from contextevolve.tasks.registry import get_task
from tests.fakes import reply, scripted

PROGRAM = textwrap.dedent('''\
    """A program the tests evolve."""
    # EVOLVE-BLOCK-START
    MODE = "ok"
    GAIN = 1.0


    def solve(x):
        return x * GAIN
    # EVOLVE-BLOCK-END
    ''')

#: One evaluator for every behaviour; the candidate's MODE picks it (the candidate controls its evaluation
#: anyway).
EVALUATOR = textwrap.dedent('''\
    """Scores solve(3) against 9: closer is better."""
    import importlib.util
    import math


    class Result:
        """Shaped like OpenEvolve's EvaluationResult."""

        def __init__(self, metrics, artifacts):
            self.metrics, self.artifacts = metrics, artifacts


    def _load(path):
        spec = importlib.util.spec_from_file_location("program", path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module


    def evaluate(program_path):
        program = _load(program_path)
        mode = getattr(program, "MODE", "ok")
        if mode == "raise":
            raise RuntimeError("the evaluator broke on purpose")
        if mode == "garbage":
            return "hello"
        if mode == "nan":
            return {"combined_score": math.nan}
        if mode == "strings":
            return {"verdict": "fine"}
        if mode == "hang":
            while True:
                pass
        if mode == "error":
            return {"combined_score": 0.0, "error": "solve returned None"}
        if mode == "overlap":  # OpenEvolve's circle-packing style: the verdict is printed, not returned
            print("checking 26 circles")
            print("Circles 3 and 4 overlap: dist=0.1000 < 0.2000")
            return {"validity": 0.0, "combined_score": 0.0}
        value = program.solve(3)
        if mode == "printed":
            print(f"solve(3) = {value}, wanted 9")
            return {"combined_score": 1.0 / (1.0 + abs(value - 9))}
        closeness = 1.0 / (1.0 + abs(value - 9))
        if mode == "result":
            return Result({"closeness": closeness, "combined_score": closeness}, {"stdout": "tried 3"})
        return {"closeness": closeness, "combined_score": closeness, "note": f"solve(3) = {value}"}
    ''')


def make_problem(root: Path, *, evaluator: str = EVALUATOR, program: str = PROGRAM,
                 config: str | None = None) -> Path:
    root.mkdir(parents=True)
    (root / "initial_program.py").write_text(program)
    (root / "evaluator.py").write_text(evaluator)
    if config is not None:
        (root / "config.yaml").write_text(config)
    return root


def child(**changes) -> str:
    source = PROGRAM
    for name, value in changes.items():
        old = next(line for line in source.splitlines() if line.startswith(f"{name} ="))
        source = source.replace(old, f"{name} = {value!r}")
    return f"```python\n{source}```"


def models(*generator_replies: str) -> dict:
    return {"summarizer": scripted(reply("Multiplies x by a gain.", 200, 20)),
            "navigator": scripted(reply("Raise the gain towards 3.", 200, 20)),
            "sampler": scripted(reply('{"exemplars": [1], "why": "best"}', 100, 10)),
            "generator": scripted(*(reply(r, 500, 200) for r in generator_replies))}


def test_a_problem_folder_runs_through_the_graph_resumes_and_reports(tmp_path):
    folder = make_problem(tmp_path / "gain")
    scripted_models = models(child(GAIN=2.0), child(MODE="raise"), child(GAIN=3.0), child(GAIN=2.5))
    with use_chat_models(**scripted_models):
        result = evolve(problem=folder, iterations=2, run_dir=tmp_path / "run", max_retries=0)
        staged = tmp_path / "run" / "problem"
        assert (staged / "evaluator.py").read_text() == EVALUATOR and (staged / "problem.json").is_file()
        # the run keeps its copy
        (folder / "evaluator.py").write_text("def evaluate(p):\n    return {'combined_score': -1.0}\n")
        resumed = evolve(iterations=3, run_dir=tmp_path / "run", resume=True)
    programs = [json.loads(line) for line in (tmp_path / "run" / "programs.jsonl").read_text().splitlines()]
    by_iteration = {p["iteration"]: p for p in programs}
    assert by_iteration[0]["combined_score"] == pytest.approx(1 / 7)  # solve(3) = 3, |3 - 9| = 6
    assert by_iteration[1]["status"] == "ok" and by_iteration[1]["combined_score"] == pytest.approx(1 / 4)
    assert by_iteration[1]["metrics"] == {"closeness": pytest.approx(0.25),
                                          "combined_score": pytest.approx(0.25)}
    assert "note: solve(3) = 6.0" in by_iteration[1]["diagnostics"]
    assert (by_iteration[2]["status"], by_iteration[2]["reason"]) == (  # the evaluator raised on the child
        "failed", "the evaluator failed: RuntimeError: the evaluator broke on purpose")
    assert by_iteration[3]["status"] == "ok" and by_iteration[3]["combined_score"] == pytest.approx(1.0)
    assert result.iterations == 2 and resumed.iterations == 3
    assert resumed.best_score == pytest.approx(1.0)  # GAIN = 3: solve(3) = 9, scored by the staged evaluator
    task = get_task(json.loads((tmp_path / "run" / "run.json").read_text())["task"])
    assert task.evaluate(resumed.best_program).combined_score == resumed.best_score  # recomputed
    summarizer_prompts = "\n".join(str(m.content)
                                   for call in scripted_models["summarizer"].seen for m in call)
    assert "note: solve(3) = 6.0" in summarizer_prompts  # the evaluator's text reaches the Summarizer
    assert run_status(tmp_path / "run")["statuses"]["ok"] >= 3
    assert main(["report", str(tmp_path / "run")]) == 0
    assert "closeness" in (tmp_path / "run" / "report.html").read_text()


def test_every_broken_evaluation_fails_its_child_with_a_reason_and_the_run_goes_on(tmp_path):
    folder = make_problem(tmp_path / "gain", config="evaluator:\n  timeout: 3\n")
    modes = ["raise", "garbage", "nan", "strings", "hang", "error"]
    with use_chat_models(**models(*(child(MODE=m) for m in modes))):
        result = evolve(problem=folder, iterations=len(modes), run_dir=tmp_path / "run", max_retries=0)
    programs = [json.loads(line) for line in (tmp_path / "run" / "programs.jsonl").read_text().splitlines()]
    children = {p["iteration"]: p for p in programs if p["iteration"]}
    reasons = {modes[i - 1]: (p["status"], p["reason"]) for i, p in children.items()}
    assert reasons["raise"] == ("failed",
                                "the evaluator failed: RuntimeError: the evaluator broke on purpose")
    assert (reasons["garbage"][0] == "failed"
            and "returned str, expected a dict of metrics" in reasons["garbage"][1])
    assert reasons["nan"] == ("failed", "the evaluator returned a non-finite metric combined_score (nan)")
    assert reasons["strings"] == ("failed", "the evaluator returned no numeric metric (it returned verdict)")
    assert reasons["hang"] == ("timeout", "the evaluator did not return within 3 s")
    assert reasons["error"] == ("failed", "the evaluator reported an error: solve returned None")
    assert result.iterations == len(modes) and result.best_score == pytest.approx(1 / 7)


def test_a_rejected_child_says_why_from_what_its_evaluator_printed(tmp_path):
    folder = make_problem(tmp_path / "gain")
    task = get_task(ProblemSource.read(folder).stage(tmp_path / "staged"))
    printed = task.evaluate(PROGRAM.replace('MODE = "ok"', 'MODE = "printed"'))
    # no artifacts: the evaluator's printed lines are the feedback
    assert printed.status == "ok" and "solve(3) = 3.0, wanted 9" in printed.diagnostics
    with use_chat_models(**models(child(MODE="overlap"))):
        evolve(problem=folder, iterations=1, run_dir=tmp_path / "run", max_retries=0)
    programs = [json.loads(line) for line in (tmp_path / "run" / "programs.jsonl").read_text().splitlines()]
    # validity 0 is invalid, with the printed verdict as its reason
    assert programs[1]["status"] == "invalid" and programs[1]["failure_kind"] == "invalid"
    assert programs[1]["reason"] == ("the evaluator reports the program invalid (validity = 0): "
                                     "Circles 3 and 4 overlap: dist=0.1000 < 0.2000")


def test_an_invalid_child_is_shown_to_the_agents_as_invalid(tmp_path):
    folder = make_problem(tmp_path / "gain")
    with use_chat_models(**(chat := models(child(MODE="overlap")))):
        evolve(problem=folder, iterations=1, run_dir=tmp_path / "run", max_retries=0,
               import_fixes=False)
    programs = [json.loads(line) for line in (tmp_path / "run" / "programs.jsonl").read_text().splitlines()]
    invalid = programs[1]
    assert invalid["status"] == "invalid" and invalid["combined_score"] == 0.0
    assert "checking 26 circles" in invalid["diagnostics"] and "overlap" in invalid["diagnostics"]
    # its abstract is the verdict (and the idea it tried, had it one), written without a Summarizer call
    assert invalid["abstract"].startswith("FAILED (invalid): the evaluator reports the program invalid "
                                          "(validity = 0): Circles 3 and 4 overlap")
    assert len(chat["summarizer"].seen) == 1  # the initial program's only
    # the paper's Summarizer, one flag away: it reads the verdict and writes the abstract
    with use_chat_models(**(chat := models(child(MODE="overlap")))):
        evolve(problem=folder, iterations=1, run_dir=tmp_path / "run2", max_retries=0,
               import_fixes=False, summarize_invalid=True)
    programs = [json.loads(line) for line in (tmp_path / "run2" / "programs.jsonl").read_text().splitlines()]
    assert "Circles 3 and 4 overlap" in chat["summarizer"].seen[-1][1].content
    assert programs[1]["abstract"] == "Multiplies x by a gain."


def test_evaluation_result_objects_and_cascades(tmp_path):
    folder = make_problem(tmp_path / "gain")
    source = ProblemSource.read(folder)
    task = get_task(source.stage(tmp_path / "staged"))
    result = task.evaluate(PROGRAM.replace('MODE = "ok"', 'MODE = "result"'))
    assert result.status == "ok" and result.metrics == {"closeness": pytest.approx(1 / 7),
                                                        "combined_score": pytest.approx(1 / 7)}
    assert "stdout: tried 3" in result.diagnostics  # artifacts become diagnostics
    cascade = EVALUATOR + textwrap.dedent('''
        def evaluate_stage1(program_path):
            gain = _load(program_path).GAIN
            return {"combined_score": 0.1 * gain, "stage1": 1.0}

        def evaluate_stage2(program_path):
            return {"combined_score": 0.9, "stage2": 1.0}
        ''')
    folder2 = make_problem(tmp_path / "cascade", evaluator=cascade,
                           config="evaluator:\n  cascade_thresholds: [0.25]\n")
    task2 = get_task(ProblemSource.read(folder2).stage(tmp_path / "staged2"))
    low = task2.evaluate(PROGRAM)  # stage 1 scores 0.1 < 0.25: stage 2 does not run
    high = task2.evaluate(PROGRAM.replace("GAIN = 1.0", "GAIN = 3.0"))  # 0.3 >= 0.25: stage 2 runs
    assert (low.combined_score, low.metrics) == (pytest.approx(0.1),
                                                 {"combined_score": pytest.approx(0.1), "stage1": 1.0})
    assert (high.combined_score, high.metrics) == (pytest.approx(0.9),
                                                   {"combined_score": 0.9, "stage1": 1.0, "stage2": 1.0})
    off = make_problem(tmp_path / "off", evaluator=cascade,
                       config="evaluator:\n  cascade_evaluation: false\n")
    plain = get_task(ProblemSource.read(off).stage(tmp_path / "staged3")).evaluate(PROGRAM)
    assert plain.metrics["closeness"] == pytest.approx(1 / 7)  # evaluate() itself


def test_config_maps_onto_settings_and_names_what_it_ignores(tmp_path):
    path = tmp_path / "config.yaml"
    path.write_text(textwrap.dedent('''\
        max_iterations: 12
        random_seed: 7
        diff_based_evolution: true
        checkpoint_interval: 5
        llm:
          api_base: http://localhost:8000/v1
          models: [{name: qwen, weight: 1.0}]
          temperature: 0.6
          max_tokens: 900
          top_p: 0.9
          api_key: secret
        evaluator: {timeout: 20, cascade_thresholds: [0.3], parallel_evaluations: 4, memory_limit_mb: 512}
        allow_full_rewrites: false
        prompt: {system_message: Make it fast.}
        database: {population_size: 50}
        '''))
    cfg = read_config(path)
    assert cfg.settings["max_iterations"] == 12 and cfg.settings["seed"] == 7
    assert cfg.settings["edit_form"] == "diff" and cfg.settings["base_url"] == "http://localhost:8000/v1"
    assert cfg.settings["model"] == "qwen" and cfg.settings["top_p"] == 0.9
    assert cfg.settings["temperatures"]["generator"] == 0.6 and cfg.settings["max_tokens"]["generator"] == 900
    assert (cfg.timeout_s, cfg.thresholds, cfg.description) == (20.0, [0.3], "Make it fast.")
    assert cfg.ignored == ["checkpoint_interval", "llm.api_key", "evaluator.parallel_evaluations",
                           "evaluator.memory_limit_mb", "allow_full_rewrites", "database"]
    path.write_text("evalutor:\n  timeout: 3\n")
    with pytest.raises(ConfigError, match="unknown section 'evalutor' \\(did you mean 'evaluator'\\?\\)"):
        read_config(path)
    path.write_text("language: rust\n")
    with pytest.raises(ConfigError, match="only Python programs"):
        read_config(path)


def test_flags_win_over_the_config(tmp_path):
    folder = make_problem(tmp_path / "gain", config="max_iterations: 1\nrandom_seed: 5\n")
    with use_chat_models(**models(child(GAIN=2.0))):
        evolve(problem=folder, run_dir=tmp_path / "run", seed=9, max_retries=0)
    saved = json.loads((tmp_path / "run" / "run.json").read_text())
    assert saved["max_iterations"] == 1 and saved["seed"] == 9


@pytest.mark.parametrize(("files", "message"), [
    ({"evaluator.py": EVALUATOR}, "program file {d}/initial_program.py does not exist"),
    ({"initial_program.py": PROGRAM, "evaluator.py": "def score(p):\n    return {}\n"},
     "defines no function evaluate(program_path)"),
    ({"initial_program.py": PROGRAM, "evaluator.py": EVALUATOR, "config.yaml": "evalutor: {timeout: 3}\n"},
     "unknown section 'evalutor' (did you mean 'evaluator'?)"),
    ({"initial_program.py": "def solve(:\n", "evaluator.py": EVALUATOR}, "is not valid Python"),
])
def test_bad_problems_are_refused_with_exit_2_and_nothing_written(tmp_path, capsys, files, message):
    folder = tmp_path / "p"
    folder.mkdir()
    for name, text in files.items():
        (folder / name).write_text(text)
    code = main(["run", "--problem", str(folder), "--run-dir", str(tmp_path / "run"), "--iterations", "1"])
    err = " ".join(capsys.readouterr().err.split())
    assert code == 2 and message.format(d=folder) in err
    assert not (tmp_path / "run").exists()


def test_a_program_without_markers_is_evolved_whole_and_the_user_is_told(tmp_path, capsys):
    folder = make_problem(tmp_path / "p", program="def solve(x):\n    return x\n")
    assert main(["evaluate", "--problem", str(folder), str(folder / "initial_program.py")]) == 0
    err = " ".join(capsys.readouterr().err.split())
    assert "has no # EVOLVE-BLOCK-START / # EVOLVE-BLOCK-END markers: the whole file is evolved" in err
    with pytest.raises(ProblemError, match="a problem needs --program and --evaluator"):
        ProblemSource.read(program=folder / "initial_program.py")
    assert main(["run", "--task", "txn_scheduling", "--problem", str(folder)]) == 2  # not both


def test_the_copy_leaves_out_runs_environments_and_caches_kept_beside_the_evaluator(tmp_path):
    folder = make_problem(tmp_path / "p")
    (folder / "data.txt").write_text("3")
    for junk in ("runs/old/buffer.sqlite", "venv/pyvenv.cfg", "__pycache__/x.pyc", ".git/HEAD",
                 "openevolve_output/best.py", "runs/old/problem/problem.json"):
        (folder / junk).parent.mkdir(parents=True, exist_ok=True)
        (folder / junk).write_text("x")
    name = ProblemSource.read(folder).stage(tmp_path / "staged")
    copied = sorted(str(p.relative_to(tmp_path / "staged")) for p in (tmp_path / "staged").rglob("*")
                    if p.is_file())
    assert copied == ["data.txt", "evaluator.py", "initial_program.py", "problem.json"]
    assert name == f"problem:{(tmp_path / 'staged').resolve()}"
    assert ProblemSource.read(folder).stage(tmp_path / "staged") == name  # the same problem again: reused
    (folder / "data.txt").write_text("4")
    with pytest.raises(ProblemError, match="holds another version of the problem"):
        ProblemSource.read(folder).stage(tmp_path / "staged")


def test_baselines_with_one_shot_on_a_problem(tmp_path, capsys):
    folder = make_problem(tmp_path / "gain")
    with use_chat_models(**models(child(GAIN=3.0))):
        assert main(["baselines", "--problem", str(folder), "--one-shot", "--json"]) == 0
    rows = {r["baseline"]: r for r in json.loads(capsys.readouterr().out)}
    assert rows["initial"]["combined_score"] == pytest.approx(1 / 7)
    assert rows["one_shot"]["status"] == "ok" and rows["one_shot"]["combined_score"] == pytest.approx(1.0)


def test_the_program_imports_the_problems_own_modules_and_a_late_stage_that_raises_keeps_the_earlier_result(
        tmp_path):
    program = "from helper import BASE\n" + PROGRAM.replace("GAIN = 1.0", "GAIN = BASE")
    cascade = EVALUATOR + textwrap.dedent('''
        def evaluate_stage1(program_path):
            return {"combined_score": 0.6, "valid": True}

        def evaluate_stage2(program_path):
            raise RuntimeError("stage 2 too slow")
        ''')
    folder = make_problem(tmp_path / "p", program=program, evaluator=cascade)
    (folder / "helper.py").write_text("BASE = 3.0\n")
    task = get_task(ProblemSource.read(folder).stage(tmp_path / "staged"))
    result = task.evaluate(task.initial_program)
    assert (result.status == "ok" and result.combined_score == 0.6
            and result.metrics == {"combined_score": 0.6})
    assert ("stage2_error: RuntimeError: stage 2 too slow" in result.diagnostics
            and "valid: True" in result.diagnostics)


def test_a_moved_problem_run_still_reports_and_a_restaged_folder_is_a_new_task(tmp_path):
    folder = make_problem(tmp_path / "gain")
    with use_chat_models(**models(child(GAIN=2.0))):
        evolve(problem=folder, iterations=1, run_dir=tmp_path / "run", max_retries=0)
    (tmp_path / "run").rename(tmp_path / "moved")
    assert run_status(tmp_path / "moved")["best_score"] == pytest.approx(1 / 4)
    assert main(["report", str(tmp_path / "moved")]) == 0
    name = ProblemSource.read(folder).stage(tmp_path / "st")
    assert get_task(name) is get_task(name)  # one task per staged version: it keeps the metrics it saw
    import shutil
    shutil.rmtree(tmp_path / "st")
    (folder / "evaluator.py").write_text("def evaluate(p):\n    return {'combined_score': 0.9}\n")
    assert ProblemSource.read(folder).stage(tmp_path / "st") == name
    assert get_task(name).evaluate(PROGRAM).combined_score == 0.9  # not the task staged there before


def test_a_failing_initial_program_is_flagged_when_the_run_starts(tmp_path, capsys):
    folder = make_problem(tmp_path / "p", program=PROGRAM.replace('MODE = "ok"', 'MODE = "raise"'))
    with use_chat_models(**models(child(GAIN=3.0))):
        code = main(["run", "--problem", str(folder), "--iterations", "1", "--run-dir", str(tmp_path / "run"),
                     "--no-report"])
    err = " ".join(capsys.readouterr().err.split())
    assert code == 0
    assert ("warning: the initial program is not ok (failed: the evaluator failed: RuntimeError: "
            "the evaluator broke on purpose)") in err


def test_a_duration_metric_improves_downwards_on_the_pareto_front(tmp_path):
    from contextevolve.memory.records import ProgramRecord
    from contextevolve.nodes.select_parent import pareto_front

    task = get_task(ProblemSource.read(make_problem(tmp_path / "gain")).stage(tmp_path / "staged"))
    task.observe({"combined_score": 0.5, "sum_radii": 2.0, "eval_time": 1.5, "step_ms": 3.0})
    assert {m.name: m.higher_is_better for m in task.metrics} == {
        "combined_score": True, "sum_radii": True, "eval_time": False, "step_ms": False}

    def program(pid, score, seconds):
        return ProgramRecord(id=pid, iteration=0, status="ok", combined_score=score, source="",
                             metrics={"combined_score": score, "sum_radii": 4 * score, "eval_time": seconds,
                                      "step_ms": seconds})

    # the slow, worse program is on no front; a faster, worse one trades score for time
    assert pareto_front([program("fast", 0.9, 1.0), program("slow", 0.5, 9.0)], task.metrics) == {"fast": 4}
    assert pareto_front([program("best", 0.9, 5.0), program("quick", 0.5, 1.0)], task.metrics) == {
        "best": 2, "quick": 2}
