"""scripts/llama_cmake_args.sh: AVX-512 is added only where the CPU advertises it *and* runs it."""
import subprocess

import pytest
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "llama_cmake_args.sh"
BASE = ("-DLLAVA_BUILD=OFF -DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON "
        "-DGGML_F16C=ON")
ALL_AVX512 = "fpu sse2 avx avx2 fma f16c avx512f avx512cd avx512vl avx512dq avx512bw avx512vbmi avx512_vnni avx512_bf16"


def _args(tmp_path: Path, flags: str, cc: str = "cc") -> str:
    cpuinfo = tmp_path / "cpuinfo"
    cpuinfo.write_text(f"processor\t: 0\nflags\t\t: {flags}\n")
    env = {"PATH": "/usr/bin:/bin", "CPUINFO": str(cpuinfo), "CC": cc}
    done = subprocess.run(["bash", str(SCRIPT)], env=env, capture_output=True, text=True, timeout=60, check=True)
    return done.stdout.strip()


def test_a_cpu_without_avx512_gets_the_avx2_build(tmp_path):
    assert _args(tmp_path, "fpu sse2 avx avx2 fma f16c") == BASE


def test_advertised_avx512_is_not_used_when_the_probe_cannot_run_it(tmp_path):
    # `false` stands for a compiler that fails (or a probe that traps): advertising is not enough.
    assert _args(tmp_path, ALL_AVX512, cc="false") == BASE


def test_a_partial_avx512_set_is_not_used(tmp_path):
    # GGML_AVX512 needs F, CD, VL, DQ and BW together; extensions without the base are ignored.
    assert _args(tmp_path, "avx avx2 fma f16c avx512f avx512_vnni avx512_bf16") == BASE


def test_avx512_that_runs_here_is_used(tmp_path):
    real = Path("/proc/cpuinfo").read_text() if Path("/proc/cpuinfo").exists() else ""
    if not all(f" {flag}" in real for flag in ALL_AVX512.split()[6:]):
        pytest.skip("this CPU does not advertise the AVX-512 extensions probed")
    assert _args(tmp_path, ALL_AVX512) == (BASE + " -DGGML_AVX512=ON -DGGML_AVX512_VBMI=ON "
                                           "-DGGML_AVX512_VNNI=ON -DGGML_AVX512_BF16=ON")
