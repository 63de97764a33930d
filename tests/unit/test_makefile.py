"""The Makefile's set-up-and-go targets: what `make run` names its run."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[2]


@pytest.mark.skipif(shutil.which("make") is None, reason="needs GNU make")
def test_make_run_names_one_run_directory_however_long_it_takes(tmp_path):
    """`run` and the `status` after it must name the same directory, even a second apart."""
    probe = tmp_path / "probe.mk"
    probe.write_text(f"include {ROOT / 'Makefile'}\n"
                     "probe:\n\t@echo $(RUN_DIR) $(shell sleep 1.1)\n\t@echo $(RUN_DIR)\n")
    shown = subprocess.run(["make", "-s", "-f", str(probe), "-C", str(ROOT), "probe"], capture_output=True,
                           text=True, check=True).stdout.split()
    assert len(shown) == 2 and shown[0] == shown[1] and shown[0].startswith("runs/model_placement-")
    given = subprocess.run(["make", "-s", "-f", str(probe), "-C", str(ROOT), "probe", "RUN_DIR=runs/mine"],
                           capture_output=True, text=True, check=True).stdout.split()
    assert given == ["runs/mine", "runs/mine"]
