#!/usr/bin/env bash
# GPU check, run on the device machine (H100/H200, sm_90): build with CUDA, run the CUDA tests,
# measure copy bandwidth, and (STAGE includes bench) benchmark random-weight Llama-2-7B / Llama-3-8B.
#   bash scripts/gpu-check.sh                 # build + tests + bandwidth
#   STAGE=bench MODELS="l2-q8_0 l2-f16" bash scripts/gpu-check.sh   # + benchmarks (models made in /tmp)
#     models: l2-f16 l2-q8_0 l2-q4_0 l2-q4km l3-f16 l3-q8_0 l3-q4km (Llama-2-7B / Llama-3-8B; the quantized
#     files are made from the f16 one by our quantize tool, all of a run's in parallel); BENCH_ARGS="-fa 1"
#   MMVQ_VARIANTS="5 2 4 8" ...                 # + bench-mmvq once per GGML_CUDA_MMVQ value
#   VARIANTS="GGML_CUDA_QT_RPW=2 GGML_CUDA_TWICE=norm" ...   # + tg of each model under each env setting
#   BUILD_VARIANTS="late=GGML_CUDA_LAB_EPI_LATE both=GGML_CUDA_LAB_A,GGML_CUDA_LAB_B" ...   # + bench built again
#     per variant (this tree with those CUDA defines, in $BUILD-<name>) and each model's tg on every build,
#     alternating with this tree's, VROUNDS rounds (default 2; the lab switches of a kernel A/B);
#     VARIANT_TESTS="*group*,*mat-vec*" also builds each variant's test_backend_cuda and runs those test cases on it.
#     Where the lab's sources include "ggml-cuda-lab.h" (ggml/CMakeLists.txt), the variants build in $BUILD itself
#     and only those sources rebuild (the header rewritten per variant; binaries in $BUILD/variants/NAME)
#   PROFILE=1 bash scripts/gpu-check.sh       # per-node profile against the roofline (docs/profile.md): l2-q8_0's
#     decode step (graph-dump --profile, -d PROFILE_DEPTH=512; $OUT/profile-decode.{dot,json,txt}), bench --profile
#     (pp512 / tg128 tables), and tg128 without --profile run alternately with it (the profiling-off A/B)
#   STAGE=bench KV_TYPES="f16 q8_0 q4_0" bash scripts/gpu-check.sh   # quantized KV cache at depth: for each model of
#     KV_MODELS (default l3-q8_0) and type T: bench -p KV_PP -n KV_TG -d KV_DEPTH -fa 1 -ctk T -ctv T (512, 64, 16384;
#     -r KV_REPS, 2); with KV_TYPES set, MODELS defaults to none (only the KV runs; set it for the usual table too)
#   BUDGET_S=480 ...   # the A/B and KV loops start no bench run past 480 s from the script's start (a device call
#     cut off at its limit prints nothing more: better a short summary than none); skipped runs are logged.
#     The device tool brings back 8 files of its $OUT: give this script another OUT and copy its console there
# Header-only build deps (doctest, nlohmann-json) come from build-deps/*.deb when not installed
# (made here by scripts/gpu-prepare.sh; pass carry: ["build-deps"] to the device call);
# the vocab files for the generator from build-deps/models (or $LLM_SHARED/models).
set -uo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)
OUT=${OUT:-/tmp/gpu-check-out}
mkdir -p "$OUT"
PROFILE=${PROFILE:-0}
if [ "$PROFILE" = 1 ]; then STAGE=${STAGE:-bench}; MODELS=${MODELS:-l2-q8_0}; fi
STAGE=${STAGE:-test}
BUILD=${BUILD:-build-gpu}
log() { echo "[gpu-check] $*"; }

nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm --format=csv,noheader | tee "$OUT/gpu.txt"

prefix_args=()
if ! dpkg -s doctest-dev >/dev/null 2>&1 && [ -d build-deps ]; then
  mkdir -p /tmp/deps && for f in build-deps/*.deb; do dpkg -x "$f" /tmp/deps; done
  prefix_args=(-DCMAKE_PREFIX_PATH=/tmp/deps/usr)
fi
export LLM_SHARED=${LLM_SHARED:-$ROOT/build-deps}

t0=$(date +%s)
over_budget() {  # over_budget <what>: past BUDGET_S seconds (logged), so the caller skips <what>
  [ -n "${BUDGET_S:-}" ] && [ $(( $(date +%s) - t0 )) -ge "$BUDGET_S" ] || return 1
  log "BUDGET_S $BUDGET_S s spent: skipping $1"
}
cmake -S . -B "$BUILD" -DCMAKE_CUDA_ARCHITECTURES=90 -DCMAKE_BUILD_TYPE=Release -DGGML_CUDA=ON "${prefix_args[@]}" \
  > "$OUT/cmake.log" 2>&1 || { tail -30 "$OUT/cmake.log"; exit 1; }
targets=(test_backend_cuda test_llm_gpu bench-bw quantize ${EXTRA_TARGETS:-})  # test_llm_gpu runs quantize
[ -n "${MMVQ_VARIANTS:-}" ] && targets+=(bench-mmvq)
[ "$STAGE" = bench ] && targets+=(bench batched-bench)
[ "$PROFILE" = 1 ] && targets+=(graph-dump)
# the lab header (BUILD_VARIANTS below) without defines, in case a cut-short run left a variant's there
labh="$BUILD/cuda-lab/ggml-cuda-lab.h"
labh_reset() { echo "// lab defines (scripts/gpu-check.sh BUILD_VARIANTS): none, the tree's kernels" > "$labh"; }
[ -f "$labh" ] && grep -q '^#define' "$labh" && labh_reset
cmake --build "$BUILD" -j16 --target "${targets[@]}" > "$OUT/build.log" 2>&1 || { grep -E "error" "$OUT/build.log" | head -30; tail -20 "$OUT/build.log"; exit 1; }
log "build: $(( $(date +%s) - t0 )) s"
# BUILD_VARIANTS: name=DEF1,DEF2[=V] -> bench (and test_backend_cuda with VARIANT_TESTS) built with those defines.
# Where the sources include "ggml-cuda-lab.h" (a lab patch's switches), in $BUILD itself: the header in
# $BUILD/cuda-lab is rewritten and only its includers rebuild; each build's binaries are copied to
# $BUILD/variants/NAME (the tree's to .../default, and back to $BUILD after the last). Else a whole build per variant
# in $BUILD-NAME with the defines in CMAKE_CUDA_FLAGS.
vnames=()
inplace=0; [ -n "${BUILD_VARIANTS:-}" ] && [ -f "$labh" ] && grep -rqs '"ggml-cuda-lab.h"' ggml/src && inplace=1
vbin() {  # vbin <variant> <bench|test_backend_cuda>: that build's binary
  local d=$BUILD; [ "$1" = default ] || d=$BUILD-$1
  if [ $inplace = 1 ]; then echo "$BUILD/variants/$1/$2"
  elif [ "$2" = bench ]; then echo "$d/bin/bench"
  else echo "$d/tests/$2"; fi
}
vtargets=(bench); [ -n "${VARIANT_TESTS:-}" ] && vtargets+=(test_backend_cuda)
save_bins() {
  mkdir -p "$BUILD/variants/$1" && cp "$BUILD/bin/bench" "$BUILD/variants/$1/" &&
    { [ -z "${VARIANT_TESTS:-}" ] || cp "$BUILD/tests/test_backend_cuda" "$BUILD/variants/$1/"; }
}
[ $inplace = 1 ] && save_bins default
for bv in ${BUILD_VARIANTS:-}; do
  vn=${bv%%=*}; vd=${bv#*=}
  if [ -z "$vn" ] || [ "$vn" = "$bv" ] || [ -z "$vd" ]; then
    log "BUILD_VARIANTS: '$bv' is not name=DEF[,DEF]"; continue
  fi
  if [ $inplace = 1 ]; then
    { echo "// BUILD_VARIANTS $vn"; for d in ${vd//,/ }; do echo "#define ${d/=/ }"; done; } > "$labh"
    { cmake --build "$BUILD" -j16 --target "${vtargets[@]}" > "$OUT/build-$vn.log" 2>&1 && save_bins "$vn"; } ||
      { log "build of variant $vn FAILED"; grep -E "error" "$OUT/build-$vn.log" | head -10; continue; }
  else
    vt=OFF; [ -n "${VARIANT_TESTS:-}" ] && vt=ON
    cmake -S . -B "$BUILD-$vn" -DCMAKE_CUDA_ARCHITECTURES=90 -DCMAKE_BUILD_TYPE=Release -DGGML_CUDA=ON \
      -DGGML_BUILD_TESTS=$vt -DCMAKE_CUDA_FLAGS="-D${vd//,/ -D}" "${prefix_args[@]}" > "$OUT/cmake-$vn.log" 2>&1 &&
      cmake --build "$BUILD-$vn" -j16 --target "${vtargets[@]}" > "$OUT/build-$vn.log" 2>&1 ||
      { log "build of variant $vn FAILED"; grep -E "error" "$OUT/build-$vn.log" | head -10; continue; }
  fi
  vnames+=("$vn")
  log "build of variant $vn (-D${vd//,/ -D}$([ $inplace = 1 ] && echo ", in $BUILD")): $(( $(date +%s) - t0 )) s"
  if [ -n "${VARIANT_TESTS:-}" ]; then  # the variant's kernels against the CPU: test_backend_cuda -tc=VARIANT_TESTS
    "$(vbin "$vn" test_backend_cuda)" -tc="$VARIANT_TESTS" > "$OUT/test-$vn.log" 2>&1
    log "variant $vn: test_backend_cuda -tc='$VARIANT_TESTS' rc=$? $(grep -E '^\[doctest\] (test cases|assertions)' \
      "$OUT/test-$vn.log" | tr -s ' ' | tr '\n' ' ')"
  fi
done
if [ $inplace = 1 ]; then  # the tree's binaries back in $BUILD (the header's includers rebuild at the next build)
  labh_reset
  cp "$BUILD/variants/default/bench" "$BUILD/bin/bench"
  [ -z "${VARIANT_TESTS:-}" ] || cp "$BUILD/variants/default/test_backend_cuda" "$BUILD/tests/"
fi

summary=()
if [ "$STAGE" != bench ] || [ "${RUN_TESTS:-0}" = 1 ]; then
  "$BUILD/tests/test_backend_cuda" ${TEST_ARGS:-} > "$OUT/test_backend_cuda.log" 2>&1
  rc=$?
  grep -E "ERROR|FAILED|failed|nmse|SKIPPED|cases$|graph replays" "$OUT/test_backend_cuda.log" | grep -v "^\s*$" | head -60
  tail -4 "$OUT/test_backend_cuda.log"
  summary+=("test_backend_cuda rc=$rc")
  # whole-model GPU vs CPU logits for every -ngl (random models written by gguf-py with this python3)
  LLM_PYTHON=$(command -v python3) "$BUILD/tests/test_llm_gpu" > "$OUT/test_llm_gpu.log" 2>&1
  rc=$?
  tail -3 "$OUT/test_llm_gpu.log"
  summary+=("test_llm_gpu rc=$rc")
fi

bw=$("$BUILD/bin/bench-bw" 4 20 | tee "$OUT/bw.txt" | awk '/^bw_GBps/ {print $2}')
summary+=("copy bandwidth: ${bw} GB/s (read+write)")

for v in ${MMVQ_VARIANTS:-}; do
  GGML_CUDA_MMVQ=$v "$BUILD/bin/bench-mmvq" ${MMVQ_REPS:-30} | tee -a "$OUT/mmvq.md" | grep -v "^| variant\|^| ---"
done

# the models of the usual bench table, and those the KV-type runs need (generated once for both)
if [ -n "${KV_TYPES:-}" ]; then BENCH_MODELS=${MODELS-}; KV_MODELS=${KV_MODELS:-l3-q8_0}; else
  BENCH_MODELS=${MODELS:-l2-q8_0 l2-f16}; KV_MODELS=""; fi
ALL_MODELS=$(echo $BENCH_MODELS $KV_MODELS | tr ' ' '\n' | awk 'NF && !seen[$0]++' | xargs)

if [ "$STAGE" = bench ]; then
  gen=gguf-py/scripts/gen_random_llama.py
  PY=${PY:-python3}
  declare -A files
  timed() {  # timed <what> <cmd...>: run it, log "<what>: N s" (and rc when it failed)
    local what=$1 ts=$(date +%s.%N) rc
    shift; "$@"; rc=$?
    local dt=$(awk -v a="$ts" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')
    log "$what: $dt s$([ $rc = 0 ] || echo " (FAILED rc=$rc)")"
    return $rc
  }
  gen_f16() { [ -f "$2" ] || timed "generate $1 f16 (--fast)" $PY $gen --preset "$1" --outtype f16 --fast --out "$2"; }
  quantize_to() {  # the K-quant mixes take ~10x longer than the rest: all cores for them
    local nt=$QT; [[ $3 == *_K* ]] && nt=$(nproc)
    "$BUILD/bin/quantize" "$1" "$2" "$3" "$nt" > "$OUT/quantize-$3.log" 2>&1
  }
  gen_quant() {  # gen_quant <preset> <f16 file> <out file> <type>: via our quantize, from the f16 file
    [ -f "$3" ] && return 0
    if [ ! -f "$2" ]; then log "no $2: not quantizing $3"; return 1; fi
    timed "quantize $1 f16 -> $4" quantize_to "$2" "$3" "$4"
  }
  # the f16 files first, then every quantization at once (threads split between them)
  nq=0
  for m in $ALL_MODELS; do
    case $m in
      l2-*) gen_f16 llama2-7b /tmp/llama2-7b-f16.gguf ;;
      l3-*) gen_f16 llama3-8b /tmp/llama3-8b-f16.gguf ;;
    esac
    [[ $m == *-f16 ]] || nq=$((nq + 1))
  done
  QT=$(( $(nproc) / (nq > 0 ? nq : 1) )); [ "$QT" -lt 1 ] && QT=1
  for m in $ALL_MODELS; do
    case $m in
      l2-f16)  f=/tmp/llama2-7b-f16.gguf ;;
      l2-q8_0) f=/tmp/llama2-7b-q8_0.gguf;   gen_quant llama2-7b /tmp/llama2-7b-f16.gguf $f q8_0 & ;;
      l2-q4_0) f=/tmp/llama2-7b-q4_0.gguf;   gen_quant llama2-7b /tmp/llama2-7b-f16.gguf $f q4_0 & ;;
      l2-q4km) f=/tmp/llama2-7b-q4_k_m.gguf; gen_quant llama2-7b /tmp/llama2-7b-f16.gguf $f q4_K_M & ;;
      l3-f16)  f=/tmp/llama3-8b-f16.gguf ;;
      l3-q8_0) f=/tmp/llama3-8b-q8_0.gguf;   gen_quant llama3-8b /tmp/llama3-8b-f16.gguf $f q8_0 & ;;
      l3-q4km) f=/tmp/llama3-8b-q4_k_m.gguf; gen_quant llama3-8b /tmp/llama3-8b-f16.gguf $f q4_K_M & ;;
    esac
    files[$m]=$f
  done
  wait
  log "models ready: $(( $(date +%s) - t0 )) s"
  if [ "$PROFILE" = 1 ]; then  # docs/profile.md: the decode step's nodes, bench's pp/tg steps, the off/on A/B
    pf=${files[l2-q8_0]:-/tmp/llama2-7b-q8_0.gguf}
    log "profile of $pf"
    "$BUILD/bin/graph-dump" -m "$pf" -n 1 -d ${PROFILE_DEPTH:-512} -c 2048 -ngl 99 -r 5 --top 30 --profile \
      -o "$OUT/profile-decode" > "$OUT/profile-decode.txt" 2> "$OUT/profile-decode.err"
    echo "graph-dump --profile rc=$?"; cat "$OUT/profile-decode.txt"; tail -3 "$OUT/profile-decode.err"
    "$BUILD/bin/bench" -m "$pf" -p ${PP:-512} -n ${TG:-128} -ngl 99 -r 3 --profile ${BENCH_ARGS:-} \
      > "$OUT/profile-bench.md" 2> "$OUT/profile-bench.err"
    echo "bench --profile rc=$?"; cat "$OUT/profile-bench.md"
    for i in 1 2 3; do  # same binary, same machine: tg without --profile, then with (its table row only)
      for a in "" --profile; do
        r=$("$BUILD/bin/bench" -m "$pf" -p 0 -n ${TG:-128} -ngl 99 -r 3 $a ${BENCH_ARGS:-} 2>/dev/null |
            grep -E "\| *tg[0-9]+" | awk -F'|' '{print $10}' | xargs)
        echo "profiling-off A/B: run $i bench ${a:-(no --profile)}: tg t/s $r"
      done
    done | tee "$OUT/profile-ab.txt"
  fi
  echo "| model | size GB | test | t/s | roofline t/s (bench: size / copy bw) | % of roofline |" > "$OUT/bench.md"
  echo "| --- | --- | --- | --- | --- | --- |" >> "$OUT/bench.md"
  for pm in ${PROFILE_MODEL:-}; do  # per-op GPU times (eager, one sync per graph); a list of models
    GGML_CUDA_PROFILE=1 "$BUILD/bin/bench" -m "${files[$pm]}" -p ${PROFILE_PP:-${PP:-512}} -n ${TG:-128} -ngl 99 -r 1 \
      -o md ${BENCH_ARGS:-} > "$OUT/profile-$pm.md" 2> "$OUT/profile-$pm.err"
    echo "profile $pm:"; grep -E "profile|ms/graph" "$OUT/profile-$pm.err" | head -${PROFILE_LINES:-40}
  done
  for m in $BENCH_MODELS; do
    f=${files[$m]}
    "$BUILD/bin/bench" -m "$f" -p ${PP:-512} -n ${TG:-128} -ngl 99 -r ${REPS:-3} -o md ${BENCH_ARGS:-} > "$OUT/bench-$m.md" 2> "$OUT/bench-$m.err"
    cat "$OUT/bench-$m.md"
    tail -3 "$OUT/bench-$m.err"
    size=$(stat -c %s "$f")
    # rows: | model | size | params | backend | ngl | threads | fa | test | t/s | roofline t/s | % roofline |
    # (bench's roofline: tensor bytes / the D2D copy bandwidth it measured, as bench-bw does; "-" for pp)
    grep -E "\| *(pp|tg)[0-9]+" "$OUT/bench-$m.md" | while IFS='|' read -r _ c1 c2 c3 c4 c5 c6 c7 c8 c9 c10 c11 _; do
      test=$(echo "$c8" | xargs); tps=$(echo "$c9" | xargs); roof=$(echo "$c10" | xargs); pct=$(echo "$c11" | xargs)
      [ -z "$test" ] && continue
      echo "| $m | $(awk -v s=$size 'BEGIN{printf "%.2f", s/1e9}') | $test | $tps | $roof | $pct |" >> "$OUT/bench.md"
    done
  done
  # VARIANTS="GGML_CUDA_QT_RPW=2 GGML_CUDA_TWICE=norm,attn ...": tg again with each env setting (words are
  # settings; commas inside a value stay), alternating with the default, for same-machine A/B
  for m in ${VARIANTS:+${MODELS:-}}; do
    for v in default ${VARIANTS}; do
      over_budget "$m $v" && continue
      e=(); [ "$v" = default ] || e=(${v//+/ })  # A=1+B=2: both
      r=$(env "${e[@]}" "$BUILD/bin/bench" -m "${files[$m]}" -p 0 -n ${TG:-128} -ngl 99 -r ${VREPS:-2} -o md \
          ${BENCH_ARGS:-} 2>/dev/null | grep -E "\| *tg[0-9]+" | awk -F'|' '{print $10}' | xargs)
      echo "| $m | $v | $r |" >> "$OUT/variants.md"
    done
  done
  # BUILD_VARIANTS: tg of each model on this tree's bench and on each variant's, alternating, VROUNDS rounds
  for m in ${vnames[@]:+${MODELS:-}}; do
    for round in $(seq ${VROUNDS:-2}); do
      for v in default "${vnames[@]}"; do
        over_budget "$m build $v round $round" && continue
        b=$(vbin "$v" bench)
        t=$("$b" -m "${files[$m]}" -p 0 -n ${TG:-128} -ngl 99 -r ${VREPS:-2} -o md ${BENCH_ARGS:-} 2>/dev/null |
            grep -E "\| *tg[0-9]+" | awk -F'|' '{print $10}' | xargs)
        echo "| $m | build $v, round $round | $t |" >> "$OUT/variants.md"
      done
    done
  done
  # KV_TYPES="f16 q8_0 q4_0": K and V cache of each type at depth (decode reads the whole cache every token)
  for m in $KV_MODELS; do
    for kt in $KV_TYPES; do
      over_budget "$m -ctk/-ctv $kt" && continue
      "$BUILD/bin/bench" -m "${files[$m]}" -p ${KV_PP:-512} -n ${KV_TG:-64} -d ${KV_DEPTH:-16384} -ngl 99 -fa 1 \
        -ctk $kt -ctv $kt -r ${KV_REPS:-2} -o md ${BENCH_ARGS:-} > "$OUT/kv-$m-$kt.md" 2> "$OUT/kv-$m-$kt.err"
      rc=$?
      [ $rc = 0 ] || { log "bench $m -ctk/-ctv $kt FAILED rc=$rc"; tail -5 "$OUT/kv-$m-$kt.err"; }
      grep -iE "kv|cache|host memory" "$OUT/kv-$m-$kt.err" | head -3
      grep -E "\| *(pp|tg)[0-9]+" "$OUT/kv-$m-$kt.md" | while IFS='|' read -r _ c1 c2 c3 c4 c5 c6 c7 c8 c9 _; do
        echo "| $m | $kt | $(echo "$c8" | xargs) | $(echo "$c9" | xargs) |" >> "$OUT/kv.md"
      done
    done
  done
  # BATCHED="l2-q8_0": aggregate throughput of many sequences (batched-bench, like llama-batched-bench)
  for m in ${BATCHED:-}; do
    "$BUILD/bin/batched-bench" -m "${files[$m]}" -npp ${BPP:-512} -ntg ${BTG:-128} -npl ${BNPL:-1,8,32,64} -ngl 99 \
      ${BATCHED_ARGS:--fa 1} > "$OUT/batched-$m.md" 2> "$OUT/batched-$m.err"
    echo "batched $m:"; cat "$OUT/batched-$m.md"; tail -3 "$OUT/batched-$m.err"
  done
  echo; cat "$OUT/bench.md"
  [ -f "$OUT/variants.md" ] &&
    { echo; echo "| model | variant (env or build) | tg t/s |"; echo "| --- | --- | --- |"; cat "$OUT/variants.md"; }
  [ -f "$OUT/kv.md" ] && { echo; echo "| model | -ctk/-ctv | test | t/s |"; echo "| --- | --- | --- | --- |"; cat "$OUT/kv.md"; }
fi
echo
log "summary:"
for s in "${summary[@]}"; do echo "  $s"; done
