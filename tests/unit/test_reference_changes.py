"""A reference program shown to the Generator by the lines it changed against the current program."""

from __future__ import annotations

from contextevolve.graph.context import RunContext
from contextevolve.loop.composing import build_prompt
from contextevolve.loop.policy import SearchPolicy
from contextevolve.memory.records import ProgramRecord
from contextevolve.prompts.generator import reference_changes
from contextevolve.tasks.registry import get_task
from tests.fakes import BETTER_PROGRAM, INITIAL

OLD = "kvpr = load[gpu_id] / free_mem[gpu_id]"
NEW = "kvpr = (load[gpu_id] + model.req_rate / model.slo) / max(free_mem[gpu_id] - model.model_size, 1e-"
"""The changed line as shown: statements are printed back from their syntax tree (1e-9 becomes 1e-09)."""


def test_a_one_line_change_is_shown_as_the_line_taken_out_and_the_line_put_in():
    text = reference_changes(INITIAL, BETTER_PROGRAM)
    assert text is not None
    assert f"\n    - {OLD}\n" in text and f"\n    + {NEW}" in text
    assert "def " not in text  # the lines it shares with the current program are not repeated


def test_a_block_put_in_keeps_its_indentation_less_the_common_margin():
    steps = "".join(f"    step_{i} = len(xs) * {i}\n" for i in range(12))  # what both programs share
    parent = f"def f(xs):\n{steps}    total = 0\n    return total\n"
    child = f"def f(xs):\n{steps}    total = 0\n    for x in xs:\n        total += x\n    return total\n"
    text = reference_changes(parent, child)
    assert text is not None and "\n    + for x in xs:\n    +     total += x\n" in text


def test_a_rewrite_or_the_same_statements_keep_the_whole_program():
    rewrite = "def f(xs):\n    return sum(xs)\n"
    assert reference_changes("def f(xs):\n    total = 0\n    return total\n", rewrite) is None
    assert reference_changes(INITIAL, INITIAL.replace(OLD, OLD + "  # same")) is None


def _prompt(view: str, exemplar_source: str) -> str:
    task = get_task("model_placement")
    parent = ProgramRecord(id="it00001", iteration=1, source=INITIAL, abstract="greedy", status="ok")
    exemplar = ProgramRecord(id="it00002", iteration=2, source=exemplar_source, abstract="projected",
                             status="ok", combined_score=1.0)
    policy = SearchPolicy.of(RunContext(exemplar_view=view), 0)
    prompt = build_prompt(policy, task, parent, "", [exemplar], 10_000)
    assert prompt.code_ids == ("it00002",)
    return prompt.messages()[-1].content


def test_the_first_ask_shows_a_reference_by_its_changes_only_when_asked():
    whole = _prompt("program", BETTER_PROGRAM)
    changes = _prompt("changes", BETTER_PROGRAM)
    assert whole.count("```python\n") == 2 and NEW[:40] in whole  # the parent's block and the reference's
    assert changes.count("```python\n") == 1 and f"+ {NEW}" in changes
    assert len(changes) < len(whole) - len(INITIAL) / 2
    rewrite = "def place(models, gpus):\n    return {g: [] for g in gpus}\n"  # nothing like the parent
    assert _prompt("changes", rewrite).count("```python\n") == 2
