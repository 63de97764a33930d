"""The repository documents itself: every document the code or the docs point at exists in it."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SOURCES = [*sorted((ROOT / "contextevolve").rglob("*.py")), ROOT / "README.md", ROOT / "pyproject.toml",
           ROOT / "constraints.txt", ROOT / "Makefile", *sorted((ROOT / "docs").rglob("*.md"))]
DOC_REF = re.compile(r"\bdocs/[\w./-]+\.md\b")  # docs/decisions/... too
MD_LINK = re.compile(r"\]\(([^)#\s]+\.md)(?:#[^)]*)?\)")


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: str(p.relative_to(ROOT)))
def test_cited_documents_are_in_the_repository(path):
    text = path.read_text()
    assert "DESIGN.md" not in text, f"{path.name} cites DESIGN.md, which is not in the repository"
    for ref in DOC_REF.findall(text):
        assert (ROOT / ref).is_file(), f"{path.name} cites {ref}, which does not exist"
    for link in MD_LINK.findall(text) if path.suffix == ".md" else []:
        if "://" not in link:
            assert (path.parent / link).resolve().is_file(), (
                f"{path.name} links to {link}, which does not exist")


def test_the_docs_cover_architecture_tasks_and_the_embedded_model():
    names = {p.name for p in (ROOT / "docs").glob("*.md")}
    assert {"architecture.md", "tasks.md", "embedded-model.md"} <= names
    tasks = (ROOT / "docs" / "tasks.md").read_text()
    for task in ("model_placement", "txn_scheduling", "eplb", "llm_sql", "sparse_attention"):
        assert task in tasks


RUN_LINE = re.compile(r"contextevolve run\b([^`\n]*)")
FLAG = re.compile(r"(?<![\w-])--[a-z][\w-]*")


def run_flags() -> set[str]:
    """Every option of the ``run`` command."""
    import argparse

    from contextevolve.cli import build_parser

    commands = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    return {option for action in commands.choices["run"]._actions for option in action.option_strings}


@pytest.mark.parametrize("path", [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))],
                         ids=lambda p: str(p.relative_to(ROOT)))
def test_the_run_commands_the_docs_show_use_flags_run_has(path):
    """A command line a reader copies must run.

    E.g. ``--lanes``, gone since workers replaced rounds of lanes (``--workers``), must not be shown.
    """
    flags = run_flags()
    shown = [(n, flag) for n, line in enumerate(path.read_text().splitlines(), 1)
             for match in RUN_LINE.finditer(line) for flag in FLAG.findall(match.group(1))]
    assert [f"line {n}: {flag}" for n, flag in shown if flag not in flags] == []
