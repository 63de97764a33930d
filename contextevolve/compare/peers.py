"""The process a peer of ``contextevolve compare`` runs in: ``python -m contextevolve.compare.peers SPEC``.

It runs the system the :class:`~contextevolve.compare.peer_spec.PeerSpec` names, with this environment's
packages: OpenEvolve (:mod:`~contextevolve.compare.openevolve_peer`), GEPA
(:mod:`~contextevolve.compare.gepa_peer`), SkyDiscover's AdaEvolve and EvoX
(:mod:`~contextevolve.compare.skydiscover_peer`). ShinkaEvolve runs under its own environment instead
(:mod:`~contextevolve.compare.shinka_peer`).
"""

from __future__ import annotations

import importlib
import os
import sys
from pathlib import Path

from contextevolve.compare.peer_spec import SPEC_ENV, PeerSpec

RUNNERS: dict[str, tuple[str, str]] = {
    "openevolve": ("contextevolve.compare.openevolve_peer", "run_openevolve"),
    "gepa": ("contextevolve.compare.gepa_peer", "run_gepa"),
    "adaevolve": ("contextevolve.compare.skydiscover_peer", "run_adaevolve"),
    "evox": ("contextevolve.compare.skydiscover_peer", "run_evox"),
}
"""``PeerSpec.system`` -> (module, function taking the spec), imported only for the system that runs."""


def main(argv: list[str] | None = None) -> int:
    """``python -m contextevolve.compare.peers SPEC.json``: run the peer the spec names."""
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 1:
        print("usage: python -m contextevolve.compare.peers SPEC.json", file=sys.stderr)
        return 2
    spec_path = Path(argv[0]).resolve()
    spec = PeerSpec.model_validate_json(spec_path.read_text())
    os.environ[SPEC_ENV] = str(spec_path)
    if spec.system not in RUNNERS:
        print(f"unknown peer system {spec.system!r}: one of {', '.join(RUNNERS)}", file=sys.stderr)
        return 2
    module, function = RUNNERS[spec.system]
    getattr(importlib.import_module(module), function)(spec)
    return 0


if __name__ == "__main__":
    sys.exit(main())
