#!/usr/bin/env bash
# Build the libFuzzer targets (clang, ASan+UBSan) and run each for SECONDS (default 60).
#   bash scripts/fuzz.sh [SECONDS] [target ...]
# Corpora live in build-fuzz/corpus/<target> (seeded from files the project's own writers make);
# crashes are written to build-fuzz/crashes/. A summary line per target (execs/s, corpus size)
# is printed last and appended to build-fuzz/fuzz-summary.txt.
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${1:-60}
shift || true
targets=("$@")
[ ${#targets[@]} -eq 0 ] && targets=(fuzz_gguf fuzz_model_load fuzz_tokenize fuzz_chat fuzz_args)
export LLM_SHARED=${LLM_SHARED:-$(cd .. && pwd)/shared}
bash scripts/setup-deps.sh clang libclang-rt-14-dev
CC=clang CXX=clang++ cmake -S . -B build-fuzz -DCMAKE_BUILD_TYPE=RelWithDebInfo -DGGML_FUZZ=ON -DGGML_CUDA=OFF \
  -DGGML_BUILD_TESTS=OFF -DGGML_BUILD_EXAMPLES=OFF >/dev/null
cmake --build build-fuzz -j"$(nproc)" --target "${targets[@]}" >/dev/null
bash scripts/fuzz-seeds.sh build-fuzz/corpus
mkdir -p build-fuzz/crashes
export ASAN_OPTIONS=detect_leaks=1:allocator_may_return_null=1
summary=()
for t in "${targets[@]}"; do
  log=build-fuzz/$t.log
  ./build-fuzz/fuzz/$t build-fuzz/corpus/$t -max_total_time="$secs" -rss_limit_mb=4096 -max_len=65536 \
    -timeout=20 -artifact_prefix=build-fuzz/crashes/$t- -print_final_stats=1 >"$log" 2>&1 || {
      echo "$t: FAILED (see $log)"; tail -30 "$log"; exit 1; }
  execs=$(grep -m1 'stat::number_of_executed_units' "$log" | awk '{print $2}')
  rate=$(grep -m1 'stat::average_exec_per_sec' "$log" | awk '{print $2}')
  n=$(ls build-fuzz/corpus/$t | wc -l)
  summary+=("$(date -u +%F) $t ${secs}s execs=$execs exec/s=$rate corpus=$n crashes=0")
done
printf '%s\n' "${summary[@]}" | tee -a build-fuzz/fuzz-summary.txt
