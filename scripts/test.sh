#!/usr/bin/env bash
# Build everything and run every test: C++ (CTest/doctest, with the Jinja golden files of
# scripts/jinja-golden.sh), the Python package (pytest), the tools end to end on the shared model
# (scripts/smoke-tools.sh, incl. every bad input of scripts/bad-inputs.sh), the server with a real OpenAI client
# and a headless browser (scripts/server-test.sh), and the sanitizer (ASan+UBSan) build of the library and CPU tests.
#   bash scripts/test.sh            # CMAKE_ARGS=-DGGML_CUDA=OFF forces the CPU-only build
# SKIP_SANITIZE=1 skips the sanitizer build.
set -euo pipefail
cd "$(dirname "$0")/.."
export LLM_SHARED=${LLM_SHARED:-$(cd .. && pwd)/shared}
bash scripts/setup-deps.sh
jobs=$(nproc)
cmake -S . -B build-test -DCMAKE_BUILD_TYPE=Release ${CMAKE_ARGS:-}
cmake --build build-test -j"$jobs"
bash scripts/jinja-golden.sh build-test  # chat templates rendered by python3-jinja2: test_jinja's golden files
(cd build-test && ctest --output-on-failure -j"$jobs")
/usr/bin/python3 -m pytest -q gguf-py/tests
bash scripts/smoke-tools.sh build-test
bash scripts/server-test.sh build-test   # llm-server end to end: the openai npm client, SSE, faults, the web page
if [ "${SKIP_SANITIZE:-0}" != 1 ]; then
  bash scripts/sanitize.sh
fi
