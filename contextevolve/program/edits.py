"""Turning Generator output (untrusted text) into a child program, or a reason it failed.

Two formats are handled here (the third, whole functions spliced in by name, is
:mod:`contextevolve.program.splicing`): a full rewrite, the program inside a fenced code block (the largest
Python block wins), and diffs, one or more ``<<<<<<< SEARCH`` / ``=======`` / ``>>>>>>> REPLACE`` blocks whose
SEARCH part is copied from the parent. When the parent has ``# EVOLVE-BLOCK-START`` / ``# EVOLVE-BLOCK-END``
markers only the region between them may change: a rewrite replaces it (an import added outside the markers
moves to the region's top), a diff whose SEARCH text lies outside it is rejected. The result must compile.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Callable

from contextevolve.program.replies import (
    BLOCK_END,
    BLOCK_START,
    EditError,
    code_blocks,
    evolve_region,
    extract_code,
)

__all__ = ["BLOCK_END", "BLOCK_START", "EditError", "apply_diffs", "apply_rewrite", "child_from",
           "code_blocks", "evolve_region", "extract_code", "parse_diffs"]

_DIFF = re.compile(r"^[ \t]*(?:<{3,9} ?)?SEARCH[ \t]*\n(.*?)\n?^[ \t]*={3,9}[ \t]*\n(.*?)\n?"
                   r"^[ \t]*(?:>{3,9} ?)?REPLACE[ \t]*$", re.S | re.M)
"""A SEARCH/REPLACE block. The markers stand on lines of their own; the ``<<<<<<<``/``>>>>>>>`` arrows
may be shorter or missing (the embedded model wrote a bare ``SEARCH`` line)."""


def apply_rewrite(parent: str, reply: str) -> str:
    """Child from a full-rewrite ``reply``; respects the parent's EVOLVE-BLOCK markers.

    Raises:
        EditError: no code in the reply, or only a fragment of the block (none of the top-level
            functions and classes the parent's block defines; a small model sometimes returns just
            the lines it changed).
    """
    code = extract_code(reply)
    region = evolve_region(parent)
    if region is None:
        return code
    inner = evolve_region(code)
    if inner:
        body = code[inner[0]:inner[1]]
        # an import the model added above or below the markers would be lost with the fixed parts
        imports = _new_imports(parent, code[:inner[0]] + code[inner[1]:])
        body = "".join(line + "\n" for line in imports) + body if imports else body
    else:
        body = _strip_fixed_parts(parent, region, code)
    wanted = _defined(parent[region[0]:region[1]])
    if wanted and not wanted & _defined(body):
        raise EditError(f"the reply is a fragment, not the whole program: it defines none of "
                        f"{', '.join(sorted(wanted))}; reply with SEARCH/REPLACE edits or the complete "
                        "program")
    return parent[:region[0]] + body.rstrip("\n") + "\n\n\n" + parent[region[1]:]


def _defined(code: str) -> set[str]:
    """Names of the top-level functions and classes ``code`` defines (by their ``def``/``class`` lines)."""
    return set(re.findall(r"^(?:async[ \t]+def|def|class)[ \t]+(\w+)", code, re.M))


_IMPORT = re.compile(r"^(?:import\s+[\w.]+(?:\s+as\s+\w+)?(?:\s*,\s*[\w.]+(?:\s+as\s+\w+)?)*"
                     r"|from\s+[\w.]+\s+import\s+[\w*, ()]+)\s*(?:#.*)?$")


def _new_imports(parent: str, outside: str) -> list[str]:
    """Top-level import lines in ``outside`` that the parent does not have.

    ``outside`` is the model's text beyond the EVOLVE-BLOCK markers; the lines returned move into the
    block, where the model's edits may live.
    """
    have = {line.strip() for line in parent.splitlines()}
    return [line.rstrip() for line in outside.splitlines()
            if _IMPORT.match(line) and line.strip() not in have]


def _strip_fixed_parts(parent: str, region: tuple[int, int], code: str) -> str:
    """Drop lines the model copied from the parent's fixed prefix (imports, constants)."""
    fixed = {line.strip() for line in parent[:region[0]].splitlines() if line.strip()}
    fixed |= {line.strip() for line in parent[region[1]:].splitlines() if line.strip()}
    kept = [line for line in code.splitlines() if line.strip() not in fixed or line.startswith((" ", "\t"))]
    return "\n".join(kept).strip("\n") + "\n"


_HEADED = re.compile(r"^[ \t]*SEARCH:?[ \t]*\n(.*?)\n^[ \t]*REPLACE:?[ \t]*\n(.*?)\n?"
                     r"(?=^[ \t]*(?:SEARCH:?|```|>{3,9} ?REPLACE)[ \t]*$|\Z)", re.S | re.M)
"""The embedded model's own edit shape: a ``SEARCH`` line, the old lines, a ``REPLACE`` line, the new
lines."""


def parse_diffs(reply: str) -> list[tuple[str, str]]:
    """The ``(search, replace)`` pairs in ``reply``, in order (``_DIFF`` blocks, else ``_HEADED`` ones)."""
    return [(s, r) for s, r in _DIFF.findall(reply) or _HEADED.findall(reply)]


def _indent(line: str) -> str:
    return line[:len(line) - len(line.lstrip())]


def _loose_match(child: str, search: str, replace: str) -> tuple[str, str]:
    """``search`` as the parent spells it, and ``replace`` shifted alike: ``(found, shifted replace)``.

    A match differs from ``search`` only in whitespace at line ends or in a uniform indentation shift;
    ``("", replace)`` when there is no unique such match. (Small models often re-indent or strip the
    lines they copy.)
    """
    lines, want = child.splitlines(keepends=True), [w for w in search.splitlines() if w.strip()]
    if not want:
        return "", replace
    found = []
    for start in range(len(lines)):
        if not lines[start].strip():
            continue
        got, end = [], start
        while end < len(lines) and len(got) < len(want):
            if lines[end].strip():
                got.append(lines[end])
            end += 1
        if len(got) == len(want) and all(g.strip() == w.strip() for g, w in zip(got, want)):
            found.append((start, end, got))
    if len(found) != 1:
        return "", replace
    start, end, _ = found[0]
    text = "".join(lines[start:end])
    tail = "\n" if text.endswith("\n") and not replace.endswith("\n") else ""
    return text, _shift(replace, search, text) + tail


FUZZY_MIN_RATIO = 0.8
"""Least ``difflib`` similarity (0-1) of a SEARCH text to the parent's lines for a near match
(:func:`_fuzzy_match`)."""
FUZZY_MIN_CHARS = 20
"""Shortest SEARCH text (non-blank characters) that may be matched approximately."""


def _fuzzy_match(child: str, search: str, replace: str) -> tuple[str, str]:
    """The unique run of ``child``'s lines most similar to ``search``, with ``replace`` re-indented to it.

    The run lies inside ``child``'s EVOLVE-BLOCK, if marked, has as many non-blank lines as ``search``
    and a ``difflib.SequenceMatcher`` ratio of the stripped lines of at least ``FUZZY_MIN_RATIO``;
    ``("", replace)`` when none is close enough or two are equally close.

    A small model often writes the SEARCH part as it *believes* the program reads (one expression
    already changed): the lines it meant are still the closest ones, and REPLACE is what it wants there.
    """
    want = [w.strip() for w in search.splitlines() if w.strip()]
    if not want or sum(map(len, want)) < FUZZY_MIN_CHARS:
        return "", replace
    lines = child.splitlines(keepends=True)
    region = evolve_region(child)
    first, last = ((child[:region[0]].count("\n"), child[:region[1]].count("\n")) if region
                   else (0, len(lines)))
    # only lines that may change
    code = [n for n, line in enumerate(lines) if line.strip() and first <= n < last]
    scored = []
    for i in range(len(code) - len(want) + 1):
        window = [lines[n].strip() for n in code[i:i + len(want)]]
        ratio = difflib.SequenceMatcher(None, "\n".join(window), "\n".join(want), autojunk=False).ratio()
        scored.append((ratio, code[i], code[i + len(want) - 1] + 1))
    scored.sort(reverse=True)
    if not scored or scored[0][0] < FUZZY_MIN_RATIO or (len(scored) > 1 and scored[1][0] == scored[0][0]):
        return "", replace
    _, start, end = scored[0]
    exact = "".join(lines[start:end])
    tail = "\n" if exact.endswith("\n") and not replace.endswith("\n") else ""
    return exact, _shift(replace, search, exact) + tail


def _shift(replace: str, search: str, found: str) -> str:
    """``replace`` with the indentation of ``search``'s first line changed to ``found``'s."""
    first = next((line for line in search.splitlines() if line.strip()), "")
    have = next((line for line in found.splitlines() if line.strip()), "")
    said, now = _indent(first), _indent(have)
    return "\n".join(now + line[len(said):] if line.strip() and line.startswith(said) else line
                     for line in replace.splitlines())


def apply_diffs(parent: str, reply: str) -> str:
    """Child from SEARCH/REPLACE blocks in ``reply``.

    Raises:
        EditError: no blocks, a SEARCH text not found (or not unique) in the parent, or one outside
            the EVOLVE-BLOCK region. A SEARCH text is found verbatim or, failing that, line by line
            ignoring blank lines and each line's leading and trailing whitespace (``_loose_match``),
            or else as the unique most similar run of lines (``_fuzzy_match``).
    """
    pairs = parse_diffs(reply)
    if not pairs:
        raise EditError("the reply contains no SEARCH/REPLACE block")
    child = parent
    for n, (search, replace) in enumerate(pairs, 1):
        if not search.strip():
            raise EditError(f"diff block {n} has an empty SEARCH part")
        hits = child.count(search)
        if hits == 0:
            loose, replaced = _loose_match(child, search, replace)
            if not loose:
                loose, replaced = _fuzzy_match(child, search, replace)
            replace = replaced
            if not loose:
                raise EditError(f"diff block {n}: SEARCH text not found in the parent: "
                                f"{search.strip()[:80]!r}")
            search, hits = loose, child.count(loose)
        if hits > 1:
            raise EditError(f"diff block {n}: SEARCH text occurs {hits} times; it must be unique")
        at = child.index(search)
        region = evolve_region(child)
        if region and not (region[0] <= at and at + len(search) <= region[1]):
            raise EditError(f"diff block {n} edits outside the EVOLVE-BLOCK region")
        child = child[:at] + replace + child[at + len(search):]
    return child


def _normalized(source: str) -> str:
    return "\n".join(line.rstrip() for line in source.splitlines() if line.strip())


def _fenced_diff(reply: str) -> bool:
    """Whether the reply's program block is itself SEARCH/REPLACE edits (small models fence them)."""
    try:
        return bool(parse_diffs(extract_code(reply)))
    except EditError:
        return False


def child_from(parent: str, reply: str, rewrite: Callable[[str, str], str], *, edits_win: bool,
               truncated: bool = False) -> str:
    """The child ``reply`` makes of ``parent``, checked to compile and to differ from ``parent``.

    A reply holding SEARCH/REPLACE edits is applied as edits (:func:`apply_diffs`) when ``edits_win``,
    when it has no fenced block, or when its program block is itself made of edits; any other reply is
    passed to ``rewrite(parent, reply)``, the edit form's own way of making a child of a reply
    (:mod:`contextevolve.program.forms`).

    Raises:
        EditError: the reason the child cannot be built (truncated reply, no code, bad diff, syntax
            error), or with ``unchanged`` set when the child is its parent again.
    """
    if parse_diffs(reply) and (edits_win or "```" not in reply or _fenced_diff(reply)):
        child = apply_diffs(parent, reply)
    else:
        try:
            child = rewrite(parent, reply)
        except EditError:
            if truncated:
                raise EditError("the reply was cut off at the completion-token limit") from None
            raise
    try:
        compile(child, "<child>", "exec")
    except SyntaxError as exc:
        cut = " (the reply was cut off at the completion-token limit)" if truncated else ""
        text = f": {exc.text.strip()[:120]}" if exc.text and exc.text.strip() else ""
        raise EditError(f"syntax error at line {exc.lineno}: {exc.msg}{cut}{text}",
                        source="" if truncated else child) from None
    if _normalized(child) == _normalized(parent):
        raise EditError("the child is identical to its parent", unchanged=True)
    return child
