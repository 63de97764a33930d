"""One run's memory: Evolve Buffer + abstract index, opened once per process per run directory."""

from __future__ import annotations

import threading
from dataclasses import dataclass
from pathlib import Path

from contextevolve.memory.buffer import EvolveBuffer
from contextevolve.memory.records import ProgramRecord
from contextevolve.memory.vectors import AbstractIndex

BUFFER_FILE = "buffer.sqlite"
CHROMA_DIR = "chroma"


@dataclass
class RunMemory:
    """The Evolve Buffer of a run and the vector index of its abstracts."""

    buffer: EvolveBuffer
    index: AbstractIndex

    def commit(self, record: ProgramRecord) -> ProgramRecord:
        """Admit ``record`` to the population: mark committed in SQLite, then upsert its abstract.

        Both writes are idempotent, so replaying this after a crash is safe.
        """
        record = record.model_copy(update={"committed": True})
        self.buffer.put(record)
        self.index.add(record)
        return record

    def reconcile(self) -> int:
        """Re-index committed programs missing from the vector index (after a crash between
        the SQLite commit and the Chroma upsert). Returns how many were re-added."""
        indexed = self.index.ids()
        missing = [r for r in self.buffer.committed() if r.id not in indexed]
        for record in missing:
            self.index.add(record)
        return len(missing)


_OPEN: dict[tuple[str, str | None], RunMemory] = {}
_LOCK = threading.Lock()


def open_memory(run_dir: str | Path, *, chroma_url: str | None = None, collection: str = "abstracts") -> RunMemory:
    """The (process-wide cached) :class:`RunMemory` of ``run_dir``, created if absent."""
    root = Path(run_dir).resolve()
    key = (str(root), chroma_url)
    with _LOCK:
        memory = _OPEN.get(key)
        if memory is None:
            root.mkdir(parents=True, exist_ok=True)
            memory = RunMemory(EvolveBuffer(root / BUFFER_FILE),
                               AbstractIndex(root / CHROMA_DIR, url=chroma_url, collection=collection))
            memory.reconcile()
            _OPEN[key] = memory
        return memory


def close_memory(run_dir: str | Path | None = None) -> None:
    """Close cached memories (all, or those of ``run_dir``)."""
    with _LOCK:
        for key in list(_OPEN):
            if run_dir is None or key[0] == str(Path(run_dir).resolve()):
                _OPEN.pop(key).buffer.close()
