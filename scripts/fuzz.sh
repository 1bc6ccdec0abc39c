#!/usr/bin/env bash
# Build the libFuzzer targets (clang, ASan+UBSan) and run each for SECONDS (default 60), one after another.
#   bash scripts/fuzz.sh [SECONDS] [target ...]        # targets: fuzz_gguf fuzz_model_load fuzz_tokenize
#                                                      #          fuzz_chat fuzz_args fuzz_jinja (default: all)
# Corpora live in build-fuzz/corpus/<target> (seeded by scripts/fuzz-seeds.sh from the project's own
# writers and test vectors, then grown by each run); crashes/leaks/timeouts are written to
# build-fuzz/crashes/<target>-*. A summary line per target (execs, exec/s, corpus size, result) is
# printed last and appended to build-fuzz/fuzz-summary.txt. Exit status is non-zero if any target failed.
# Reproduce a crash:  ./build-fuzz/fuzz/<target> build-fuzz/crashes/<target>-crash-...
# Minimize it:        ./build-fuzz/fuzz/<target> -minimize_crash=1 -runs=10000 <file>
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${1:-60}
shift || true
targets=("$@")
[ ${#targets[@]} -eq 0 ] && targets=(fuzz_gguf fuzz_model_load fuzz_tokenize fuzz_chat fuzz_args fuzz_jinja)
export LLM_SHARED=${LLM_SHARED:-$(cd .. && pwd)/shared}
bash scripts/setup-deps.sh clang libclang-rt-14-dev
CC=clang CXX=clang++ cmake -S . -B build-fuzz -DCMAKE_BUILD_TYPE=RelWithDebInfo -DGGML_FUZZ=ON -DGGML_CUDA=OFF \
  -DGGML_BUILD_TESTS=OFF -DGGML_BUILD_EXAMPLES=OFF >/dev/null
cmake --build build-fuzz -j"$(nproc)" --target "${targets[@]}" >/dev/null
bash scripts/fuzz-seeds.sh build-fuzz/corpus
mkdir -p build-fuzz/crashes
export ASAN_OPTIONS=detect_leaks=1:allocator_may_return_null=1
summary=()
failed=0
for t in "${targets[@]}"; do
  log=build-fuzz/$t.log
  result=ok
  ./build-fuzz/fuzz/$t build-fuzz/corpus/$t -max_total_time="$secs" -rss_limit_mb=4096 -max_len=65536 \
    -timeout=20 -artifact_prefix=build-fuzz/crashes/$t- -print_final_stats=1 >"$log" 2>&1 || {
      result="FAILED: $(grep -m1 -E '^(==[0-9]+==ERROR|SUMMARY)|runtime error|ALARM|out-of-memory' "$log" | cut -c1-160)"
      failed=1
      echo "$t: FAILED (see $log)"; tail -30 "$log"; }
  execs=$(grep -m1 'stat::number_of_executed_units' "$log" | awk '{print $2}' || true)
  rate=$(grep -m1 'stat::average_exec_per_sec' "$log" | awk '{print $2}' || true)
  n=$(ls build-fuzz/corpus/$t | wc -l)
  summary+=("$(date -u +%F) $t ${secs}s execs=${execs:-?} exec/s=${rate:-?} corpus=$n result=$result")
done
printf '%s\n' "${summary[@]}" | tee -a build-fuzz/fuzz-summary.txt
exit $failed
