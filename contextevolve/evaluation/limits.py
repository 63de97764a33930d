"""Resource limits of the sandbox every candidate program runs in (one evaluation = one sandbox)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field


class SandboxLimits(BaseModel):
    """Limits applied to one candidate's whole process tree.

    ``timeout_s`` is enforced by the host (SIGKILL to the tree); the others by the kernel
    (rlimits, cgroups, Landlock, namespaces — see :mod:`contextevolve.evaluation.sandbox`
    for which mechanism backs which limit and what happens where one is unavailable).
    Defaults suit the bundled tasks on a laptop-class machine.
    """

    model_config = ConfigDict(frozen=True, use_attribute_docstrings=True)

    timeout_s: float | None = Field(default=None, gt=0)
    """Wall-clock limit of the whole evaluation, seconds; ``None`` = the task's ``timeout_s``."""
    cpu_s: float | None = Field(default=None, gt=0)
    """CPU-time limit per process, seconds (RLIMIT_CPU); ``None`` = the wall-clock limit."""
    memory_mb: int = Field(default=4096, ge=64)
    """Address-space cap per process (RLIMIT_AS) and, where a memory cgroup is available,
    on the whole tree, MiB (why this default: docs/decisions/sandbox-memory.md)."""
    max_processes: int = Field(default=64, ge=4)
    """Processes and threads the tree may hold at once (pids cgroup, else RLIMIT_NPROC)."""
    output_kb: int = Field(default=1024, ge=1)
    """Cap on each of stdout and stderr, KiB; beyond it the tree is killed."""
    files_mb: int = Field(default=512, ge=1)
    """Cap on any one file (RLIMIT_FSIZE) and on everything in the working directory, MiB."""
    allow_network: bool = False
    """True skips the network namespace and Landlock TCP rules (the candidate may connect out)."""

    def resolved(self, task_timeout_s: float) -> SandboxLimits:
        """These limits with ``timeout_s`` / ``cpu_s`` filled in from the task's default timeout."""
        wall = self.timeout_s or task_timeout_s
        return self.model_copy(update={"timeout_s": wall, "cpu_s": self.cpu_s or wall})
