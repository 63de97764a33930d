#!/usr/bin/env bash
# Build llama.cpp's own server, `llama-server`, and install it beside the venv's Python.
#
# Why: llama-cpp-python's server (the default embedded server) decodes one request at a time.
# llama.cpp's own server decodes the requests of several slots in one batch, which on a CPU reads
# the weights once per step for all of them: with parallel lanes (`--lanes 4`) it generates more
# tokens per second in all (docs/embedded-model.md, "Batched decoding"). A run uses it when
# CONTEXTEVOLVE_LLAMA_SERVER=native.
#
# The sources are those llama-cpp-python's source distribution vendors, of the version installed in
# the venv, so both servers run the same llama.cpp; the CPU flags are the Makefile's
# (scripts/llama_cmake_args.sh). Static libraries, so the binary can be moved. ~6 min on 2 cores.
#
# Usage: scripts/build_llama_server.sh [PYTHON]   (default .venv/bin/python)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
py=${1:-.venv/bin/python}
dest=$(dirname "$py")/llama-server
version=$("$py" -c 'import importlib.metadata as m; print(m.version("llama-cpp-python"))')
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$py" -m pip download --quiet --no-deps --no-binary :all: "llama-cpp-python==$version" -d "$work"
tar xzf "$work/llama_cpp_python-$version.tar.gz" -C "$work"
src="$work/llama_cpp_python-$version/vendor/llama.cpp"
# shellcheck disable=SC2046  # the CPU flags are several words
cmake -S "$src" -B "$work/build" -DCMAKE_BUILD_TYPE=Release -DBUILD_SHARED_LIBS=OFF \
    ${LLAMA_CMAKE_ARGS:-$(bash "$here/llama_cmake_args.sh")} \
    -DLLAMA_BUILD_UI=OFF -DLLAMA_CURL=OFF -DLLAMA_OPENSSL=OFF -DLLAMA_BUILD_TESTS=OFF \
    -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_TOOLS=ON -DLLAMA_BUILD_SERVER=ON > "$work/cmake.log" \
    || { tail -30 "$work/cmake.log"; exit 1; }
cmake --build "$work/build" -j "$(nproc)" --target llama-server > "$work/build.log" 2>&1 \
    || { tail -30 "$work/build.log"; exit 1; }
install -m 755 "$work/build/bin/llama-server" "$dest"
echo "installed $dest ($("$dest" --version 2>&1 | grep -m1 version))"
