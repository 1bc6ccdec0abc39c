#!/usr/bin/env bash
# The main job: install deps, build (CUDA auto-detected), generate text.
#   bash scripts/run.sh [MODEL.gguf] [PROMPT] [extra main flags...]
# With no model, the shared stories260K.gguf (LLM_SHARED, default ../shared) is used.
set -euo pipefail
cd "$(dirname "$0")/.."
LLM_SHARED=${LLM_SHARED:-../shared}
model=${1:-$LLM_SHARED/models/stories260K.gguf}
prompt=${2:-Once upon a time}
shift $(( $# > 2 ? 2 : $# )) || true
bash scripts/setup-deps.sh
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release ${CMAKE_ARGS:-} >/dev/null
cmake --build build -j"$(nproc)" --target main >/dev/null
./build/bin/main -m "$model" -p "$prompt" -n 256 --temp 0 "$@"
