"""The ``functions`` edit form: a reply of only the top-level functions and classes that change.

Why a third form beside the full rewrite and SEARCH/REPLACE edits (:mod:`contextevolve.program.edits`):
docs/decisions/functions-form.md. The rules (only the parent's ``# EVOLVE-BLOCK-START`` /
``# EVOLVE-BLOCK-END`` region, when marked, may change):

* a top-level ``def`` / ``class`` (decorators included) or single-name assignment of the reply replaces the
  parent's definition of that name, its docstrings kept where the reply has none; a new name goes before the
  first definition replaced, or at the region's end;
* a name defined outside the region may not be redefined (an :class:`EditError`), though an unchanged copy is
  ignored (a whole-program reply repeats the fixed parts);
* imports the parent lacks go to the region's top; any other top-level statement (a ``__main__`` test, a call)
  is dropped;
* a reply that defines nothing is an :class:`EditError`.
"""

from __future__ import annotations

import ast
import io

from contextevolve.program.replies import EditError, code_blocks, evolve_region, extract_code

_DEFINITION = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)


def _name(node: ast.stmt) -> str | None:
    """The name a top-level statement defines: a def/class, or ``NAME = ...`` / ``NAME: T = ...``."""
    if isinstance(node, _DEFINITION):
        return node.name
    if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
        return node.targets[0].id
    if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.value is not None:
        return node.target.id
    return None


def source_lines(source: str) -> list[str]:
    r"""``source``'s lines as Python numbers them (``lineno`` of its AST), line ends kept.

    It splits at ``\n``, ``\r\n`` and ``\r`` only. ``str.splitlines`` also splits at ``\x0b``, form
    feeds, ``\x1c``-``\x1e``, ``\x85`` and U+2028/U+2029, which the tokenizer reads as ordinary
    characters: after one of those, an AST line number would point at another line.
    """
    return io.StringIO(source, newline="").readlines()


def _span(node: ast.stmt) -> tuple[int, int]:
    """0-based ``(first, end)`` line numbers of ``node``, its decorators included (``end`` exclusive)."""
    first = min([node.lineno, *(d.lineno for d in getattr(node, "decorator_list", []))])
    return first - 1, node.end_lineno or node.lineno


def _docstring(node: ast.stmt | None) -> ast.Expr | None:
    """The docstring statement of a def/class ``node``, or None."""
    if isinstance(node, _DEFINITION) and ast.get_docstring(node, clean=False) is not None:
        return node.body[0]
    return None


def _parent_node(parent_tree: ast.Module, span: tuple[int, int]) -> ast.stmt | None:
    """The parent's top-level statement at ``span`` (0-based lines, :func:`_span`), or None."""
    return next((n for n in parent_tree.body if _span(n) == span), None)


def _parses(text: str, node: ast.stmt) -> bool:
    """Whether ``text``, the source of ``node`` from the start of its first line, parses.

    A member of a class (indented) is parsed as the body of a class.
    """
    try:
        ast.parse(text if node.col_offset == 0 else "class _:\n" + text)
    except SyntaxError:
        return False
    return True


def _keep_docstring(text: str, node: ast.stmt, old: ast.stmt | None, parent_lines: list[str]) -> str:
    """``text`` with the docstrings of the parent's definition ``old`` put back where the reply's lack them.

    ``text`` is the source of the reply's definition ``node``, from the start of its first line. The
    docstring of ``old`` is put back when the reply's has none, and, for a class, the docstrings of its
    methods and nested classes, matched by name in ``old``'s body (the Generator is shown programs without
    them). Left as it is: a one-line def, a definition without a parent's docstring, and one that would
    not parse with it (e.g. a body on the last line of a multi-line signature).
    """
    if not isinstance(node, _DEFINITION) or not isinstance(old, _DEFINITION) or not node.body:
        return text
    start = _span(node)[0]
    if isinstance(node, ast.ClassDef) and isinstance(old, ast.ClassDef):
        members = {n.name: n for n in old.body if isinstance(n, _DEFINITION)}
        lines = source_lines(text)
        # bottom up: an insertion does not move the members still to come
        for member in reversed(node.body):
            if isinstance(member, _DEFINITION) and member.name in members:
                first, end = (line - start for line in _span(member))
                lines[first:end] = [_keep_docstring("".join(lines[first:end]), member, members[member.name],
                                                    parent_lines)]
        text = "".join(lines)  # the class's own lines above its first member have not moved
    doc = _docstring(old)
    first = node.body[0]
    if doc is None or _docstring(node) is not None or first.lineno == node.lineno:  # a one-line def
        return text
    lines = source_lines(text)
    at = _span(first)[0] - start  # a decorated first statement: above its decorators
    if at >= len(lines):
        return text
    indent = lines[at][:len(lines[at]) - len(lines[at].lstrip())]
    while at > 1 and lines[at - 1].lstrip().startswith("#"):  # above the comments that open the body
        at -= 1
    doc_lines = parent_lines[doc.lineno - 1:doc.end_lineno or doc.lineno]
    old_indent = doc_lines[0][:len(doc_lines[0]) - len(doc_lines[0].lstrip())]
    moved = [indent + line[len(old_indent):] if line.startswith(old_indent) else line for line in doc_lines]
    restored = "".join(lines[:at] + moved + lines[at:])
    return restored if _parses(restored, node) else text


def reply_code(reply: str) -> str:
    """The code of a functions-form reply: every Python block, in order, else its one program.

    A small model sometimes puts each function in a block of its own; a reply with one block or none
    is read by :func:`~contextevolve.program.replies.extract_code`.

    Raises:
        EditError: no code found.
    """
    blocks = [body for lang, body in code_blocks(reply) if lang in ("python", "py", "python3", "")]
    if len(blocks) > 1:
        return "\n\n".join(b.strip("\n") for b in blocks if b.strip()) + "\n"
    return extract_code(reply)


def apply_functions(parent: str, reply: str) -> str:
    """The child made by splicing the reply's definitions into ``parent`` (see the module docstring).

    Args:
        parent: the parent's source (must parse).
        reply: the Generator's reply (untrusted text).

    Returns:
        The child's source (not yet compiled; :func:`~contextevolve.program.forms.build_child` checks
        it).

    Raises:
        EditError: no code, code that does not parse, no definition in it, or a definition of a name
            the parent keeps outside its EVOLVE-BLOCK.
    """
    code = reply_code(reply)
    try:
        tree = ast.parse(code)
    except SyntaxError as exc:
        raise EditError(f"the functions in the reply do not parse: line {exc.lineno}: {exc.msg}") from None
    try:
        parent_tree = ast.parse(parent)
    except SyntaxError as exc:
        raise EditError(f"the parent does not parse (line {exc.lineno}); functions cannot be spliced "
                        "into it") from None
    lines = source_lines(parent)
    if lines and not lines[-1].endswith("\n"):
        lines[-1] += "\n"
    region = evolve_region(parent)
    first_line, end_line = ((parent[:region[0]].count("\n"), parent[:region[1]].count("\n")) if region
                            else (0, len(lines)))
    own: dict[str, tuple[int, int]] = {}
    fixed: dict[str, str] = {}
    for node in parent_tree.body:
        name = _name(node)
        if name is None:
            continue
        start, end = _span(node)
        if first_line <= start and end <= end_line:
            own[name] = (start, end)  # the last definition wins, as at import
        else:
            fixed[name] = "".join(lines[start:end]).strip()
    import_at = max((_span(node)[1] for node in parent_tree.body
                     if isinstance(node, (ast.Import, ast.ImportFrom))
                     and first_line <= _span(node)[0] < end_line), default=None)
    # no import in the region: at its top, after a module docstring or __future__ import
    if import_at is None:
        import_at = max([first_line, *(_span(node)[1] for node in parent_tree.body[:2] if not region and (
            isinstance(node, ast.ImportFrom) and node.module == "__future__"
            or isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant)))])
    code_lines = source_lines(code)
    have = {line.strip() for line in lines}
    imports, replaced, added = [], {}, []
    for node in tree.body:
        start, end = _span(node)
        text = "".join(code_lines[start:end])
        if not text.endswith("\n"):
            text += "\n"
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            imports.extend(line for line in text.splitlines(keepends=True) if line.strip() not in have)
            continue
        name = _name(node)
        if name is None:
            continue
        if name in fixed and name not in own:
            if text.strip() == fixed[name]:  # the fixed part copied back unchanged (a whole-program reply)
                continue
            raise EditError(f"the reply redefines {name}, which lies outside the EVOLVE-BLOCK and may not "
                            "change")
        if name in own:
            replaced[name] = _keep_docstring(text, node, _parent_node(parent_tree, own[name]), lines)
        else:
            added.append(text)
    if not replaced and not added:
        raise EditError("the reply defines no function or class: reply with the complete functions you "
                        "change")
    edits = sorted(((own[name], text) for name, text in replaced.items()), reverse=True)
    first_replaced = min((span[0] for span, _ in edits), default=end_line)
    for (start, end), text in edits:
        lines[start:end] = [text]
    if added:
        block = "".join(text + "\n\n" for text in added)
        lines.insert(first_replaced, block)
    if imports:
        lines.insert(min(import_at, first_replaced), "".join(imports))
    return "".join(lines)


def restore_docstrings(parent: str, child: str) -> str:
    """``child`` with the parent's docstrings put back into its definitions that have none.

    They are the docstrings of the parent's top-level defs and classes, and of those classes' methods and
    nested classes, each put back into the definition of the same name (and place) that has none (a
    one-line def is left as it is, and so is a definition that would not parse with it). Functions nested
    in a function are not matched. It keeps a rewrite written from the view without docstrings
    (:meth:`contextevolve.loop.policy.SearchPolicy.shown`) documented. Either program not parsing returns
    ``child`` unchanged (:func:`~contextevolve.program.forms.build_child` reports a syntax error).
    """
    try:
        parent_tree, child_tree = ast.parse(parent), ast.parse(child)
    except SyntaxError:
        return child
    parent_lines = source_lines(parent)
    olds = {node.name: node for node in parent_tree.body if isinstance(node, _DEFINITION)}
    lines = source_lines(child)
    for node in reversed(child_tree.body):  # bottom up: an insertion does not move the nodes still to come
        if isinstance(node, _DEFINITION) and node.name in olds:
            start, end = _span(node)
            lines[start:end] = [_keep_docstring("".join(lines[start:end]), node, olds[node.name],
                                                parent_lines)]
    return "".join(lines)
