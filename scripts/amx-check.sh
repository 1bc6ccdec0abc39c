#!/usr/bin/env bash
# AMX check on the device host's CPU (Intel Xeon with AMX-INT8): CPU-only build, test_mul_mat with AMX
# on and off (GGML_NO_AMX=1), then prompt speed (bench -p 512 -n 0) of a random TinyLlama-1.1B-shape
# model in q4_0 and Q4_K_M at 16 and 2 threads, each with and without AMX (same machine, same binary).
#   OUT=/tmp/out bash scripts/amx-check.sh     # header-only deps from build-deps/*.deb when not installed
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/amx-check-out}
mkdir -p "$OUT"
B=${BUILD:-build-amx}
prefix_args=()
if ! dpkg -s doctest-dev >/dev/null 2>&1 && [ -d build-deps ]; then
  mkdir -p /tmp/deps && for f in build-deps/*.deb; do dpkg -x "$f" /tmp/deps; done
  prefix_args=(-DCMAKE_PREFIX_PATH=/tmp/deps/usr)
fi
export LLM_SHARED=${LLM_SHARED:-$(pwd)/build-deps}
{ date -u; lscpu | grep -E "Model name|^CPU\(s\)|Thread|L2|L3"; grep -o -w "amx_[a-z0-9]*\|avx512_vnni" /proc/cpuinfo | sort -u | xargs; } | tee "$OUT/cpu.txt"
t0=$(date +%s)
cmake -S . -B "$B" -DGGML_CUDA=OFF -DCMAKE_BUILD_TYPE=Release "${prefix_args[@]}" > "$OUT/cmake.log" 2>&1 || { tail -20 "$OUT/cmake.log"; exit 1; }
cmake --build "$B" -j"$(nproc)" --target test_mul_mat bench quantize > "$OUT/build.log" 2>&1 || { grep -E "error" "$OUT/build.log" | head -20; exit 1; }
echo "build: $(( $(date +%s) - t0 )) s"
python3 gguf-py/scripts/gen_random_llama.py --preset tinyllama-1.1b --outtype f16 --fast --out /tmp/tl-f16.gguf > "$OUT/gen.log" 2>&1 &
gen=$!
for v in "" GGML_NO_AMX=1; do
  env $v timeout ${TEST_TIMEOUT:-90} "$B/tests/test_mul_mat" > "$OUT/test_mul_mat${v:+-noamx}.log" 2>&1
  echo "test_mul_mat ${v:-(AMX on)}: rc=$? $(grep -E "^\[doctest\] (test cases|assertions)" "$OUT/test_mul_mat${v:+-noamx}.log" | xargs)"
  grep -E "AMX int8|ERROR|out\[" "$OUT/test_mul_mat${v:+-noamx}.log" | head -12
done
wait $gen || { tail -5 "$OUT/gen.log"; exit 1; }
echo "models: $(( $(date +%s) - t0 )) s"
"$B/bin/quantize" /tmp/tl-f16.gguf /tmp/tl-q4_0.gguf q4_0 8 > "$OUT/quantize-q4_0.log" 2>&1 &
"$B/bin/quantize" /tmp/tl-f16.gguf /tmp/tl-q4_k_m.gguf Q4_K_M 8 > "$OUT/quantize-q4_k_m.log" 2>&1
wait
echo "quantized: $(( $(date +%s) - t0 )) s"
for t in ${THREADS:-16 2}; do
  for m in ${MODELS:-q4_0 q4_k_m}; do
    for v in "" GGML_NO_AMX=1; do
      r=$(env $v "$B/bin/bench" -m /tmp/tl-$m.gguf -p 512 -n 0 -t $t -r ${REPS:-2} -ngl 0 2>>"$OUT/bench.err" | grep -E "\| *pp512")
      echo "$m -t $t ${v:-AMX}: $r" | tee -a "$OUT/bench.txt"
    done
  done
done
echo "total: $(( $(date +%s) - t0 )) s"
