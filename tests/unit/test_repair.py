"""Import fixes of failed children, second asks, pre-checks, novelty, readable progress."""

from __future__ import annotations

import json

import pytest

from contextevolve.api import evolve
from contextevolve.display import child_line
from contextevolve.evaluation.limits import SandboxLimits
from contextevolve.evaluation.tracebacks import candidate_excerpt
from contextevolve.graph.context import RunContext
from contextevolve.llm.models import use_chat_models
from contextevolve.llm.parsing import clip_to_sentence, sentences
from contextevolve.program.fixes import add_import, missing_import
from contextevolve.program.mutations import MUTATIONS, mutation_for
from contextevolve.tasks.prechecks import precheck, static_check
from contextevolve.tasks.registry import get_task
from tests.fakes import BETTER_PROGRAM, INITIAL, default_models, fenced, reply, scripted

TASK = get_task("model_placement")
#: BETTER_PROGRAM with a heap imported under a name the model forgot: NameError on the first case
#: (a name no mechanical fix knows).
NAME_ERROR = BETTER_PROGRAM.replace("    ordered = sorted(", "    pq.heapify([])\n    ordered = sorted(")
#: BETTER_PROGRAM using ``heapq`` without importing it: the import is added without a model.
FORGOT_IMPORT = NAME_ERROR.replace("pq.heapify", "heapq.heapify")


def run(tmp_path, generator, **settings):
    models = default_models()
    models["generator"] = generator
    with use_chat_models(**models):
        result = evolve("model_placement", iterations=1, run_dir=tmp_path / "r", max_retries=0, **settings)
    records = [json.loads(line) for line in (tmp_path / "r" / "programs.jsonl").read_text().splitlines()]
    return result, records, models


def test_a_failed_child_gets_no_model_repair_only_a_missing_import(tmp_path):
    unknown = NAME_ERROR.replace("pq.heapify", "pq2.heapify")  # no import can fix an unknown name
    generator = scripted(reply(fenced(unknown), 900, 400), reply(fenced(BETTER_PROGRAM), 1100, 400),
                         cycle=False)
    _, records, _ = run(tmp_path, generator)
    assert len(generator.seen) == 1 and records[1]["status"] == "failed" and not records[1]["attempts"]
    generator = scripted(reply(fenced(FORGOT_IMPORT), 900, 400), cycle=False)
    _, records, _ = run(tmp_path / "2", generator)
    assert records[1]["status"] == "ok" and [a["method"] for a in records[1]["attempts"]] == ["import"]


def test_a_duplicate_child_is_never_evaluated(tmp_path, monkeypatch):
    from contextevolve.nodes import evaluate as evaluate_node

    evaluated = []
    real = evaluate_node.run_evaluation
    monkeypatch.setattr(evaluate_node, "run_evaluation",
                        lambda ctx, src: evaluated.append(src) or real(ctx, src))
    # the parent again, differing only in comments and a docstring: a twin
    twin = INITIAL.replace("# Greedy: most demanding",
                           "# A new comment\n    # Greedy: most demanding").replace(
        '"""Place each model', '"""Docstring changed. Place each model')
    # and, asked again, the same plus a helper nothing calls: still a twin
    with_helper = twin.replace("# EVOLVE-BLOCK-END",
                               "def unused_helper(models):\n    return sorted(models)\n\n\n"
                               "# EVOLVE-BLOCK-END")
    assert "def unused_helper" in with_helper
    generator = scripted(reply(fenced(twin), 900, 400), reply(fenced(with_helper), 950, 400), cycle=False)
    _, records, _ = run(tmp_path, generator)
    child = records[1]
    assert evaluated == [] and child["eval_seconds"] == 0.0
    assert child["status"] == "failed" and child["reason"].startswith("duplicate of it00000")
    assert len(generator.seen) == 2  # asked once more, in a new conversation without the copy in it
    reask = generator.seen[1]
    assert (len(reask) == 2 and twin not in reask[-1].content
            and '"""Place each model' not in reask[-1].content)
    assert "# Greedy: most demanding" in reask[-1].content  # the parent's code, without its docstrings
    assert mutation_for(0, 0) in reask[-1].content  # naming one concrete change (seed 0, iteration 0)
    assert child["attempts"] == []  # a twin is not repaired


def test_a_copy_of_a_working_parent_with_type_hints_is_a_twin(tmp_path, monkeypatch):
    """Type hints added to a program that runs change nothing it does: the child is a twin.

    It is never evaluated, and the model is asked once more.
    """
    from contextevolve.nodes import evaluate as evaluate_node

    evaluated = []
    real = evaluate_node.run_evaluation
    monkeypatch.setattr(evaluate_node, "run_evaluation",
                        lambda ctx, src: evaluated.append(src) or real(ctx, src))
    hinted = INITIAL.replace("def compute_model_placement(gpu_num, models):",
                             "def compute_model_placement(gpu_num: int, models: list) -> dict:")
    assert hinted != INITIAL
    generator = scripted(reply(fenced(hinted), 900, 400), reply(fenced(BETTER_PROGRAM), 900, 400),
                         cycle=False)
    _, records, _ = run(tmp_path, generator)
    # the copy was asked again, not evaluated
    assert len(generator.seen) == 2 and evaluated == [BETTER_PROGRAM]
    assert records[1]["status"] == "ok" and records[1]["source"] == BETTER_PROGRAM


def test_a_run_names_its_own_mutations_in_the_second_ask(tmp_path):
    """``mutations`` replaces the built-in list: the second ask after a copy names one of the run's own."""
    copy = INITIAL.replace("# Greedy: most demanding", "# A new comment\n    # Greedy: most demanding")
    generator = scripted(reply(fenced(copy), 900, 400), reply(fenced(BETTER_PROGRAM), 900, 400), cycle=False)
    own = ("place the largest model on the emptiest GPU last", "sort the GPUs by their free memory")
    _, records, _ = run(tmp_path, generator, mutations=own)
    reask = generator.seen[1][-1].content
    assert mutation_for(0, 0, own) in reask and not any(m in reask for m in MUTATIONS)
    assert records[1]["status"] == "ok"
    with pytest.raises(ValueError, match="mutations must name at least one change"):
        run(tmp_path / "empty", generator, mutations=())


def test_the_named_mutation_varies_with_seed_and_iteration():
    named = {mutation_for(seed, iteration) for seed in range(3) for iteration in range(len(MUTATIONS))}
    assert named == set(MUTATIONS) and mutation_for(4, 2) == mutation_for(4, 2)


def test_a_twin_on_the_first_ask_gets_a_second_chance(tmp_path):
    generator = scripted(reply(fenced(INITIAL + "\n# only a comment\n"), 900, 400),
                         reply(fenced(BETTER_PROGRAM), 900, 400), cycle=False)
    _, records, _ = run(tmp_path, generator)
    assert records[1]["status"] == "ok" and records[1]["source"] == BETTER_PROGRAM
    assert records[1]["tokens"]["generator"] == {"prompt": 1800, "completion": 800}


def test_a_second_ask_written_without_docstrings_keeps_the_parents(tmp_path):
    """A rewrite of the parent shown without docstrings gets the parent's docstrings back.

    The second ask shows the parent without docstrings (also in ``full`` mode, where the first ask
    shows them): the rewrite gets them back, or every second ask would strip a lineage of them.
    """
    from contextevolve.program.docstrings import without_docstrings

    assert ('"""' in BETTER_PROGRAM
            and '"""' not in without_docstrings(BETTER_PROGRAM).split("EVOLVE-BLOCK-START")[1])
    generator = scripted(reply(fenced(INITIAL), 900, 400),
                         reply(fenced(without_docstrings(BETTER_PROGRAM)), 900, 300),
                         cycle=False)
    _, records, _ = run(tmp_path, generator)
    assert records[1]["status"] == "ok" and records[1]["source"] == BETTER_PROGRAM


def test_the_second_ask_may_answer_with_an_edit(tmp_path):
    edit = ("<<<<<<< SEARCH\n                kvpr = load[gpu_id] / free_mem[gpu_id]\n=======\n"
            "                kvpr = (load[gpu_id] + model.req_rate / model.slo) / max(free_mem[gpu_id] - "
            "model.model_size, 1e-9)\n>>>>>>> REPLACE\n")
    generator = scripted(reply(fenced(INITIAL), 900, 400), reply(f"```\n{edit}```", 950, 60), cycle=False)
    _, records, _ = run(tmp_path, generator)
    assert records[1]["status"] == "ok" and records[1]["source"] == BETTER_PROGRAM


def test_static_prechecks_name_the_problem():
    assert static_check(TASK, TASK.initial_program) == ""
    assert "SyntaxError" in static_check(TASK, "def compute_model_placement(gpu_num, models:\n    pass\n")
    assert "defines no top-level function compute_model_placement" in static_check(
        TASK, "def f(a, b):\n  pass\n")
    assert "must take 2 positional arguments (gpu_num, models)" in static_check(
        TASK, "def compute_model_placement(gpu_num):\n    return {}\n")
    assert static_check(TASK, "def compute_model_placement(gpu_num, models, extra=1):\n    return {}\n") == ""
    assert static_check(TASK, "def compute_model_placement(*args):\n    return {}\n") == ""


def test_smoke_run_catches_errors_but_passes_slow_programs():
    limits = SandboxLimits()
    failed = precheck(TASK, NAME_ERROR, limits)
    assert failed.status == "failed" and failed.reason.startswith("pre-check: smoke run: ")
    assert "NameError" in failed.traceback and "line " in failed.traceback
    assert precheck(TASK, TASK.initial_program, limits) is None
    slow = "import time\ndef compute_model_placement(gpu_num, models):\n    time.sleep(60)\n"
    # the full evaluation judges it
    assert precheck(TASK, slow, limits.model_copy(update={"timeout_s": 3})) is None


def test_traceback_excerpt_keeps_only_the_candidates_frames():
    text = ('Traceback (most recent call last):\n'
            '  File "/tmp/x/lib/contextevolve/evaluation/runner.py", line 103, '
            'in main\n    value = harness.f()\n  File "/tmp/x/work/candidate.py", line 7, in place\n'
            '    heapq.heapify(x)\n    ^^^^^\nNameError: name \'heapq\' is not defined\n')
    excerpt = candidate_excerpt(text)
    assert excerpt.splitlines()[0] == "line 7, in place" and "runner.py" not in excerpt
    assert excerpt.endswith("NameError: name 'heapq' is not defined")


@pytest.mark.parametrize("text, cap, truncated, expected", [
    ("Balance pressure. Sort by demand. Then pack the", 200, True, "Balance pressure. Sort by demand."),
    ("Balance pressure. Sort by demand first.", 25, False, "Balance pressure."),
    ("Short.", 100, False, "Short."),
    ("no sentence end at all here", 12, False, "no sentence."),
])
def test_guidance_and_abstracts_end_on_a_sentence(text, cap, truncated, expected):
    assert clip_to_sentence(text, cap, truncated=truncated) == expected


@pytest.mark.parametrize("text, expected", [
    ("It sorts.  It packs\nby size! Then", ["It sorts.", "It packs by size!", "Then"]),
    ("Uses e.g. a heap... and a list. Then i.e. more.",
     ["Uses e.g. a heap... and a list.", "Then i.e. more."]),
    ("(Sorted.) Done?", ["(Sorted.)", "Done?"]),
    ("  ", []),
])
def test_sentences(text, expected):
    assert sentences(text) == expected


def test_navigator_guidance_cut_at_the_cap_ends_on_a_sentence(tmp_path):
    models = default_models()
    models["navigator"] = scripted(reply("Balance projected pressure. Prefer GPUs with the most free memory "
                                         "when the", 400, 160, finish="length"))
    with use_chat_models(**models):
        evolve("model_placement", iterations=2, run_dir=tmp_path / "r", max_retries=0)
    # the first had no step
    child = json.loads((tmp_path / "r" / "programs.jsonl").read_text().splitlines()[2])
    assert child["guidance"] == "Balance projected pressure."


def test_progress_names_the_phase_and_each_failure(tmp_path):
    phases, commits = [], []
    models = default_models()
    models["generator"] = scripted(reply("I cannot help with that.", 900, 10))
    with use_chat_models(**models):
        evolve("model_placement", iterations=1, run_dir=tmp_path / "r", max_retries=0,
               on_phase=lambda node, child: phases.append((node, child)), on_commit=commits.append)
    child = [p for p in phases if p[1]]
    assert [n for n, _ in child] == ["select_parent", "navigate", "sample", "compose", "review", "generate",
                                     "evaluate", "summarize", "update_buffer"]
    assert ({c for _, c in child} == {"it00001"} and ("initialize", None) in phases
            and ("claim", None) in phases)
    # c_0's report, then the child's, read from its record
    assert [c["child_id"] for c in commits] == ["it00000", "it00001"]
    report = commits[1]
    assert (report["worker"], report["status"], report["repairs"]) == (0, "failed", 0)
    assert "no code block" in report["reason"] and report["iterations"] == 1
    assert "no code block" in child_line(report) and "repaired" not in child_line(report)
    line = child_line({"child_id": "it00001", "worker": 0, "status": "failed", "score": 0.0, "repairs": 1,
                       "reason": "malformed generator output: the reply contains no code block",
                       "usage": {"generator": {"prompt": 900, "completion": 10}}})
    assert "no code block" in line and "repaired 1x" in line and "tokens 910" in line
    assert "worker" not in line  # named only when the run has several workers
    assert "(worker 1)" in child_line({**report, "worker": 1}, workers=2)


def test_a_replayed_repair_does_not_ask_or_record_twice(seeded, ctx):
    from dataclasses import replace

    ctx = RunContext(run_dir=ctx.run_dir, max_iterations=3, max_retries=0)

    from contextevolve.nodes.evaluate import evaluate
    from contextevolve.nodes.generate import generate
    from contextevolve.nodes.repair import repair
    from tests.conftest import apply, composed, run_node

    state, memory = seeded
    models = default_models()
    models["generator"] = scripted(reply(fenced(FORGOT_IMPORT), 900, 400), cycle=False)
    with use_chat_models(**models):
        state = replace(state, parent_id="it00000")
        state = apply(state, run_node(generate, composed(state, ctx), ctx))
        state = apply(state, run_node(evaluate, state, ctx))
        assert state.repair_due
        first = run_node(repair, state, ctx)
        again = run_node(repair, state, ctx)  # as after a crash before the checkpoint
    assert again == first and len(models["generator"].seen) == 1
    assert [a.method for a in memory.buffer.require("it00001").attempts] == ["import"]


def test_a_replayed_evaluation_neither_runs_nor_counts_twice(seeded, ctx, monkeypatch):
    from dataclasses import replace

    from contextevolve.nodes import evaluate as evaluate_node
    from contextevolve.nodes.generate import generate
    from tests.conftest import apply, composed, run_node

    state, memory = seeded
    models = default_models()
    models["generator"] = scripted(reply(fenced(BETTER_PROGRAM), 900, 400), cycle=False)
    checked = []
    real = evaluate_node.precheck
    monkeypatch.setattr(evaluate_node, "precheck", lambda *a: checked.append(1) or real(*a))
    with use_chat_models(**models):
        state = replace(state, parent_id="it00000")
        state = apply(state, run_node(generate, composed(state, ctx), ctx))
        first = run_node(evaluate_node.evaluate, state, ctx)
        recorded = memory.buffer.require("it00001")
        again = run_node(evaluate_node.evaluate, state, ctx)  # as after a crash before the checkpoint
    assert again == first and first == {"fix_pending": False, "repair_due": False} and len(checked) == 1
    assert memory.buffer.require("it00001").status == "ok"
    after = memory.buffer.require("it00001")
    assert after.eval_seconds == recorded.eval_seconds > 0 and after.prechecks_failed == 0


def test_a_missing_standard_import_is_added_without_asking_the_model(tmp_path):
    generator = scripted(reply(fenced(FORGOT_IMPORT), 900, 400), reply(fenced(NAME_ERROR), 1000, 400),
                         cycle=False)
    _, records, _ = run(tmp_path, generator)
    child = records[1]
    assert len(generator.seen) == 1  # only the generation: the repair needed no model
    assert child["status"] == "ok" and len(child["attempts"]) == 1 and "repair" not in child["tokens"]
    assert child["attempts"][0]["method"] == "import"
    assert "# EVOLVE-BLOCK-START\nimport heapq\n" in child["source"]
    assert child["combined_score"] == pytest.approx(TASK.evaluate(child["source"]).combined_score)


@pytest.mark.parametrize("error, line", [
    ("NameError: name 'heapq' is not defined", "import heapq"),
    ("pre-check: smoke run: NameError: name 'List' is not defined", "from typing import List"),
    ("NameError: name 'defaultdict' is not defined", "from collections import defaultdict"),
    ("NameError: name 'np' is not defined", "import numpy as np"),
    ("NameError: name 'best_gpu' is not defined", None),  # a local the program forgot: the model's job
    ("AttributeError: 'tuple' object has no attribute 'append'", None),
])
def test_missing_import_knows_only_importable_names(error, line):
    assert missing_import(error) == line


def test_an_import_goes_after_the_docstring_when_there_is_no_block():
    assert add_import('"""Doc."""\nfrom __future__ import annotations\nX = 1\n', "import math") == (
        '"""Doc."""\nfrom __future__ import annotations\nimport math\nX = 1\n')


def test_without_import_fixes_no_import_is_added(tmp_path):
    generator = scripted(reply(fenced(FORGOT_IMPORT), 900, 400), cycle=False)
    _, records, _ = run(tmp_path, generator, import_fixes=False)
    child = records[1]
    assert child["status"] == "failed" and child["attempts"] == [] and child["failure_kind"] == "precheck"
    assert "NameError: name 'heapq' is not defined" in child["reason"]


def test_at_most_three_imports_are_added_then_the_child_stays_failed(tmp_path):
    four = BETTER_PROGRAM.replace("    ordered = sorted(", "    heapq.heapify([])\n    bisect.bisect([], 1)\n"
                                  "    math.sqrt(1.0)\n    statistics.mean([1])\n    ordered = sorted(")
    generator = scripted(reply(fenced(four), 900, 400), reply(fenced(BETTER_PROGRAM), 1000, 400), cycle=False)
    _, records, _ = run(tmp_path, generator)
    child = records[1]
    assert [a["method"] for a in child["attempts"]] == ["import", "import", "import"]
    assert child["status"] == "failed" and "NameError: name 'statistics' is not defined" in child["reason"]
    assert len(generator.seen) == 1  # no model repair after them


#: tokens the scripted Summarizer spends on the initial program before the first child is claimed
#: (tests/fakes.py)
INITIAL_TOKENS = 340


def test_a_spent_token_budget_still_adds_a_missing_import_and_skips_a_twins_second_ask(tmp_path):
    """An added import asks the model nothing, so it is made whatever the budget.

    A twin's second ask is a new request, so it is not made once the budget is spent.
    """
    no_import = BETTER_PROGRAM.replace("    ordered = sorted(",
                                       "    heapq.heapify([])\n    ordered = sorted(")
    assert "import heapq" not in no_import
    _, records, _ = run(tmp_path, scripted(reply(fenced(no_import), 900, 400), cycle=False),
                        token_budget=INITIAL_TOKENS + 1)
    assert records[1]["status"] == "ok" and [a["method"] for a in records[1]["attempts"]] == ["import"]
    generator = scripted(reply(fenced(INITIAL), 900, 400), reply(fenced(BETTER_PROGRAM), 700, 300),
                         cycle=False)
    _, records, _ = run(tmp_path / "twin", generator, token_budget=INITIAL_TOKENS + 1)
    assert len(generator.seen) == 1 and records[1]["reason"].startswith("duplicate of it00000")


