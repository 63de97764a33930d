"""The Evolve Buffer: every program of a run, durably stored in SQLite in the run directory.

One row per program id; writes are upserts, so replaying an iteration after a crash
replaces its row rather than duplicating it. Programs become visible to the search
(parent selection, trajectories, status) only once committed by ``update_buffer``.
"""

from __future__ import annotations

import math
import sqlite3
import threading
import uuid
from pathlib import Path

from contextevolve.memory.records import ProgramRecord
from contextevolve.roles import TokenUsage, add_usage

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
"""


def stored_run_id(path: str | Path) -> str | None:
    """The run id kept in the buffer at ``path``, read without writing anything (read-only SQLite
    URI): None if there is no such file, it is not an Evolve Buffer, or no id was drawn yet.
    Lets a thread check another run directory's identity without creating or changing it."""
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


class EvolveBuffer:
    """Durable program store of one run (``RUN_DIR/buffer.sqlite``).

    Thread-safe; each method is one transaction.
    """

    def __init__(self, path: str | Path):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self._db = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=FULL")
        self._db.executescript(_SCHEMA)
        self._run_id: str | None = None

    def close(self) -> None:
        """Close the database connection."""
        with self._lock:
            self._db.close()

    def run_id(self) -> str:
        """This run's identifier: 32 hex digits drawn once, when first asked for, and kept in the buffer
        (so it moves with the run directory and survives a resume). Names the run's collection on a
        shared Chroma server (:func:`contextevolve.memory.store.open_memory`)."""
        with self._lock:
            if self._run_id is None:  # asked by every phase (the thread's identity check): read it once
                self._db.execute("INSERT OR IGNORE INTO meta VALUES ('run_id', ?)", (uuid.uuid4().hex,))
                self._run_id = self._db.execute("SELECT value FROM meta WHERE key = 'run_id'").fetchone()[0]
            return self._run_id

    def bind_thread(self, thread_id: str) -> str:
        """The id of the LangGraph thread that drives this run: ``thread_id`` if none was bound yet
        (it is then kept in the buffer), else the one bound first."""
        with self._lock:
            self._db.execute("INSERT OR IGNORE INTO meta VALUES ('thread_id', ?)", (thread_id,))
            return self._db.execute("SELECT value FROM meta WHERE key = 'thread_id'").fetchone()[0]

    def put(self, record: ProgramRecord) -> None:
        """Insert or replace ``record`` (by id).

        NaN-safe: a non-finite score is kept as such in the JSON record (``"NaN"``), and the
        indexed column holds 0.0 (SQLite stores NaN as NULL); such a program is never ``ok``
        (the evaluate node rejects non-finite scores), so the best-program query never sees it.
        """
        score = record.combined_score if math.isfinite(record.combined_score) else 0.0
        with self._lock:
            self._db.execute(
                "INSERT OR REPLACE INTO programs VALUES (?, ?, ?, ?, ?, ?, ?)",
                (record.id, record.iteration, record.parent_id, record.status, score,
                 int(record.committed), record.model_dump_json()),
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
        """All committed programs, in iteration order."""
        with self._lock:
            rows = self._db.execute(
                "SELECT record FROM programs WHERE committed = 1 ORDER BY iteration, id").fetchall()
        return [ProgramRecord.model_validate_json(r[0]) for r in rows]

    def count(self) -> int:
        """Number of committed programs (failed ones included)."""
        with self._lock:
            return self._db.execute("SELECT COUNT(*) FROM programs WHERE committed = 1").fetchone()[0]

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
