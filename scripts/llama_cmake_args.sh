#!/usr/bin/env bash
# Prints the CMake arguments for compiling llama-cpp-python on *this* machine's CPU.
#
# The base is a portable AVX2 build (GGML_NATIVE=OFF: a native build crashed on a CPU that
# advertised AMX and AVX-512; which of the two caused it was not isolated, and AMX is never
# asked for). AVX-512 is added only where the CPU both advertises it in /proc/cpuinfo and
# actually executes it: each extension is probed by compiling and running a few instructions
# (a hypervisor can advertise what it then traps). On the 2-core AMD EPYC development machine
# the AVX-512 build reads prompts ~1.3x as fast as the AVX2 one (decoding, bound by memory
# bandwidth, does not change); docs/results.md has the measurement. The built library then
# runs only on CPUs with the same extensions: rebuild it on another CPU
# (`rm -rf .venv && make setup`).
# The AVX2 base itself is not probed: a CPU without AVX2 needs LLAMA_CMAKE_ARGS set by hand.
# CPUINFO (default /proc/cpuinfo) and CC (default cc) can be overridden, as the tests do.
set -u
args="-DLLAVA_BUILD=OFF -DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON"
flags=" $(grep -m1 "^flags" "${CPUINFO:-/proc/cpuinfo}" 2>/dev/null | cut -d: -f2) "
has() { for f in "$@"; do [[ "$flags" == *" $f "* ]] || return 1; done; }
read -ra cc <<< "${CC:-cc}"  # CC may carry arguments ("ccache gcc")
work=$(mktemp -d) || { echo "$args"; exit 0; }  # no scratch directory: no probe, the AVX2 build
trap 'rm -rf "$work"' EXIT
# probe NAME CFLAGS BODY: compiles BODY (operating on volatile inputs) and runs it; says on stderr
# when an advertised extension is left out, so a silent fallback is visible in the build log.
probe() {
  if command -v "${cc[0]}" >/dev/null &&
     printf '#include <immintrin.h>\nvolatile int seed = 3;\nint main(void) { %s }\n' "$3" > "$work/$1.c" &&
     "${cc[@]}" -O1 $2 "$work/$1.c" -o "$work/$1" >/dev/null 2>&1 && "$work/$1" >/dev/null 2>&1; then
    return 0
  fi
  echo "llama_cmake_args.sh: the CPU lists AVX-512 $1 but the probe did not compile or run it: left out" >&2
  return 1
}
base="-mavx512f -mavx512cd -mavx512vl -mavx512dq -mavx512bw"
if has avx512f avx512cd avx512vl avx512dq avx512bw && probe base "$base" \
    '__m512i a = _mm512_set1_epi8((char) seed); a = _mm512_add_epi8(a, a);
     return _mm512_reduce_add_epi32(a) == 0;'; then
  args="$args -DGGML_AVX512=ON"
  has avx512vbmi && probe vbmi "$base -mavx512vbmi" \
    '__m512i a = _mm512_set1_epi8((char) seed); a = _mm512_permutexvar_epi8(a, a);
     return _mm512_reduce_add_epi32(a) == 0;' && args="$args -DGGML_AVX512_VBMI=ON"
  has avx512_vnni && probe vnni "$base -mavx512vnni" \
    '__m512i a = _mm512_set1_epi32(seed); a = _mm512_dpbusd_epi32(a, a, a);
     return _mm512_reduce_add_epi32(a) == 0;' && args="$args -DGGML_AVX512_VNNI=ON"
  has avx512_bf16 && probe bf16 "$base -mavx512bf16" \
    '__m512 x = _mm512_set1_ps((float) seed); __m512bh b = _mm512_cvtne2ps_pbh(x, x);
     return _mm512_reduce_add_ps(_mm512_dpbf16_ps(x, b, b)) == 0.0f;' && args="$args -DGGML_AVX512_BF16=ON"
fi
echo "$args"
