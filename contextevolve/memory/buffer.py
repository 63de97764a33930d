"""The Evolve Buffer: every program of a run, durably stored in SQLite in the run directory.

One row per program id; writes are upserts, so replaying an iteration after a crash replaces its row
rather than duplicating it. Programs become visible to the search (parent selection, trajectories,
status) only once committed by ``update_buffer``.
"""

from __future__ import annotations

import math
import sqlite3
import threading
import uuid
from collections.abc import Callable
from pathlib import Path

from contextevolve.memory.claims import Claims
from contextevolve.memory.records import ProgramRecord
from contextevolve.roles import TokenUsage, add_usage, total_tokens
from contextevolve.timing import wall

_SCHEMA = """
CREATE TABLE IF NOT EXISTS programs (
    id TEXT PRIMARY KEY,
    iteration INTEGER NOT NULL,
    parent_id TEXT,
    status TEXT NOT NULL,
    combined_score REAL NOT NULL,
    committed INTEGER NOT NULL,
    record TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS programs_committed ON programs(committed, combined_score);
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS claims (iteration INTEGER PRIMARY KEY, worker INTEGER NOT NULL,
                                   handed INTEGER NOT NULL DEFAULT 0);
CREATE TABLE IF NOT EXISTS workers (thread_id TEXT PRIMARY KEY, worker INTEGER NOT NULL UNIQUE);
CREATE INDEX IF NOT EXISTS programs_iteration ON programs(iteration, committed);
CREATE INDEX IF NOT EXISTS claims_worker ON claims(worker, handed);
"""

FORMAT = 2
"""Format of a run directory's buffer (``meta.format``). 1 (no number): runs of rounds of lanes, before
workers; 2: iterations claimed by workers (the ``claims`` table; ``tokens``, ``wall`` and ``worker`` columns
of ``programs``). :meth:`EvolveBuffer._migrate` is the one place an older format is brought up to date."""
_COLUMNS = (("tokens", "INTEGER NOT NULL DEFAULT 0"), ("wall", "REAL NOT NULL DEFAULT 0"),
            ("worker", "INTEGER NOT NULL DEFAULT 0"))


class BufferFormatError(ValueError):
    """The buffer was written by a newer ContextEvolve than this one (its format number is higher)."""


def stored_run_id(path: str | Path) -> str | None:
    """The run id kept in the buffer at ``path``, read without writing anything (read-only SQLite URI).

    None if there is no such file, it is not an Evolve Buffer, or no id was drawn yet. Lets a thread check
    another run directory's identity without creating or changing it.
    """
    path = Path(path)
    if not path.is_file():
        return None
    try:
        db = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)
        try:
            row = db.execute("SELECT value FROM meta WHERE key = 'run_id'").fetchone()
        finally:
            db.close()
    except sqlite3.Error:
        return None
    return row[0] if row else None


def _elapsed(record: ProgramRecord) -> float:
    """Wall seconds a program held its worker.

    Its phases, less a Summarizer call made behind the worker (``"summarize.behind"``,
    :mod:`contextevolve.loop.behind`), which overlapped the worker's next iteration.
    """
    return max(0.0, wall(record.seconds) - record.seconds.get("summarize.behind", 0.0))


class EvolveBuffer(Claims):
    """Durable program store of one run (``RUN_DIR/buffer.sqlite``), its workers' claims included.

    Thread-safe; each method is one transaction.
    """

    def __init__(self, path: str | Path, *, read_only: bool = False):
        """Open (creating, or migrating an older format, unless ``read_only``) the buffer at ``path``.

        Read-only, only the methods that read records work on an older format (``committed``, ``get``,
        ``best``, ``best_by``, ``token_usage``, ``count``); with no -wal file (no writer) it is immutable, so
        that nothing is written beside it.

        Raises:
            BufferFormatError: the buffer is of a newer format than this version knows.
        """
        self.path = Path(path)
        self._lock = threading.Lock()
        self._run_id: str | None = None
        self._parsed: dict[str, ProgramRecord] = {}  # committed records already parsed: see committed()
        if read_only:
            quiet = "" if self.path.with_name(self.path.name + "-wal").exists() else "&immutable=1"
            self._db = sqlite3.connect(f"{self.path.resolve().as_uri()}?mode=ro{quiet}", uri=True,
                                       check_same_thread=False)
            self.stored_format()
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._db = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=FULL")
        self._db.executescript(_SCHEMA)
        with self._lock:
            self._migrate()

    def stored_format(self) -> int:
        """The stored format number (1 when none is stored).

        Raises:
            BufferFormatError: it is newer than :data:`FORMAT`.
        """
        try:
            row = self._db.execute("SELECT value FROM meta WHERE key = 'format'").fetchone()
        except sqlite3.OperationalError:  # (read-only, a file with no meta table yet)
            row = None
        found = int(row[0]) if row else 1
        if found > FORMAT:
            raise BufferFormatError(f"{self.path} was written by a newer ContextEvolve (format {found}; this "
                                    f"version reads up to {FORMAT}): upgrade contextevolve to read it")
        return found

    def _migrate(self) -> None:
        """Bring an older buffer to :data:`FORMAT` (idempotent, in one transaction).

        Format 1 gets the columns of format 2, filled from its records, and a claim by worker 0 for every
        committed child, so the next claim continues after them (the uncommitted children of an
        interrupted round are made again). A new buffer is written in the current format.

        Raises:
            BufferFormatError: the buffer's format is newer than this version knows.
        """
        found = self.stored_format()
        have = {r[1] for r in self._db.execute("PRAGMA table_info(programs)")}
        if found == FORMAT and all(name in have for name, _ in _COLUMNS):
            return
        self._db.execute("BEGIN IMMEDIATE")
        try:
            for name, kind in _COLUMNS:
                if name not in have:
                    self._db.execute(f"ALTER TABLE programs ADD COLUMN {name} {kind}")
            for (text,) in self._db.execute("SELECT record FROM programs").fetchall():
                record = ProgramRecord.model_validate_json(text)
                self._db.execute("UPDATE programs SET tokens = ?, wall = ?, worker = ? WHERE id = ?",
                                 (total_tokens(record.tokens), _elapsed(record), record.worker, record.id))
            self._db.execute("INSERT OR IGNORE INTO claims SELECT iteration, worker, 0 FROM programs "
                             "WHERE committed = 1 AND iteration > 0")
            self._db.execute("INSERT OR REPLACE INTO meta VALUES ('format', ?)", (str(FORMAT),))
            self._db.execute("COMMIT")
        except BaseException:
            self._db.execute("ROLLBACK")
            raise

    def spent(self) -> tuple[int, float]:
        """``(tokens, elapsed seconds)`` of the committed programs (seconds: c_0's + the busiest worker's)."""
        with self._lock:
            tokens, first = self._db.execute("SELECT COALESCE(SUM(tokens), 0), COALESCE(SUM(CASE WHEN "
                                             "iteration = 0 THEN wall END), 0) FROM programs "
                                             "WHERE committed = 1").fetchone()
            busiest = self._db.execute("SELECT COALESCE(MAX(w), 0) FROM (SELECT SUM(wall) AS w FROM programs "
                                       "WHERE committed = 1 AND iteration > 0 GROUP BY worker)").fetchone()[0]
        return int(tokens), round(first + busiest, 3)

    def close(self) -> None:
        """Close the database connection."""
        with self._lock:
            self._db.close()

    def run_id(self) -> str:
        """This run's identifier: 32 hex digits drawn once, when first asked for.

        It is kept in the buffer (so it moves with the run directory and survives a resume). Names the run's
        collection on a shared Chroma server (:func:`contextevolve.memory.store.open_memory`).
        """
        with self._lock:
            if self._run_id is None:  # asked by every phase (the thread's identity check): read it once
                self._db.execute("INSERT OR IGNORE INTO meta VALUES ('run_id', ?)", (uuid.uuid4().hex,))
                self._run_id = self._db.execute("SELECT value FROM meta WHERE key = 'run_id'").fetchone()[0]
            return self._run_id

    def bind_worker(self, thread_id: str, wanted: int | None = None) -> int:
        """The worker index of LangGraph thread ``thread_id`` in this run.

        The one it was bound to before; else ``wanted`` (``evolve()`` names its threads ``worker-<i>`` and
        asks for ``i``), or the lowest index no thread holds (a thread started from ``langgraph dev`` joins
        the run as a new worker).

        Raises:
            ValueError: ``wanted`` is held by another thread.
        """
        with self._lock:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                row = self._db.execute("SELECT worker FROM workers WHERE thread_id = ?",
                                       (thread_id,)).fetchone()
                if row is None:
                    held = dict(self._db.execute("SELECT worker, thread_id FROM workers").fetchall())
                    if wanted is not None and wanted in held:
                        raise ValueError(f"worker {wanted} of {self.path.parent} is LangGraph thread "
                                         f"{held[wanted]!r}, not {thread_id!r}")
                    index = (wanted if wanted is not None
                             else next(i for i in range(len(held) + 1) if i not in held))
                    self._db.execute("INSERT INTO workers VALUES (?, ?)", (thread_id, index))
                    row = (index,)
                self._db.execute("COMMIT")
            except BaseException:
                self._db.execute("ROLLBACK")
                raise
        return row[0]

    def worker_threads(self) -> dict[int, str]:
        """Worker index -> the LangGraph thread bound to it."""
        with self._lock:
            return dict(self._db.execute("SELECT worker, thread_id FROM workers").fetchall())

    def put(self, record: ProgramRecord) -> None:
        """Insert or replace ``record`` (by id).

        NaN-safe: a non-finite score is kept as such in the JSON record (``"NaN"``), and the
        indexed column holds 0.0 (SQLite stores NaN as NULL); such a program is never ``ok``
        (the evaluate node rejects non-finite scores), so the best-program query never sees it.
        """
        score = record.combined_score if math.isfinite(record.combined_score) else 0.0
        with self._lock:
            self._parsed.pop(record.id, None)
            self._db.execute(
                "INSERT OR REPLACE INTO programs (id, iteration, parent_id, status, combined_score, "
                "committed, record, tokens, wall, worker) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (record.id, record.iteration, record.parent_id, record.status, score,
                 int(record.committed), record.model_dump_json(), total_tokens(record.tokens),
                 _elapsed(record), record.worker),
            )

    def get(self, program_id: str) -> ProgramRecord | None:
        """The record with ``program_id``, committed or pending, or ``None``."""
        with self._lock:
            row = self._db.execute("SELECT record FROM programs WHERE id = ?", (program_id,)).fetchone()
        return ProgramRecord.model_validate_json(row[0]) if row else None

    def require(self, program_id: str) -> ProgramRecord:
        """Like :meth:`get` but raises ``KeyError`` naming the missing id."""
        record = self.get(program_id)
        if record is None:
            raise KeyError(f"program {program_id!r} is not in the Evolve Buffer at {self.path}")
        return record

    def update(self, program_id: str, **changes) -> ProgramRecord:
        """Apply field ``changes`` to a stored record and write it back; returns the new record."""
        record = self.require(program_id).model_copy(update=changes)
        self.put(ProgramRecord.model_validate(record.model_dump()))
        return record

    def committed(self) -> list[ProgramRecord]:
        """All committed programs, in iteration order.

        The records are shared with later calls: read them, do not change them (:meth:`get` gives a record
        of one's own). A record is parsed once per process, since several phases of every iteration read
        the whole population (why: docs/decisions/parsed-record-cache.md). What another process commits is
        read on the next call; a record written through :meth:`put` here is read again.
        """
        with self._lock:
            ids = [r[0] for r in self._db.execute(
                "SELECT id FROM programs WHERE committed = 1 ORDER BY iteration, id").fetchall()]
            missing = [i for i in ids if i not in self._parsed]
            for start in range(0, len(missing), 500):
                part = missing[start:start + 500]
                rows = self._db.execute(f"SELECT id, record FROM programs WHERE committed = 1 AND id IN "
                                        f"({', '.join('?' * len(part))})", part).fetchall()
                self._parsed.update((i, ProgramRecord.model_validate_json(text)) for i, text in rows)
            return [self._parsed[i] for i in ids if i in self._parsed]

    def count(self) -> int:
        """Number of committed programs (failed ones included)."""
        with self._lock:
            return self._db.execute("SELECT COUNT(*) FROM programs WHERE committed = 1").fetchone()[0]

    def best_by(self, better: Callable[[float, float | None], bool]) -> ProgramRecord | None:
        """The committed ``ok`` program that is best by ``better``, or None.

        ``better`` is a task's :meth:`~contextevolve.tasks.base.Task.better`, which leaves out differences
        within the task's score tolerance. Programs are taken in iteration order: a later program is best
        only when better than every earlier one.
        """
        best: tuple[str, float] | None = None
        with self._lock:  # (scores only: a long run's records are not parsed for this)
            rows = self._db.execute("SELECT id, combined_score FROM programs WHERE committed = 1 "
                                    "AND status = 'ok' ORDER BY iteration, id").fetchall()
        for program, score in rows:
            if best is None or better(score, best[1]):
                best = (program, score)
        return self.get(best[0]) if best else None

    def committed_ids(self) -> list[str]:
        """Ids of the committed programs, in iteration order."""
        with self._lock:
            return [r[0] for r in self._db.execute(
                "SELECT id FROM programs WHERE committed = 1 ORDER BY iteration")]

    def best(self, higher_is_better: bool = True) -> ProgramRecord | None:
        """Committed ``ok`` program with the best combined score (earliest on ties)."""
        order = "DESC" if higher_is_better else "ASC"
        with self._lock:
            row = self._db.execute(
                "SELECT record FROM programs WHERE committed = 1 AND status = 'ok' "
                f"ORDER BY combined_score {order}, iteration LIMIT 1").fetchone()
        return ProgramRecord.model_validate_json(row[0]) if row else None

    def max_iteration(self) -> int:
        """Highest committed iteration number (0 when only the initial program is stored, -1 if empty)."""
        with self._lock:
            row = self._db.execute("SELECT MAX(iteration) FROM programs WHERE committed = 1").fetchone()
        return -1 if row[0] is None else row[0]

    def token_usage(self) -> TokenUsage:
        """Tokens spent over all committed programs, by role."""
        usage: TokenUsage = {}
        for record in self.committed():
            usage = add_usage(usage, record.tokens)
        return usage
