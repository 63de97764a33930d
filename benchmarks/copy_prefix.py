"""How far whole-program replies copy their parent before they change it: would stopping a copy early pay?

A twin (a reply that gives its parent back) costs a whole program's worth of decoding. A request
could be streamed and stopped once the reply has copied "enough" of its parent, but only if real
changes start early in the reply and the copied part is cheap to give up. This script measures both
on the replies a ``benchmarks/sampling.py`` run stored (its ``--out`` JSON, replies in the ``full``
edit form):

* per reply: its outcome and the *copied prefix*, the number of the parent's code lines the reply
  repeats, in order, before its first changed line (code lines: stripped, whitespace collapsed;
  blank lines, comments and docstrings left out, since a twin may reword those);
* per twin: the share of the reply's characters already decoded when it had copied 50, 60, 75 and
  90 % of its code lines, i.e. what a stop at that point would have left undecoded (one minus it).

Usage:
    python benchmarks/copy_prefix.py runs/sampling.json [--runs-root runs]
"""

from __future__ import annotations

import argparse
import json
import math
import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.sampling import first_prompts

SHARES = (0.5, 0.6, 0.75, 0.9)
"""Shares of a twin's code lines at which a stop is costed."""
CODE_BLOCK = re.compile(r"```(?:python)?\n(.*?)(?:```|$)", re.S)


def code_lines(text: str) -> list[str]:
    """The code lines of the first fenced block of ``text`` (or of ``text``, unfenced), in order.

    Each stripped, whitespace collapsed, trailing ``  #`` comments cut; blank lines, comment lines and
    triple-quoted strings that open a line (docstrings) left out. Works on a reply cut anywhere.
    """
    match = CODE_BLOCK.search(text)
    lines, quote = [], None
    for line in (match.group(1) if match else text).splitlines():
        stripped = line.strip()
        if quote:  # inside a docstring
            quote = None if quote in stripped else quote
            continue
        if stripped.startswith(('"""', "'''")):
            opener = stripped[:3]
            quote = opener if stripped.count(opener) == 1 else None
            continue
        if stripped and not stripped.startswith("#"):
            lines.append(" ".join(stripped.split("  #")[0].split()))
    return lines


def copied_prefix(parent: str, reply: str) -> int:
    """Number of ``parent``'s code lines :func:`code_lines` finds repeated, in order, at ``reply``'s start."""
    ours, theirs = code_lines(parent), code_lines(reply)
    count = 0
    while count < min(len(ours), len(theirs)) and ours[count] == theirs[count]:
        count += 1
    return count


def decoded_share(reply: str, lines: int) -> float:
    """Share of ``reply``'s characters decoded when its first ``lines`` code lines were whole (1.0: never)."""
    seen = ""
    for line in reply.splitlines(keepends=True):
        seen += line
        if len(code_lines(seen)) >= lines:
            return len(seen) / max(len(reply), 1)
    return 1.0


def main() -> int:
    """Print the copied prefix of every stored whole-program reply and what a stop would leave undecoded."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("replies", type=Path, help="a benchmarks/sampling.py --out file")
    parser.add_argument("--runs-root", type=Path, default=Path("runs"), help="where the replayed runs are")
    args = parser.parse_args()
    results = json.loads(args.replies.read_text())["results"]
    parents: dict[tuple[str, int], str] = {}
    print("| config | run | iteration | sample | outcome | copied prefix (code lines) | completion tokens | "
          + " | ".join(f"decoded at {int(s * 100)} %" for s in SHARES) + " |")
    print("|---" * (7 + len(SHARES)) + "|")
    for name, rows in results.items():
        for row in rows:
            if row.get("mode", "full") != "full" or "reply" not in row:
                continue  # another edit form than a whole program, or a file from before replies were kept
            key = (row["run"], row["iteration"])
            if key not in parents:
                parents.update({(p["run"], p["iteration"]): p["parent"]
                                for p in first_prompts(args.runs_root / row["run"])})
            parent = parents[key]
            total = len(code_lines(parent))
            twin = row["outcome"] == "twin"
            shares = [f"{decoded_share(row['reply'], math.ceil(s * total)):.2f}" if twin else ""
                      for s in SHARES]
            print(f"| {name} | {row['run']} | {row['iteration']} | {row['sample']} | {row['outcome']} | "
                  f"{copied_prefix(parent, row['reply'])}/{total} | {row['completion']} | "
                  + " | ".join(shares) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
