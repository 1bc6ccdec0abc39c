#!/usr/bin/env bash
# Prepares build-deps/ (git-ignored), the folder carried to the GPU machine, which has no package
# registry: the header-only build deps as .deb files and the vocab GGUFs the model generator copies.
# Then run on the device:  bash scripts/gpu-check.sh   (device tool: carry ["build-deps"])
#   STAGE=bench MODELS="l2-q8_0 l2-f16" bash scripts/gpu-check.sh      # + Llama-2-7B benchmarks
set -euo pipefail
cd "$(dirname "$0")/.."
LLM_SHARED=${LLM_SHARED:-$(cd .. && pwd)/shared}
mkdir -p build-deps/models
(cd build-deps && apt-get download doctest-dev nlohmann-json3-dev >/dev/null)
cp "$LLM_SHARED"/models/ggml-vocab-llama-spm.gguf "$LLM_SHARED"/models/ggml-vocab-llama-bpe.gguf build-deps/models/
du -sh build-deps
