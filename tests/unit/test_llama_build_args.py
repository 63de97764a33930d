"""scripts/llama_cmake_args.sh: AVX-512 is added only where the CPU advertises it *and* runs it.

A fake compiler (a shell script writing the "probe" it was asked for) stands in for the real one so
every path runs on any machine: probes that run, probes that trap (SIGILL), one extension failing.
"""
import shutil
import stat
import subprocess
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "llama_cmake_args.sh"
BASE = ("-DLLAVA_BUILD=OFF -DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON "
        "-DGGML_F16C=ON")
EXTENSIONS = "avx512f avx512cd avx512vl avx512dq avx512bw avx512vbmi avx512_vnni avx512_bf16"
ALL_AVX512 = "fpu sse2 avx avx2 fma f16c " + EXTENSIONS
FULL = BASE + " -DGGML_AVX512=ON -DGGML_AVX512_VBMI=ON -DGGML_AVX512_VNNI=ON -DGGML_AVX512_BF16=ON"


def _fake_cc(tmp_path: Path, trap_on: str = "") -> str:
    """A compiler whose probe exits 0, or dies of SIGILL when its flags contain ``trap_on``."""
    cc = tmp_path / "fake-cc"
    cc.write_text('#!/bin/sh\nout=""; trap=0\nwhile [ $# -gt 0 ]; do\n'
                  '  case "$1" in -o) out="$2"; shift;; esac\n'
                  f'  [ -n "{trap_on}" ] && [ "$1" = "{trap_on}" ] && trap=1\n  shift\ndone\n'
                  'if [ $trap = 1 ]; then printf "#!/bin/sh\\nkill -ILL \\$\\$\\n" > "$out";\n'
                  'else printf "#!/bin/sh\\nexit 0\\n" > "$out"; fi\nchmod +x "$out"\n')
    cc.chmod(cc.stat().st_mode | stat.S_IXUSR)
    return str(cc)


def _args(tmp_path: Path, flags: str | None, cc: str = "cc") -> str:
    cpuinfo = tmp_path / "cpuinfo"
    cpuinfo.write_text("processor\t: 0\n" + ("" if flags is None else f"flags\t\t: {flags}\n"))
    env = {"PATH": "/usr/local/bin:/usr/bin:/bin", "CPUINFO": str(cpuinfo), "CC": cc}
    done = subprocess.run(["bash", str(SCRIPT)], env=env, capture_output=True, text=True, timeout=60,
                          check=True)
    return done.stdout.strip()


def test_a_cpu_without_avx512_gets_the_avx2_build(tmp_path):
    assert _args(tmp_path, "fpu sse2 avx avx2 fma f16c", cc=_fake_cc(tmp_path)) == BASE


def test_no_flags_line_gets_the_avx2_build(tmp_path):
    assert _args(tmp_path, None, cc=_fake_cc(tmp_path)) == BASE


def test_every_advertised_extension_whose_probe_runs_is_used(tmp_path):
    assert _args(tmp_path, ALL_AVX512, cc=_fake_cc(tmp_path)) == FULL


def test_advertised_avx512_is_not_used_when_its_probe_traps(tmp_path):
    # The hypervisor case: listed in /proc/cpuinfo, yet the instructions raise SIGILL.
    assert _args(tmp_path, ALL_AVX512, cc=_fake_cc(tmp_path, trap_on="-mavx512f")) == BASE


def test_one_extension_that_traps_is_left_out_alone(tmp_path):
    assert _args(tmp_path, ALL_AVX512, cc=_fake_cc(tmp_path, trap_on="-mavx512bf16")) == \
        FULL.replace(" -DGGML_AVX512_BF16=ON", "")


def test_advertised_avx512_is_not_used_without_a_working_compiler(tmp_path):
    assert _args(tmp_path, ALL_AVX512, cc="false") == BASE
    assert _args(tmp_path, ALL_AVX512, cc="no-such-compiler") == BASE


def test_a_partial_avx512_set_is_not_used(tmp_path):
    # GGML_AVX512 needs F, CD, VL, DQ and BW together; extensions without the base are ignored.
    assert _args(tmp_path, "avx avx2 fma f16c avx512f avx512_vnni avx512_bf16", cc=_fake_cc(tmp_path)) == BASE


def test_the_real_compiler_runs_the_real_cpus_avx512(tmp_path):
    info = Path("/proc/cpuinfo")
    line = (next((row for row in info.read_text().splitlines() if row.startswith("flags")), "")
            if info.exists() else "")
    if not set(EXTENSIONS.split()) <= set(line.split(":")[-1].split()) or not shutil.which("cc"):
        pytest.skip("this CPU does not list the AVX-512 extensions probed, or there is no cc")
    assert _args(tmp_path, ALL_AVX512) == FULL
