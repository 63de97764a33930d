"""The ``hole`` second ask: a block of the parent taken out, the function written anew and spliced back."""

from __future__ import annotations

import ast

import pytest

from contextevolve.program.docstrings import without_docstrings
from contextevolve.program.holes import HOLE_MARK, PLACEHOLDER, choose, fill, holes, punched
from contextevolve.program.replies import EditError
from contextevolve.tasks.registry import get_task
from tests.fakes import BETTER_PROGRAM, INITIAL, fenced, reply, scripted
from tests.unit.test_repair import run

TASK = get_task("model_placement")
LOOP = """            if model.model_size <= free_mem[gpu_id] and free_mem[gpu_id] > 0:
                kvpr = load[gpu_id] / free_mem[gpu_id]
                if kvpr < best_kvpr:
                    best_gpu, best_kvpr = gpu_id, kvpr
"""
NEW_LOOP = """            if model.model_size <= free_mem[gpu_id] and free_mem[gpu_id] > 0:
                after = max(free_mem[gpu_id] - model.model_size, 1e-9)
                kvpr = (load[gpu_id] + model.req_rate / model.slo) / after
                if kvpr < best_kvpr:
                    best_gpu, best_kvpr = gpu_id, kvpr
"""


def function_of(program: str) -> str:
    """The program's compute_model_placement, as a reply that writes only it would hold."""
    node = next(n for n in ast.parse(program).body if getattr(n, "name", "") == "compute_model_placement")
    return "\n".join(program.splitlines()[node.lineno - 1:node.end_lineno]) + "\n"


def test_every_hole_is_a_block_of_the_evolved_function_and_the_program_shown_still_parses():
    shown = without_docstrings(INITIAL)
    found = holes(shown)
    assert len(found) >= 4 and {h.function for h in found} == {"compute_model_placement"}
    lines = shown.splitlines()
    for hole in found:
        view = punched(shown, hole)
        ast.parse(view)
        assert view.count(HOLE_MARK) == 1 and PLACEHOLDER in view
        assert len(view.splitlines()) == len(lines) - (hole.end - hole.start)
        first = lines[hole.start - 1]
        assert first.startswith(hole.indent) and first[len(hole.indent)] != " "
    # the loop over GPUs' body is one of them: the kvpr rule is not shown
    body = next(h for h in found if lines[h.start - 1].strip().startswith("if model.model_size <="))
    assert "kvpr = load[gpu_id]" not in punched(shown, body)
    assert choose(shown, len(found) + 1) == found[1]  # counted round


def test_no_hole_outside_the_evolve_block_nor_on_a_line_it_shares():
    program = ("def helper(x):\n    y = x + 1\n    return y\n\n# EVOLVE-BLOCK-START\n"
               "def solve(x):\n    if x: return helper(x)\n    for i in range(3):\n        pass\n"
               "    return helper(0)\n# EVOLVE-BLOCK-END\n")
    found = holes(program)
    assert [(h.function, h.start, h.end) for h in found] == [("solve", 7, 10)]  # only the whole body
    assert holes("def broken(:\n") == [] and choose("x = 1\n", 3) is None


def test_a_reply_that_writes_the_function_anew_is_spliced_into_the_parent_and_scored():
    reply_text = fenced(function_of(INITIAL).replace(LOOP, NEW_LOOP))
    child = fill(INITIAL, reply_text, "compute_model_placement")
    assert NEW_LOOP in child and '"""' in child  # the parent's docstrings kept
    assert TASK.evaluate(child).combined_score == pytest.approx(TASK.evaluate(BETTER_PROGRAM).combined_score)
    with pytest.raises(EditError, match="kept the hole's placeholder"):
        fill(INITIAL, fenced(punched(without_docstrings(INITIAL), holes(without_docstrings(INITIAL))[1])),
             "compute_model_placement")
    with pytest.raises(EditError, match="does not define compute_model_placement"):
        fill(INITIAL, fenced("def other(x):\n    return x\n"), "compute_model_placement")


def test_a_code_twin_is_asked_again_with_a_hole_and_the_reply_becomes_the_child(tmp_path):
    """With ``second_ask='hole'`` the second ask shows the parent without one block and splices the reply."""
    generator = scripted(reply(fenced(INITIAL), 900, 400),  # the first ask writes its parent out again
                         reply(fenced(function_of(INITIAL).replace(LOOP, NEW_LOOP)), 700, 200), cycle=False)
    result, records, _ = run(tmp_path, generator, second_ask="hole")
    second = generator.seen[1][-1].content
    assert HOLE_MARK in second and "Write `compute_model_placement` again" in second
    assert "Make one concrete change" not in second  # not the mutation kind
    child = records[1]
    assert child["status"] == "ok" and NEW_LOOP in child["source"]
    assert child["combined_score"] == pytest.approx(TASK.evaluate(child["source"]).combined_score)
    assert child["tokens"]["generator"] == {"prompt": 1600, "completion": 600}


def test_the_mutation_kind_is_the_default_second_ask(tmp_path):
    generator = scripted(reply(fenced(INITIAL), 900, 400), reply(fenced(BETTER_PROGRAM), 700, 400),
                         cycle=False)
    _, records, _ = run(tmp_path, generator)
    second = generator.seen[1][-1].content
    assert "Make one concrete change" in second and HOLE_MARK not in second
    assert records[1]["status"] == "ok"
