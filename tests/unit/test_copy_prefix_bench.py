"""benchmarks/copy_prefix.py: code lines of a reply, the prefix it copies, and where a copy could stop."""

from __future__ import annotations

import json

from benchmarks import copy_prefix as bench

PARENT = '''"""Module docstring."""

import random


def pick(items):
    """Pick one item.

    Uniformly at random.
    """
    # a comment the model may drop
    choice = random.choice(items)  # trailing note
    return choice


def order(items):
    items = sorted(items)
    return items
'''


def test_code_lines_leave_out_docstrings_comments_and_blank_lines():
    assert bench.code_lines(PARENT) == ["import random", "def pick(items):", "choice = random.choice(items)",
                                        "return choice", "def order(items):", "items = sorted(items)",
                                        "return items"]


def test_a_copy_with_reworded_docstrings_copies_every_line_and_a_change_stops_the_prefix():
    twin = ("```python\n"
            + PARENT.replace("Pick one item.", "Improved: pick one item.").replace(
                "    # a comment the model may drop\n", "")
            + "```")
    assert bench.copied_prefix(PARENT, twin) == 7
    changed = ("```python\n" + PARENT.replace("items = sorted(items)", "items = sorted(items, reverse=True)")
               + "```")
    assert bench.copied_prefix(PARENT, changed) == 5
    assert bench.copied_prefix(PARENT, "no code at all") == 0


def test_decoded_share_grows_with_the_lines_copied(tmp_path, capsys, monkeypatch):
    reply = "```python\n" + PARENT + "```"
    shares = [bench.decoded_share(reply, n) for n in (1, 4, 7)]
    assert shares == sorted(shares) and shares[0] < 0.5 and shares[-1] < 1.0
    assert bench.decoded_share(reply, 8) == 1.0  # never reached

    run = tmp_path / "r1"  # a one-iteration run as benchmarks/sampling.py reads it
    run.mkdir()
    records = [{"id": "it00000", "iteration": 0, "source": PARENT, "combined_score": 1.0, "parent_id": None},
               {"id": "it00001", "iteration": 1, "source": "", "combined_score": 0.0, "parent_id": "it00000"}]
    (run / "programs.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    (run / "prompts.jsonl").write_text(json.dumps({"role": "generator", "attempt": 1, "messages": [],
                                                   "reply": "", "usage": {}, "truncated": False}) + "\n")
    out = tmp_path / "sampling.json"
    out.write_text(json.dumps({"configs": {"stored": {}}, "results": {"stored": [
        {"run": "r1", "iteration": 1, "sample": 0, "mode": "full", "reply": reply, "completion": 90,
         "outcome": "twin"},
        {"run": "r1", "iteration": 1, "sample": 1, "mode": "diff", "reply": "x", "completion": 9,
         "outcome": "ok"}]}}))
    monkeypatch.setattr("sys.argv", ["copy_prefix.py", str(out), "--runs-root", str(tmp_path)])
    assert bench.main() == 0
    rows = [line for line in capsys.readouterr().out.splitlines() if line.startswith("| stored")]
    assert len(rows) == 1 and "| twin | 7/7 | 90 |" in rows[0]  # the diff-form reply is not costed
