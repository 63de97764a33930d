"""program/changes.py: the lines a child took out of its parent and put in."""

from __future__ import annotations

from contextevolve.program.changes import LINE_CHARS, changed_lines, code_lines

PARENT = '''def choose_victim(cache, stats, now):
    """Return the key to evict."""
    # FIFO
    return min(cache, key=lambda k: stats[k][2])
'''


def test_layout_comments_and_docstrings_are_no_change():
    relaid = 'def choose_victim(cache, stats, now):\n    # LRU, says the comment\n    return min(cache,\n' \
             '               key=lambda k: stats[k][2])\n'
    assert changed_lines(PARENT, relaid) == []
    assert code_lines(PARENT) == ["def choose_victim(cache, stats, now):",
                                  "return min(cache, key=lambda k: stats[k][2])"]


def test_a_changed_statement_is_shown_taken_out_then_put_in():
    child = PARENT.replace("stats[k][2]", "stats[k][0]") + "\nLIMIT = 3\n"
    assert changed_lines(PARENT, child) == ["- return min(cache, key=lambda k: stats[k][2])",
                                            "+ return min(cache, key=lambda k: stats[k][0])",
                                            "+ LIMIT = 3"]


def test_a_program_that_does_not_parse_is_compared_line_by_line_and_long_lines_are_cut():
    broken = PARENT.replace("return", "return (") + "x = " + "1 + " * 60 + "1\n"
    lines = changed_lines(PARENT, broken)
    assert lines[0] == "- return min(cache, key=lambda k: stats[k][2])"  # the docstrings both keep are equal
    assert lines[1] == "+ return ( min(cache, key=lambda k: stats[k][2])"
    assert lines[2].endswith("...") and len(lines[2]) == len("+ ") + LINE_CHARS + 3


def test_a_child_stored_without_its_code_shows_no_change():
    """A copy (code twin) or a child never built is stored with an empty source: it deleted nothing."""
    assert changed_lines(PARENT, "") == [] and changed_lines("", PARENT) == []
