"""Generator output handling: rewrites, diffs, EVOLVE-BLOCK regions, and every malformed-output reason."""

from __future__ import annotations

import pytest

from contextevolve.llm.parsing import parse_json_object
from contextevolve.nodes.sample import parse_choice
from contextevolve.program.docstrings import without_docstrings
from contextevolve.program.edits import apply_diffs, parse_diffs
from contextevolve.program.forms import build_child, edit_form, edit_format
from contextevolve.program.replies import EditError, extract_code
from contextevolve.prompts.generator import SYSTEM, reask_messages

PARENT = "import math\nX = 1\n# EVOLVE-BLOCK-START\ndef f(a):\n    return a + X\n# EVOLVE-BLOCK-END\nY = 2\n"


def test_extract_prefers_largest_python_block():
    text = "```\nnot this\n```\nthen\n```python\ndef f():\n    return 1\n```\n```python\nx=1\n```"
    assert extract_code(text) == "def f():\n    return 1\n"


def test_extract_rejects_prose():
    with pytest.raises(EditError, match="no code block"):
        extract_code("I would sort the models first.")


def test_rewrite_replaces_only_the_evolve_block():
    reply = "```python\nimport math\nX = 1\ndef f(a):\n    return a * 2\n```"
    child = build_child(PARENT, reply, "full")
    assert child.startswith("import math\nX = 1\n# EVOLVE-BLOCK-START\ndef f(a):\n    return a * 2\n")
    assert child.count("import math") == 1
    assert child.endswith("# EVOLVE-BLOCK-END\nY = 2\n")


def test_rewrite_with_markers_takes_inner_block():
    reply = ("```python\nimport os\n# EVOLVE-BLOCK-START\ndef f(a):\n    return 0\n"
             "# EVOLVE-BLOCK-END\nZ=3\n```")
    child = build_child(PARENT, reply, "full")
    assert "Z=3" not in child and "return 0" in child
    # only a new import outside the markers survives, moved inside the block
    assert child.index("# EVOLVE-BLOCK-START") < child.index("import os") < child.index("# EVOLVE-BLOCK-END")


def test_diff_applies_inside_block():
    reply = "<<<<<<< SEARCH\n    return a + X\n=======\n    return a - X\n>>>>>>> REPLACE"
    assert "return a - X" in build_child(PARENT, reply, "diff")


@pytest.mark.parametrize("reply, reason", [
    ("<<<<<<< SEARCH\n    return a + Q\n=======\n    return 0\n>>>>>>> REPLACE", "not found"),
    ("<<<<<<< SEARCH\nY = 2\n=======\nY = 3\n>>>>>>> REPLACE", "outside the EVOLVE-BLOCK"),
    ("<<<<<<< SEARCH\nX\n=======\nZ\n>>>>>>> REPLACE", "occurs"),
])
def test_bad_diffs_are_rejected(reply, reason):
    with pytest.raises(EditError, match=reason):
        apply_diffs(PARENT, reply)


def test_syntax_error_and_truncation_are_reasons():
    with pytest.raises(EditError, match="syntax error at line"):
        build_child(PARENT, "```python\ndef f(a:\n```", "full")
    with pytest.raises(EditError, match="cut off"):
        build_child(PARENT, "```python\ndef f(a):\n    return [1,", "full", truncated=True)


def test_identical_child_is_rejected():
    with pytest.raises(EditError, match="identical"):
        build_child(PARENT, f"```python\n{PARENT}```", "full")


@pytest.mark.parametrize("text, expected", [
    ('{"exemplars": [2, 3]}', [1, 2]),
    ('Sure! ```json\n{"exemplars": ["[3]", "1"], "why": "x"}\n```', [2, 0]),
    ('{"exemplars": 4}', [3]),
    ("I pick 2 and 9 and 2", [1]),
    ('{\n  "exemplars": [2, 5', [1, 4]),  # cut at the list's end (the Sampler's stop sequence)
    ('{"why": "1 is old", "exemplars": [3, 4', [2, 3]),  # only the numbers after the key
    ('{"exemplars": [4, 1', [3, 0]),  # cut at the list's end, the "why" never written
    ("nothing useful", None),
])
def test_sampler_reply_parsed_tolerantly(text, expected):
    assert parse_choice(text, n_candidates=5, k=2) == expected


def test_parse_json_object_skips_junk():
    assert parse_json_object("x {bad} y {\"a\": 1} z") == {"a": 1}
    assert parse_json_object("[1, 2]") is None


def test_an_import_added_above_the_block_moves_into_it():
    """The embedded model often adds ``import heapq`` at the top of the file, outside the markers."""
    parent = "X = 1\n# EVOLVE-BLOCK-START\ndef f(a):\n    return a\n# EVOLVE-BLOCK-END\n"
    reply = ("```python\nimport heapq\nfrom typing import List\nX = 1\n# EVOLVE-BLOCK-START\ndef f(a):\n"
             "    return heapq.nsmallest(1, [a])[0]\n# EVOLVE-BLOCK-END\n```")
    child = build_child(parent, reply, "full")
    assert child.startswith("X = 1\n# EVOLVE-BLOCK-START\nimport heapq\nfrom typing import List\ndef f(a):")
    assert child.count("X = 1") == 1
    namespace: dict = {}
    exec(compile(child, "child", "exec"), namespace)
    assert namespace["f"](3) == 3


def test_fenced_edits_in_full_mode_are_applied_as_edits():
    """Seen with the embedded model: a repair in full mode answered with edits inside a python fence."""
    reply = "```python\n<<<<<<< SEARCH\n    return a + X\n=======\n    return a - X\n>>>>>>> REPLACE\n```"
    assert "return a - X" in build_child(PARENT, reply, "full")


LOOP = ("# EVOLVE-BLOCK-START\ndef g(items):\n    total = 0\n    for item in items:\n\n"
        "        total += item\n    return total\n# EVOLVE-BLOCK-END\n")


@pytest.mark.parametrize("search, replace", [
    # dedented by the model: found, and its replacement is indented back
    ("for item in items:\n    total += item", "for item in sorted(items):\n    total += 2 * item"),
    # blank line dropped, trailing spaces added
    ("    for item in items:   \n        total += item",
     "    for item in sorted(items):\n        total += 2 * item"),
])
def test_a_search_differing_only_in_whitespace_still_applies(search, replace):
    child = apply_diffs(LOOP, f"<<<<<<< SEARCH\n{search}\n=======\n{replace}\n>>>>>>> REPLACE")
    assert "    for item in sorted(items):\n        total += 2 * item\n    return total\n" in child
    compile(child, "child", "exec")


def test_a_loose_search_must_still_be_unique_and_present():
    twice = LOOP.replace("    return total\n",
                         "    for item in items:\n        total += item\n    return total\n")
    reply = "<<<<<<< SEARCH\nfor item in items:\n    total += item\n=======\npass\n>>>>>>> REPLACE"
    with pytest.raises(EditError, match="not found"):
        apply_diffs(twice, reply)
    with pytest.raises(EditError, match="not found"):
        apply_diffs(LOOP, reply.replace("for item in items:\n    total += item",
                                        "while queue:\n    queue.pop()"))
    # one changed character is a near match, applied where the model meant it
    assert "    pass\n    return total" in apply_diffs(LOOP, reply.replace("total += item", "total -= item"))


def test_edit_markers_without_arrows_still_parse():
    reply = "SEARCH\n    return a\n=======\n    return a + 1\nREPLACE\n"
    assert "return a + 1" in apply_diffs(PARENT, reply)
    assert "return a * 2" in apply_diffs(PARENT,
                                         "<<< SEARCH\n    return a\n===\n    return a * 2\n>>> REPLACE")


def test_the_edit_format_example_is_made_of_the_programs_own_statements():
    program = ('import math\n# EVOLVE-BLOCK-START\ndef f(xs):\n    """Sum.\n\n    Args:\n'
               '        xs: numbers.\n    """\n'
               '    total = 0\n    for x in xs:\n        total += x\n    return total\n# EVOLVE-BLOCK-END\n')
    text = edit_format(program)
    search = text.split("<<<<<<< SEARCH\n")[1].split("\n=======")[0]
    assert search == "    total = 0\n    for x in xs:"  # statements, not the docstring
    # copied verbatim, the example changes nothing: a twin, never a broken program
    with pytest.raises(EditError) as raised:
        build_child(program, text, "diff")
    assert raised.value.unchanged


def test_a_search_written_as_the_model_believes_the_program_reads_is_matched_to_the_closest_lines():
    parent = ("# EVOLVE-BLOCK-START\ndef place(models):\n"
              "    ordered = sorted(models, key=lambda m: m.rate / m.slo, reverse=True)\n"
              "    placement = {}\n    return ordered, placement\n# EVOLVE-BLOCK-END\n")
    reply = ("<<<<<<< SEARCH\n"
             "  ordered = sorted(models, key=lambda m: m.rate / m.slo + m.size, reverse=True)\n"
             "=======\n"
             "  ordered = sorted(models, key=lambda m: m.size, reverse=True)\n>>>>>>> REPLACE")
    child = build_child(parent, reply, "diff")
    assert "    ordered = sorted(models, key=lambda m: m.size, reverse=True)\n    placement = {}\n" in child
    # nothing close enough: still an error naming the SEARCH text
    with pytest.raises(EditError, match="not found"):
        apply_diffs(parent, "<<<<<<< SEARCH\n    heap = build_heap(gpus, capacity)\n=======\n"
                            "    heap = []\n>>>>>>> REPLACE")


def test_edits_headed_search_and_replace_without_separator_parse():
    reply = ("```\nSEARCH\n    return a + X\nREPLACE\n    return a * X\n```\n")
    assert parse_diffs(reply) == [("    return a + X", "    return a * X")]
    assert "    return a * X\n" in build_child(PARENT, reply, "diff")
    two = ("SEARCH\n    return a + X\nREPLACE\n    return a * X\n>>>>>>> REPLACE\n"
           "SEARCH\nY = 2\nREPLACE\nY = 3\n")
    assert parse_diffs(two) == [("    return a + X", "    return a * X"), ("Y = 2", "Y = 3")]


def test_a_fragment_is_not_taken_for_the_whole_program():
    with pytest.raises(EditError, match="fragment") as raised:
        build_child(PARENT, "```python\n    return a * X\n```", "diff")
    assert raised.value.source == ""  # nothing to repair from: a repair starts from the parent
    assert "return a * X" in build_child(PARENT, "```python\ndef f(a):\n    return a * X\n```", "full")


def test_novelty_ignores_comments_docstrings_and_unused_imports_but_not_code():
    from contextevolve.program.twins import normalized_code

    base = 'import math\n\ndef f(x):\n    """Doc."""\n    return math.sqrt(x)\n'
    same = [
        "import math\n\ndef f(x):\n    # a comment\n    return math.sqrt(x)\n",
        'import math\nimport pandas as pd\n\ndef f(x):\n    """Other doc."""\n    return math.sqrt(x)\n',
        "import math, heapq\nfrom typing import List\n\n"
        "def f(x):\n    import random\n    return math.sqrt(x)\n",
    ]
    assert {normalized_code(s) for s in same} == {normalized_code(base)}
    different = [
        "import math\n\ndef f(x):\n    return math.sqrt(x) + 1\n",
        # used: kept
        "import math\nimport heapq\n\ndef f(x):\n    heapq.heapify([])\n    return math.sqrt(x)\n",
        "from math import *\n\ndef f(x):\n    return sqrt(x)\n",
    ]
    assert normalized_code(base) not in {normalized_code(s) for s in different}
    assert len({normalized_code(s) for s in different}) == 3
    assert normalized_code("def (:\n") is None


def test_novelty_given_the_entry_ignores_helpers_nothing_calls():
    """Given the task's entry function, helpers nothing calls do not make a program new.

    Salvaged transaction-scheduling programs (a measured experiment) kept only classes the model
    added and never used; with the task's entry function named, such code does not make a program new.
    """
    from contextevolve.program.twins import normalized_code

    base = "def f(x):\n    return x + 1\n"
    dead = base + ("\n\nclass State:\n    def go(self):\n        return helper()\n\n\n"
                   "def helper():\n    return 2\n")
    assert normalized_code(dead, "f") == normalized_code(base, "f")  # helper is read only by dead code
    assert normalized_code(dead) != normalized_code(base)  # without the entry nothing is dropped
    called = "def helper():\n    return 2\n\n\ndef f(x):\n    return x + helper()\n"
    assert normalized_code(called, "f") != normalized_code("def f(x):\n    return x + 2\n", "f")
    decorated = base + "\n\n@register\ndef hook():\n    return 1\n"  # a decorator may register it
    assert normalized_code(decorated, "f") != normalized_code(base, "f")
    assert (normalized_code("def g(x):\n    return x\n", "f")
            != normalized_code("def h(x):\n    return x\n", "f"))


def test_novelty_without_annotations_ignores_the_type_hints_of_functions_only():
    """A copy that only adds type hints (the embedded model's favourite) runs the same.

    Without annotations it has its original's digest. Class-level annotations stay (a dataclass reads
    them) and so does any change of what runs.
    """
    from contextevolve.program.twins import normalized_code

    base = "def f(x, *rest, k=1):\n    y = x + k\n    return y\n"
    hinted = ("from typing import List\n\n\ndef f(x: int, *rest: List[int], k: int = 1) -> int:\n"
              "    y: int = x + k\n    return y\n")
    assert normalized_code(hinted, "f", annotations=False) == normalized_code(base, "f", annotations=False)
    assert normalized_code(hinted, "f") != normalized_code(base, "f")  # the default identity keeps them
    changed = hinted.replace("x + k", "x + 2 * k")
    assert normalized_code(changed, "f", annotations=False) != normalized_code(base, "f", annotations=False)
    fields = "from dataclasses import dataclass\n\n\n@dataclass\nclass P:\n    a: {} = 0\n"
    assert (normalized_code(fields.format("int"), annotations=False)
            != normalized_code(fields.format("ClassVar[int]"), annotations=False))
    bare = "def f(x):\n    y: int\n    return x\n"  # a bare annotation makes y local: it stays a statement
    assert normalized_code(bare, "f", annotations=False) != normalized_code("def f(x):\n    return x\n", "f",
                                                                           annotations=False)


def test_a_parse_that_ran_out_of_memory_is_not_remembered(monkeypatch):
    """The digest is cached, but running out of memory or stack depends on the moment.

    The next call on the same source must parse again and give the real digest.
    """
    import ast

    from contextevolve.program import twins as editing

    source = "def f(x):\n    return x * 7919\n"  # a source no other test digests
    real_parse, calls = ast.parse, []

    def parse_once_out_of_memory(*args, **kwargs):
        calls.append(1)
        if len(calls) == 1:
            raise MemoryError
        return real_parse(*args, **kwargs)

    monkeypatch.setattr(editing.ast, "parse", parse_once_out_of_memory)
    assert editing.normalized_code(source, "f") is None
    digest = editing.normalized_code(source, "f")
    assert digest is not None and len(digest) == 64
    assert editing.normalized_code(source, "f") == digest and len(calls) == 2  # now cached


def test_the_second_ask_shows_the_program_without_docstrings_and_names_one_change():
    program = ('"""Module doc."""\n\nimport random\n\n# EVOLVE-BLOCK-START\n\n\ndef pick(xs):\n'
               '    """Pick one.\n\n    Longer text.\n    """\n    # keep the first\n    return xs[0]\n\n\n'
               '# EVOLVE-BLOCK-END\n')
    stripped = without_docstrings(program)
    assert stripped == ('\nimport random\n\n# EVOLVE-BLOCK-START\n\n\ndef pick(xs):\n    # keep the first\n'
                        '    return xs[0]\n\n\n# EVOLVE-BLOCK-END\n')
    assert without_docstrings("def broken(:\n") == "def broken(:\n"  # does not parse: unchanged
    system, request = reask_messages("Pick well.", program, "reverse the order", False, edit_form("full"))
    assert "complete improved program" in request.content and "## Task\nPick well." in request.content
    assert system.content == SYSTEM  # every Generator-model request starts alike (the prompt cache)
    assert stripped in request.content and "Longer text" not in request.content
    assert "reverse the order" in request.content and "lowers the score" in request.content


@pytest.mark.parametrize("program, expected", [
    # a docstring sharing its line with the def and the next statement: only it and its ";" go
    ('def f(): "doc"; return 1\n', "def f(): return 1\n"),
    ('def h():\n    """a"""; x = 1\n    return x\n', "def h():\n    x = 1\n    return x\n"),
    # a comment after the docstring stays on its own line
    ('def g():\n    """\u00e9 doc"""  # why\n    return "\u00fc"\n',
     'def g():\n    # why\n    return "\u00fc"\n'),
    # a string opening an if body is not a docstring
    ('def k(x):\n    if x:\n        "note"\n        return 1\n    return 2\n',
     'def k(x):\n    if x:\n        "note"\n        return 1\n    return 2\n'),
    # a docstring that is the whole body stays: the class would not parse without it
    ('class E(Exception):\n    """Only this."""\n', 'class E(Exception):\n    """Only this."""\n'),
    ('"""Only a module docstring."""\n', ""),
    # a form feed (a page break) is no line end to Python: the lines after it keep their numbers
    ('\x0c\n\x0c\nz = 12345678\ndef f():\n    """d"""\n    return z\n',
     '\x0c\n\x0c\nz = 12345678\ndef f():\n    return z\n'),
    ('def f():\r\n    """d"""\r\n    return 1\r\n', "def f():\r\n    return 1\r\n"),
])
def test_without_docstrings_removes_only_the_docstrings(program, expected):
    stripped = without_docstrings(program)
    assert stripped == expected
    compile(stripped, "stripped", "exec")
