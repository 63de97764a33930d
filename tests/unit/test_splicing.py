"""The functions edit form: whole functions spliced into the parent by name.

See contextevolve.program.splicing.
"""

from __future__ import annotations

from dataclasses import replace

import pytest
from langchain_core.messages import HumanMessage

from contextevolve.llm.models import use_chat_models
from contextevolve.program.docstrings import without_docstrings
from contextevolve.program.forms import build_child, edit_form
from contextevolve.program.replies import EditError
from contextevolve.program.splicing import apply_functions
from contextevolve.prompts import generator
from tests.fakes import INITIAL, reply, scripted

PARENT = '''"""A program with fixed parts around its block."""
import math

SCALE = 3

# EVOLVE-BLOCK-START
import heapq

LIMIT = 5


def helper(x):
    return x + 1


def solve(a, b):
    return helper(a) + b
# EVOLVE-BLOCK-END


def run():
    return solve(1, 2)
'''


def _run(source: str) -> int:
    scope: dict = {}
    exec(compile(source, "<child>", "exec"), scope)  # noqa: S102 - the test's own programs
    return scope["run"]()


def test_a_changed_function_replaces_the_parents_and_a_new_one_is_added_before_it():
    reply = ("Here is the change.\n```python\nimport itertools\nimport heapq\n\n"
             "def double(v):\n    return v * 2\n\n"
             "def solve(a, b):\n    return double(helper(a)) + b + LIMIT\n\nif __name__ == '__main__':\n"
             "    print(solve(1, 2))\n```\nThis doubles the helper's value.")
    child = build_child(PARENT, reply, "functions")
    assert _run(child) == 2 * 2 + 2 + 5
    assert child.count("import heapq") == 1 and "import itertools" in child  # imports merged once
    assert child.index("def double") < child.index("def solve") < child.index("# EVOLVE-BLOCK-END")
    assert "__main__" not in child  # statements that are not definitions are dropped
    assert (child.startswith('"""A program with fixed parts')
            and child.endswith("def run():\n    return solve(1, 2)\n"))


def test_a_page_break_in_the_parent_does_not_move_the_splice():
    """A form feed is an ordinary character to Python: lines are counted as its AST counts them."""
    parent = PARENT.replace("LIMIT = 5\n", "LIMIT = 5\n\x0c\n")
    child = build_child(parent, "```python\ndef helper(x):\n    return x + 2\n```", "functions")
    assert child == parent.replace("return x + 1", "return x + 2") and _run(child) == 5


def test_constants_and_functions_in_separate_blocks_are_all_spliced():
    reply = "```python\nLIMIT = 7\n```\nand\n```python\ndef helper(x):\n    return x - 1\n```"
    child = build_child(PARENT, reply, "functions")
    assert "LIMIT = 7" in child and "LIMIT = 5" not in child and "return x - 1" in child
    assert _run(child) == 0 + 2


def test_a_whole_program_reply_works_as_a_rewrite_of_every_definition():
    child = build_child(PARENT, f"```python\n{PARENT.replace('helper(a) + b', 'helper(a) * b')}```",
                        "functions")
    assert _run(child) == 4 and child.count("def solve") == 1


def test_refusals_name_the_problem():
    with pytest.raises(EditError, match="outside the EVOLVE-BLOCK"):
        apply_functions(PARENT, "```python\ndef run():\n    return 0\n```")
    with pytest.raises(EditError, match="defines no function"):
        apply_functions(PARENT, "```python\nprint(solve(1, 2))\n```")
    with pytest.raises(EditError, match="do not parse"):
        apply_functions(PARENT, "```python\ndef solve(a, b):\n    return (\n```")
    with pytest.raises(EditError, match="no code"):
        apply_functions(PARENT, "I would rather not.")
    with pytest.raises(EditError, match="cut off"):
        build_child(PARENT, "```python\ndef solve(a, b):\n    return (", "functions", truncated=True)
    with pytest.raises(EditError, match="identical") as raised:
        build_child(PARENT, "```python\ndef helper(x):\n    return x + 1\n```", "functions")
    assert raised.value.unchanged


def test_a_program_without_markers_takes_new_imports_after_its_own():
    parent = '"""doc"""\nfrom __future__ import annotations\nimport os\n\n\ndef f():\n    return 1\n'
    child = apply_functions(parent, "```python\nimport sys\n\n"
                                    "def f():\n    return len(sys.argv) * 0 + 2\n```")
    assert child.index("import os") < child.index("import sys") < child.index("def f")
    scope: dict = {}
    exec(child, scope)  # noqa: S102
    assert scope["f"]() == 2


def test_the_mp_initial_program_takes_a_one_function_edit():
    body = INITIAL[INITIAL.index("def compute_model_placement"):INITIAL.index("# EVOLVE-BLOCK-END")]
    edited = body.replace("kvpr = load[gpu_id] / free_mem[gpu_id]",
                          "kvpr = (load[gpu_id] + 1e-9) / free_mem[gpu_id]")
    assert edited != body
    child = build_child(INITIAL, f"```python\n{edited}```", "functions")
    assert "(load[gpu_id] + 1e-9)" in child and child.count("def compute_model_placement") == 1


def test_prompts_in_functions_mode_ask_for_the_changed_functions_only_and_share_their_start():
    functions = edit_form("functions")
    gen = generator.generator_prompt("TASK", "## Current program\n```python\nx\n```", "go", [], functions,
                                     True, "x\n").messages()
    again = generator.reask_messages("TASK", "x = 1\n", "change a constant", True, functions)
    for msgs in (gen, again):
        assert "only the top-level functions" in msgs[-1].content
        assert msgs[0].content == generator.SYSTEM and msgs[1].content.startswith("## Task\nTASK\n\n")
    full = generator.generator_prompt("T", "p", "", [], edit_form("full"), True, "p").messages()
    assert "complete improved program" in full[-1].content


def test_a_function_rewritten_without_its_docstring_keeps_the_parents():
    parent = ('# EVOLVE-BLOCK-START\ndef solve(a, b):\n    """Add a and b.\n\n    Returns:\n'
              '        the sum.\n    """\n'
              '    return a + b\n# EVOLVE-BLOCK-END\n')
    child = build_child(parent, "```python\ndef solve(a, b):\n        return b + a\n```", "functions")
    assert ('        """Add a and b.\n\n        Returns:\n            the sum.\n        """\n'
            '        return b + a') in child
    # a reply with its own docstring keeps it
    own = build_child(parent, '```python\ndef solve(a, b):\n    """Sum."""\n    return b + a\n```',
                      "functions")
    assert '"""Sum."""' in own and "Add a and b" not in own


def test_a_rewrite_without_docstrings_gets_the_parents_back():
    from contextevolve.program.splicing import restore_docstrings

    parent = ('"""Module."""\n# EVOLVE-BLOCK-START\ndef solve(a, b):\n    """Add a and b."""\n'
              '    # the plain sum\n    return a + b\n\n\ndef helper(x):\n    """Double x."""\n'
              '    return 2 * x\n# EVOLVE-BLOCK-END\n')
    reply = ("```python\n# EVOLVE-BLOCK-START\ndef solve(a, b):\n    # the plain sum\n    return b + a\n\n\n"
             'def helper(x):\n    """Twice x."""\n    return x + x\n\n\n'
             'def extra():\n    return 0\n# EVOLVE-BLOCK-END\n```')
    child = restore_docstrings(parent, build_child(parent, reply, "full"))
    assert child.startswith('"""Module."""\n')  # the fixed part, as the parent has it
    # the parent's docstring comes back above the comment that opens the body
    assert 'def solve(a, b):\n    """Add a and b."""\n    # the plain sum\n    return b + a' in child
    assert '"""Twice x."""' in child and "Double x" not in child  # the reply's own docstring is kept
    assert "def extra():\n    return 0" in child  # nothing to restore from
    assert restore_docstrings(parent, "def solve(:\n") == "def solve(:\n"  # does not parse: unchanged
    # a decorated first statement: the docstring goes above its decorator
    parent = 'class Plan:\n    """A plan."""\n\n    @staticmethod\n    def cost(x):\n        return x\n'
    child = restore_docstrings(parent,
                               "class Plan:\n    @staticmethod\n    def cost(x):\n        return 2 * x\n")
    assert (child.startswith('class Plan:\n    """A plan."""\n    @staticmethod\n')
            and compile(child, "c", "exec"))
    # a body on the last line of a multi-line signature has no line to go above: left as it is
    parent = 'def f(a,\n      b):\n    """Sum."""\n    return a + b\n'
    assert (restore_docstrings(parent, "def f(a,\n      b): return b + a\n")
            == "def f(a,\n      b): return b + a\n")


def test_with_docstrings_hidden_a_generated_rewrite_keeps_them(tmp_path):
    from contextevolve.graph.context import RunContext
    from contextevolve.loop import requests
    from contextevolve.loop.policy import SearchPolicy

    parent = ('# EVOLVE-BLOCK-START\ndef solve(a, b):\n    """Add a and b."""\n    return a + b\n'
              '# EVOLVE-BLOCK-END\n')
    answer = reply("```python\n# EVOLVE-BLOCK-START\ndef solve(a, b):\n    return b + a\n"
                   "# EVOLVE-BLOCK-END\n```")
    ctx = RunContext(max_retries=0)  # the full form: it shows docstrings, an ask after a twin does not
    for hidden, kept in ((True, True), (False, False)):
        request = requests.first(SearchPolicy.of(ctx, 0), [HumanMessage("x")], "go", base=parent)
        with use_chat_models(generator=scripted(answer)):
            out, = requests.send(ctx, replace(request, hidden_view=hidden))
        assert ('"""Add a and b."""' in out.source) is kept and "return b + a" in out.source


def test_the_generator_sees_programs_without_docstrings_in_functions_mode_only():
    from contextevolve.graph.context import RunContext
    from contextevolve.loop.composing import build_prompt
    from contextevolve.loop.policy import SearchPolicy
    from contextevolve.memory.records import ProgramRecord
    from contextevolve.tasks.registry import get_task

    task = get_task("model_placement")
    parent = ProgramRecord(id="it00000", iteration=0, source=INITIAL, abstract="greedy", status="ok")

    def shown(form):
        policy = SearchPolicy.of(RunContext(edit_form=form), 0)
        return build_prompt(policy, task, parent, "", [], 10_000).messages()[-1].content

    assert "Returns:" in shown("full") and "Returns:" in shown("diff")  # SEARCH must match the program
    hidden = shown("functions")
    assert "Returns:" not in hidden and without_docstrings(INITIAL) in hidden


def test_a_class_rewritten_without_docstrings_gets_its_methods_back():
    from contextevolve.program.splicing import restore_docstrings

    parent = ('class Plan:\n    """A plan."""\n\n    def __init__(self, n):\n        """Make n slots."""\n'
              '        self.n = n\n\n'
              '    @staticmethod\n    def cost(x):\n        """Twice x.\n\n        Returns:\n'
              '            a number.\n        """\n'
              '        return x\n\n    class Inner:\n        """Nested."""\n        def go(self):\n'
              '            """Go."""\n'
              '            return 1\n')
    child = ('class Plan:\n    def __init__(self, n):\n        # slots\n        self.n = n + 0\n\n'
             '    @staticmethod\n'
             '    def cost(x):\n        return 2 * x\n\n    def new(self):\n        return 3\n\n'
             '    class Inner:\n'
             '        def go(self): return 2\n')
    wanted = ('class Plan:\n    """A plan."""\n    def __init__(self, n):\n        """Make n slots."""\n'
              '        # slots\n'
              '        self.n = n + 0\n\n    @staticmethod\n    def cost(x):\n        """Twice x.\n\n'
              '        Returns:\n'
              '            a number.\n        """\n        return 2 * x\n\n    def new(self):\n'
              '        return 3\n\n'
              '    class Inner:\n        """Nested."""\n        def go(self): return 2\n')
    assert restore_docstrings(parent, child) == wanted  # a one-line method is left as it is
    # the functions splice keeps them too
    region = "# EVOLVE-BLOCK-START\n" + parent + "# EVOLVE-BLOCK-END\n"
    assert apply_functions(region, f"```python\n{child}```") == (
        "# EVOLVE-BLOCK-START\n" + wanted + "# EVOLVE-BLOCK-END\n")
    # a method that would not parse with the docstring (body on its signature's last line) is left alone
    parent = 'class A:\n    def f(self,\n          b):\n        """Sum."""\n        return b\n'
    child = 'class A:\n    def f(self,\n          b): return b + 1\n'
    assert restore_docstrings(parent, child) == child
