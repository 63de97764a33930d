"""One run's memory: Evolve Buffer + abstract index, opened once per process per run directory."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from pathlib import Path

from contextevolve.memory.buffer import EvolveBuffer
from contextevolve.memory.records import ProgramRecord
from contextevolve.memory.vectors import AbstractIndex

BUFFER_FILE = "buffer.sqlite"
CHROMA_DIR = "chroma"
LOCAL_COLLECTION = "abstracts"
"""Collection of the run directory's own Chroma store (``RUN_DIR/chroma``: one run per store)."""
SERVER_COLLECTION_PREFIX = "contextevolve-"
"""Collections on a Chroma server are named this + the run's id (:meth:`EvolveBuffer.run_id`)."""


def collection_name(buffer: EvolveBuffer, chroma_url: str | None) -> str:
    """The run's collection: :data:`LOCAL_COLLECTION` in its own store, else one per run on a server.

    Two runs on one server therefore never share (or overwrite) each other's abstracts; a run
    resumed, or its directory moved to another server, keeps its id and finds (or, through
    :meth:`RunMemory.reconcile`, rebuilds) its own collection.
    """
    return SERVER_COLLECTION_PREFIX + buffer.run_id() if chroma_url else LOCAL_COLLECTION


@dataclass
class RunMemory:
    """The Evolve Buffer of a run and the vector index of its abstracts."""

    buffer: EvolveBuffer
    index: AbstractIndex
    seeding: threading.Lock = field(default_factory=threading.Lock)
    """Held while the initial program is evaluated and committed: the run's other workers wait for it
    instead of evaluating c_0 again."""

    def commit(self, record: ProgramRecord) -> ProgramRecord:
        """Admit ``record`` to the population: mark committed in SQLite, then upsert its abstract.

        Both writes are idempotent, so replaying this after a crash is safe.
        """
        record = record.model_copy(update={"committed": True})
        self.buffer.put(record)
        self.index.add(record)
        return record

    def reconcile(self) -> int:
        """Re-index committed programs missing from the vector index; returns how many were re-added.

        They are missing after a crash between the SQLite commit and the Chroma upsert.
        """
        indexed = self.index.ids()
        missing = [r for r in self.buffer.committed() if r.id not in indexed]
        self.index.add_many(missing)
        return len(missing)


_OPEN: dict[tuple[str, str | None], RunMemory] = {}
_LOCK = threading.Lock()


def open_memory(run_dir: str | Path, *, chroma_url: str | None = None,
                collection: str | None = None) -> RunMemory:
    """The (process-wide cached) :class:`RunMemory` of ``run_dir``, created if absent.

    Args:
        run_dir: the run directory (holds ``buffer.sqlite`` and, without a server, ``chroma/``).
        chroma_url: ``http://host:port`` of a Chroma server, else the run directory's own store.
        collection: the Chroma collection; default :func:`collection_name` (one per run on a server).
    """
    root = Path(run_dir).resolve()
    key = (str(root), chroma_url)
    with _LOCK:
        memory = _OPEN.get(key)
        if memory is None:
            root.mkdir(parents=True, exist_ok=True)
            buffer = EvolveBuffer(root / BUFFER_FILE)
            name = collection or collection_name(buffer, chroma_url)
            memory = RunMemory(buffer, AbstractIndex(root / CHROMA_DIR, url=chroma_url, collection=name))
            memory.reconcile()
            _OPEN[key] = memory
        return memory


def close_memory(run_dir: str | Path | None = None) -> None:
    """Close cached memories (all, or those of ``run_dir``)."""
    with _LOCK:
        for key in list(_OPEN):
            if run_dir is None or key[0] == str(Path(run_dir).resolve()):
                _OPEN.pop(key).buffer.close()
