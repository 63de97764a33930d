"""Reading a user's problem (a folder, or a program and an evaluator file) and staging a copy of it.

A run works on its own copy, ``RUN_DIR/problem/``: the evaluator's folder (less what
:func:`folder_files` leaves out), the program as ``initial_program.py`` and ``problem.json``
(:class:`ProblemSpec`), so it survives edits to the originals and ``--resume`` finds it
(docs/own-problem.md, *The run directory*). A staged problem's task name is ``problem:<absolute path>``
(:data:`PREFIX`), which :func:`contextevolve.tasks.registry.get_task` resolves.
"""

from __future__ import annotations

import ast
import hashlib
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from contextevolve.tasks.problem.config import ProblemConfig, read_config

PREFIX = "problem:"
"""Start of a problem task's name; the rest is the staged folder's absolute path."""
SPEC_FILE = "problem.json"
PROGRAM_FILE = "initial_program.py"
MAX_BYTES = 50 * 2**20
"""Cap on a problem folder's copy, bytes (its files travel into every evaluation's sandbox)."""
MAX_FILES = 2000
_SKIPPED = ("__pycache__", "openevolve_output", "node_modules")
_FOREIGN = ("pyvenv.cfg", "buffer.sqlite")
"""A folder holding one of these is a virtual environment or a run directory: not copied (nor a staged
problem: ``problem.json`` beside ``initial_program.py``)."""
DEFAULT_TIMEOUT_S = 300.0
"""Wall-clock limit of the evaluator's call, seconds, when neither ``--eval-timeout`` nor the config's
``evaluator.timeout`` sets one (OpenEvolve's default, so a problem written for it runs unchanged)."""
DEFAULT_THRESHOLDS = [0.5, 0.75, 0.9]
"""OpenEvolve's default cascade thresholds."""


class ProblemSpec(BaseModel):
    """A staged problem's ``problem.json``.

    It holds everything its :class:`~contextevolve.tasks.problem.task.ProblemTask` needs.
    """

    title: str
    """Human-readable name (the problem folder's name)."""
    evaluator: str = "evaluator.py"
    """The evaluator's file name in the staged folder."""
    description: str
    """Problem statement every agent sees."""
    minimize: bool = False
    """True when a lower score is better."""
    timeout_s: float = Field(default=DEFAULT_TIMEOUT_S, gt=0)
    """Wall-clock limit of the evaluator's call, seconds."""
    cascade: bool = True
    """Run ``evaluate_stage1``, ``evaluate_stage2``, ... when the evaluator defines them (OpenEvolve's
    default)."""
    thresholds: list[float] = Field(default_factory=lambda: list(DEFAULT_THRESHOLDS))
    """Score stage *k* must reach for stage *k+1* to run."""
    whole_file: bool = False
    """The program has no EVOLVE-BLOCK markers: the whole file is evolved."""
    digest: str = ""
    """SHA-256 over the staged files (path and content), to tell two versions of a problem apart."""


class ProblemError(ValueError):
    """A problem cannot be used (a file missing, no ``evaluate``, a bad config); the message names it."""


@dataclass
class ProblemSource:
    """A problem as the user gave it, checked (:meth:`read`) but not yet copied anywhere."""

    program: Path
    evaluator: Path
    spec: ProblemSpec
    config: ProblemConfig = field(default_factory=ProblemConfig)
    notes: list[str] = field(default_factory=list)
    """Lines to show the user before the run: the score rule, ignored config keys, a missing EVOLVE-BLOCK."""

    @classmethod
    def read(cls, problem: str | Path | None = None, *, program: str | Path | None = None,
             evaluator: str | Path | None = None, config: str | Path | None = None,
             description: str | None = None, minimize: bool | None = None,
             timeout_s: float | None = None) -> ProblemSource:
        """Check a problem folder, or files given one by one (they override the folder's).

        The folder (``problem``) holds ``initial_program.py``, ``evaluator.py`` and optionally
        ``config.yaml``. ``description`` starting with ``@`` names a file holding it. Nothing is written.

        Raises:
            ProblemError: a file is missing or unreadable, the program does not parse, the evaluator
                defines no ``evaluate`` (nor ``evaluate_stage1``), the folder is too large, or the config
                is unusable (:class:`~contextevolve.tasks.problem.config.ConfigError`, also a
                ValueError).
        """
        folder = Path(problem) if problem is not None else None
        if folder is not None and not folder.is_dir():
            raise ProblemError(f"problem folder {folder} does not exist (or is not a folder)")
        program = Path(program) if program else (folder / PROGRAM_FILE if folder else None)
        evaluator = Path(evaluator) if evaluator else (folder / "evaluator.py" if folder else None)
        if program is None or evaluator is None:
            raise ProblemError("a problem needs --program and --evaluator (or --problem DIR holding "
                               "initial_program.py and evaluator.py)")
        if config is None and folder is not None and (folder / "config.yaml").is_file():
            config = folder / "config.yaml"
        for what, path in (("program", program), ("evaluator", evaluator), ("config", config)):
            if path is not None and not Path(path).is_file():
                raise ProblemError(f"{what} file {path} does not exist")
        source = _read_text(program, "program")
        evaluator_text = _read_text(evaluator, "evaluator")
        _check_parses(source, program, "program")
        tree = _check_parses(evaluator_text, evaluator, "evaluator")
        cfg = read_config(config) if config is not None else ProblemConfig()
        defined = _defined_names(tree)
        cascade = cfg.cascade if cfg.cascade is not None else True
        if ("*" not in defined and "evaluate" not in defined
                and not (cascade and "evaluate_stage1" in defined)):
            raise ProblemError(f"evaluator {evaluator} defines no function evaluate(program_path) "
                               "(OpenEvolve's contract: it returns a dict of metrics or an "
                               "EvaluationResult)")
        if description and description.startswith("@"):
            description = _read_text(Path(description[1:]), "description")
        notes = []
        whole_file = "# EVOLVE-BLOCK-START" not in source or "# EVOLVE-BLOCK-END" not in source
        if whole_file:
            notes.append(f"{program} has no # EVOLVE-BLOCK-START / # EVOLVE-BLOCK-END markers: "
                         "the whole file is evolved")
        minimize = bool(minimize)
        notes.append("score: the evaluator's combined_score when it returns one, else the mean of its "
                     f"numeric metrics; {'lower' if minimize else 'higher'} is better")
        if cfg.ignored:
            notes.append(f"{config}: no equivalent here, ignored: {', '.join(cfg.ignored)}")
        title = (folder or evaluator.parent).resolve().name or "problem"
        spec = ProblemSpec(
            title=title, evaluator=evaluator.name, minimize=minimize, whole_file=whole_file,
            description=(description or cfg.description
                         or default_description(title, evaluator_text, minimize)),
            timeout_s=timeout_s or cfg.timeout_s or DEFAULT_TIMEOUT_S,
            cascade=cfg.cascade if cfg.cascade is not None else True,
            thresholds=cfg.thresholds if cfg.thresholds is not None else list(DEFAULT_THRESHOLDS))
        files = folder_files(evaluator.parent)
        spec.digest = _digest(files, evaluator.parent, source, spec.model_dump_json(exclude={"digest"}))
        return cls(program=program, evaluator=evaluator, spec=spec, config=cfg, notes=notes)

    @property
    def settings(self) -> dict[str, Any]:
        """Run settings (flat names) the config sets; explicit settings override them."""
        return dict(self.config.settings)

    def stage(self, dest: str | Path) -> str:
        """Copy the problem into ``dest`` and return its task name (``problem:<absolute dest>``).

        ``dest`` is created, or reused when it already holds this very problem.

        Raises:
            ProblemError: ``dest`` already holds a different problem (or something else).
        """
        dest = Path(dest).resolve()
        if dest.exists():
            staged = dest / SPEC_FILE
            try:
                existing = ProblemSpec.model_validate_json(staged.read_text())
            except (OSError, ValueError):
                raise ProblemError(f"{dest} exists and is not a staged problem") from None
            if existing.digest != self.spec.digest:
                raise ProblemError(f"{dest} holds another version of the problem (its files differ)")
            return PREFIX + str(dest)
        tmp = dest.with_name(dest.name + ".tmp")
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir(parents=True)
        root = self.evaluator.parent
        for path in folder_files(root):
            target = tmp / path.relative_to(root)
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(path, target)
        shutil.copyfile(self.program, tmp / PROGRAM_FILE)
        (tmp / SPEC_FILE).write_text(self.spec.model_dump_json(indent=2))
        tmp.rename(dest)
        return PREFIX + str(dest)


def default_description(title: str, evaluator_text: str, minimize: bool) -> str:
    """The task description when neither ``--description`` nor the config's ``prompt.system_message`` is set.

    It says what the score is, plus the evaluator's module docstring (often the best statement of the
    problem).
    """
    doc = ""
    try:
        doc = ast.get_docstring(ast.parse(evaluator_text)) or ""
    except (SyntaxError, ValueError):
        pass
    goal = "lower" if minimize else "higher"
    text = (f"Problem: {title}. Improve the program so that its evaluator scores it better. The score is the "
            f"evaluator's combined_score (else the mean of its numeric metrics); {goal} is better. Keep the "
            "functions and signatures the evaluator calls.")
    return text + (f"\nThe evaluator says:\n{doc[:1200]}" if doc else "")


def _read_text(path: Path, what: str) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ProblemError(f"cannot read {what} file {path}: {exc}") from None


def _check_parses(text: str, path: Path, what: str) -> ast.Module:
    try:
        return ast.parse(text, filename=str(path))
    except (SyntaxError, ValueError) as exc:
        raise ProblemError(f"{what} {path} is not valid Python: {exc}") from None


def _defined_names(tree: ast.Module) -> set[str]:
    """Names the module may bind at import; ``"*"`` when a star import makes that unknowable.

    Names bound anywhere outside function bodies count (under ``if``/``try`` too).
    """
    names: set[str] = set()
    stack: list[ast.AST] = list(tree.body)
    while stack:
        node = stack.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
            continue
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            names.update((a.asname or a.name).split(".")[0] for a in node.names)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names.update(t.id for t in targets if isinstance(t, ast.Name))
        stack.extend(child for child in ast.iter_child_nodes(node) if isinstance(child, ast.stmt))
    return names


def staged_task(name: str, run_dir: str | Path) -> str:
    """``name`` (a task name from a run's ``run.json``), pointed at the run's own copy of its problem.

    Only when the run directory holds one: a moved run directory keeps working.
    """
    staged = (Path(run_dir) / "problem").resolve()
    if name.startswith(PREFIX) and (staged / SPEC_FILE).is_file():
        return PREFIX + str(staged)
    return name


def folder_files(root: Path) -> list[Path]:
    """Files of ``root`` that a staged copy holds (sorted); raises :class:`ProblemError` beyond the caps."""
    out, total = [], 0
    stack = [root]
    while stack:
        folder = stack.pop()
        if folder != root and (any((folder / marker).exists() for marker in _FOREIGN)
                               or ((folder / SPEC_FILE).is_file() and (folder / PROGRAM_FILE).is_file())):
            continue
        try:
            entries = sorted(folder.iterdir())
        except OSError as exc:
            raise ProblemError(f"cannot read the problem's folder {folder}: {exc}") from None
        for entry in entries:
            if entry.name.startswith(".") or entry.name in _SKIPPED:
                continue
            if entry.is_dir() and entry.is_symlink():
                continue  # a linked folder may lead anywhere (or round in a circle); a linked file is copied
            if entry.is_dir():
                stack.append(entry)
            elif entry.is_file():
                out.append(entry)
                total += entry.stat().st_size
                if len(out) > MAX_FILES or total > MAX_BYTES:
                    raise ProblemError(f"the evaluator's folder {root} holds more than {MAX_FILES} files or "
                                       f"{MAX_BYTES >> 20} MiB; put the problem in a folder of its own")
    return sorted(out)


def _digest(files: list[Path], root: Path, program: str, settings: str) -> str:
    h = hashlib.sha256(settings.encode() + b"\0")
    for path in files:
        if path.name == PROGRAM_FILE and path.parent == root:
            continue  # the staged initial program is the one given, below
        try:
            data = path.read_bytes()
        except OSError as exc:
            raise ProblemError(f"cannot read {path}: {exc}") from None
        h.update(str(path.relative_to(root)).encode() + b"\0" + data + b"\0")
    h.update(PROGRAM_FILE.encode() + b"\0" + program.encode())
    return h.hexdigest()
