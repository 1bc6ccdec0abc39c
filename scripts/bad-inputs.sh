#!/usr/bin/env bash
# Runs every tool against bad inputs (missing/unreadable/corrupt files, bad flags, bad prompts, full
# disk, Ctrl-C) and checks each fails with ONE clear error line and a non-zero exit, never a crash.
#   bash scripts/bad-inputs.sh [BUILD_DIR]        # default: build (tools in BUILD_DIR/bin)
# Prints a markdown table (input | command | message | exit | verdict) and exits non-zero if any case
# misbehaves. Verdict rules: exit status not 0 (Ctrl-C: 0 or 130 with the timings printed; "ok" cases:
# 0); no sanitizer report, assert, abort or signal; exactly one line on stderr/stdout that says "error".
# Runs as root too: then chmod 000 / read-only dirs do not stop reads or writes, and those cases are
# skipped (a directory given as a file still is tested).
set -uo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
bin=$build/bin
export LLM_SHARED=${LLM_SHARED:-$(cd .. && pwd)/shared}
models=$LLM_SHARED/models
story=$models/stories260K.gguf
tiny=$models/llama-2-tiny-random.gguf
py=/usr/bin/python3
for t in main quantize tokenize perplexity bench gguf-info graph-dump; do
  [ -x "$bin/$t" ] || { echo "bad-inputs: $bin/$t not built (cmake --build $build --target $t)" >&2; exit 2; }
done

W=$(mktemp -d /tmp/bad-inputs.XXXXXX)
full=""
cleanup() {
  [ -n "$full" ] && umount "$full" 2>/dev/null
  rm -rf "$W"
}
trap cleanup EXIT

# ---- inputs --------------------------------------------------------------------------------------
mkdir "$W/dir.gguf"
: > "$W/empty.gguf"
head -c 100000 "$story" > "$W/truncated.gguf"
cp "$story" "$W/corrupt-nkv.gguf"         # n_kv = 2^64-1
printf '\xff\xff\xff\xff\xff\xff\xff\xff' | dd of="$W/corrupt-nkv.gguf" bs=1 seek=16 conv=notrunc status=none
cp "$story" "$W/corrupt-mid.gguf"         # 64 bytes of 0xff in the middle of the KV section
head -c 64 /dev/zero | tr '\0' '\377' | dd of="$W/corrupt-mid.gguf" bs=1 seek=600 conv=notrunc status=none
printf '#!/bin/sh\necho this is not a model\n' > "$W/script.gguf"
$py - "$story" "$W/falcon.gguf" "$W/noheads.gguf" <<'PY'
import struct, sys
b = open(sys.argv[1], "rb").read()
key = b"general.architecture"
i = b.index(struct.pack("<Q", len(key)) + key)
v = i + 8 + len(key) + 4 + 8                      # the value's 5 bytes "llama"
assert b[v:v + 5] == b"llama"
open(sys.argv[2], "wb").write(b[:v] + b"falcn" + b[v + 5:])
key = b"llama.attention.head_count"
i = b.index(struct.pack("<Q", len(key)) + key)
t = i + 8 + len(key)                               # type u32, then the u32 value
open(sys.argv[3], "wb").write(b[:t + 4] + struct.pack("<I", 0) + b[t + 8:])
PY
$py - "$story" "$W/novocab.gguf" <<'PY'
import sys
import numpy as np
sys.path.insert(0, "gguf-py")
from gguf import GGUFReader, GGUFWriter
r = GGUFReader(sys.argv[1])
w = GGUFWriter(sys.argv[2])
for key, fld in r.fields.items():
    if not key.startswith("tokenizer."):
        w.add_kv(key, fld.value, fld.type, fld.array_type)
for t in r.tensors:
    w.add_tensor(t.name, np.array(t.data))
w.write()
PY
$py - "$story" "$W/type16.gguf" "$W/type99.gguf" <<'PY'
import struct, sys
b = open(sys.argv[1], "rb").read()
name = b"blk.0.ffn_down.weight"
i = b.index(struct.pack("<Q", len(name)) + name) + 8 + len(name)
n_dims = struct.unpack_from("<I", b, i)[0]
t = i + 4 + 8 * n_dims                             # the tensor's ggml type (i32)
assert struct.unpack_from("<i", b, t)[0] == 0      # f32
for path, ty in ((sys.argv[2], 16), (sys.argv[3], 99)):  # 16 = iq2_xxs (ggml has it, we do not); 99: none
    open(path, "wb").write(b[:t] + struct.pack("<i", ty) + b[t + 4:])
PY
touch "$W/noperm.gguf" && chmod 000 "$W/noperm.gguf"
long_prompt=$(for i in $(seq 400); do printf 'Once upon a time there was a cat. '; done)
printf 'short text' > "$W/short.txt"
printf 'ab\xff\xfe\xc3cd' > "$W/bad-utf8.txt"
mkdir "$W/ro" && chmod 555 "$W/ro"
full_note="tmpfs of 1 MiB"
full="$W/full"
mkdir "$full"
if ! mount -t tmpfs -o size=1m tmpfs "$full" 2>/dev/null; then
  full=""
  full_note="ulimit -f 256 (512 KiB), SIGXFSZ ignored: mount not permitted"
fi

# ---- runner --------------------------------------------------------------------------------------
n_bad=0
echo "| input | command | message | exit | verdict |"
echo "|---|---|---|---|---|"
# case INPUT_DESCRIPTION EXPECT(fail|int) COMMAND...
case_() {
  local what=$1 expect=$2
  shift 2
  local out rc
  out=$(timeout -k 5 120 "$@" 2>&1 </dev/null)
  rc=$?
  report "$what" "$expect" "$rc" "$out" "$*"
}
# case_want WANTED INPUT_DESCRIPTION COMMAND...: a failing case whose error line must contain WANTED
want=""
case_want() {
  want=$1
  shift
  case_ "$1" fail "${@:2}"
  want=""
}
report() {
  local what=$1 expect=$2 rc=$3 out=$4 cmd=$5
  local msg verdict=ok n_err
  n_err=$(printf '%s\n' "$out" | grep -ci 'error' || true)
  msg=$(printf '%s\n' "$out" | grep -i -m1 'error' || true)
  if printf '%s\n' "$out" | grep -qE 'Sanitizer|GGML_ASSERT|Assertion|terminate called|Aborted|core dumped|Segmentation'; then
    verdict="CRASH"
  elif [ -n "$want" ] && [[ "$msg" != *"$want"* ]]; then
    verdict="message lacks '$want'"
  elif [ "$expect" = ok ]; then
    msg="(runs normally)"
    [ "$rc" -eq 0 ] || { verdict="exit $rc"; msg=$(printf '%s\n' "$out" | tail -1); }
  elif [ "$expect" = int ]; then
    msg=$(printf '%s\n' "$out" | grep -m1 -E 'interrupted' || true)
    if ! printf '%s\n' "$out" | grep -q 'eval time'; then verdict="no timings"; fi
    if [ "$rc" -ne 0 ] && [ "$rc" -ne 130 ]; then verdict="exit $rc"; fi
  elif [ "$rc" -eq 0 ]; then
    verdict="exit 0"
  elif [ "$rc" -ge 124 ]; then
    verdict="killed/timeout ($rc)"
  elif [ "$n_err" -ne 1 ]; then
    verdict="$n_err error lines"
    [ -z "$msg" ] && msg=$(printf '%s\n' "$out" | tail -1)
  fi
  [ "$verdict" = ok ] || n_bad=$((n_bad + 1))
  cmd=${cmd//$W/\$W}
  cmd=${cmd//$models/\$M}
  cmd=${cmd//$bin\//}
  msg=${msg//$W/\$W}
  msg=${msg//$models/\$M}
  cmd=$(printf '%s' "$cmd" | LC_ALL=C perl -pe 's/([^\x20-\x7e])/sprintf("\\x%02x", ord($1))/ge')
  msg=$(printf '%s' "$msg" | LC_ALL=C perl -pe 's/([^\x20-\x7e])/sprintf("\\x%02x", ord($1))/ge')
  [ ${#cmd} -gt 90 ] && cmd="${cmd:0:87}..."
  [ ${#msg} -gt 160 ] && msg="${msg:0:157}..."
  printf '| %s | `%s` | %s | %s | %s |\n' "$what" "${cmd//|/\\|}" "${msg//|/\\|}" "$rc" "$verdict"
}

# ---- files, for every tool that reads a model ------------------------------------------------------
for f in missing.gguf dir.gguf empty.gguf truncated.gguf corrupt-nkv.gguf corrupt-mid.gguf script.gguf \
         falcon.gguf noheads.gguf; do
  case $f in
    missing.gguf) d="missing file" ;; dir.gguf) d="directory" ;; empty.gguf) d="empty file" ;;
    truncated.gguf) d="truncated GGUF" ;; corrupt-nkv.gguf) d="corrupt GGUF (n_kv)" ;;
    corrupt-mid.gguf) d="corrupt GGUF (KV bytes)" ;; script.gguf) d="not a GGUF" ;;
    falcon.gguf) d="unknown architecture" ;; noheads.gguf) d="head_count = 0" ;;
  esac
  case_ "$d" fail "$bin/main" -m "$W/$f" -p hi -n 4
  case_ "$d" fail "$bin/perplexity" -m "$W/$f" -f "$W/short.txt"
  case_ "$d" fail "$bin/bench" -m "$W/$f"
  case "$f" in
    falcon.gguf|noheads.gguf)  # tokenize reads only the vocab, quantize converts any GGUF: not errors
      case_ "$d (vocab only: valid)" ok "$bin/tokenize" -m "$W/$f" -p hi
      case_ "$d (converter: valid)" ok "$bin/quantize" "$W/$f" "$W/out.gguf" q8_0 ;;
    *)
      case_ "$d" fail "$bin/tokenize" -m "$W/$f" -p hi
      case_ "$d" fail "$bin/quantize" "$W/$f" "$W/out.gguf" q8_0 ;;
  esac
  case "$f" in falcon.gguf|noheads.gguf) ;; *) case_ "$d" fail "$bin/gguf-info" "$W/$f" ;; esac
done
if [ "$(id -u)" -ne 0 ]; then
  case_ "unreadable (chmod 000)" fail "$bin/main" -m "$W/noperm.gguf" -p hi
  case_ "unreadable (chmod 000)" fail "$bin/gguf-info" "$W/noperm.gguf"
fi

# a tensor type this library does not implement (iq2_xxs) or that does not exist: the error names the tensor
for f in type16 type99; do
  case $f in
    type16) d="tensor of type 16 (iq2_xxs)"; w="tensor 'blk.0.ffn_down.weight': unsupported tensor type 16 (iq2_xxs)" ;;
    type99) d="tensor of type 99"; w="tensor 'blk.0.ffn_down.weight': unknown tensor type 99" ;;
  esac
  case_want "$w" "$d" "$bin/gguf-info" "$W/$f.gguf"
  case_want "$w" "$d" "$bin/main" -m "$W/$f.gguf" -p hi -n 4
  case_want "$w" "$d" "$bin/quantize" "$W/$f.gguf" "$W/out.gguf" q4_0
done

case_ "model without a tokenizer" fail "$bin/main" -m "$W/novocab.gguf" -p hi -n 4
case_ "model without a tokenizer" fail "$bin/perplexity" -m "$W/novocab.gguf" -f "$W/short.txt"
case_ "model without a tokenizer" fail "$bin/tokenize" -m "$W/novocab.gguf" -p hi
case_ "model without a tokenizer (ids only: valid)" ok "$bin/bench" -m "$W/novocab.gguf" -p 8 -n 4 -r 1

# ---- prompts and flags ---------------------------------------------------------------------------
case_ "prompt longer than the context" fail "$bin/main" -m "$story" -c 64 -p "$long_prompt" -n 4
case_ "invalid UTF-8 prompt" fail "$bin/main" -m "$story" -p $'ab\xff\xfecd' -n 4
case_ "invalid UTF-8 system prompt" fail "$bin/main" -m "$story" -cnv -sys $'\xc3' -n 4
case_ "prompt file missing" fail "$bin/main" -m "$story" -f "$W/nope.txt"
case_ "no model" fail "$bin/main" -p hi
case_ "-c -5" fail "$bin/main" -m "$story" -c -5
case_ "-n abc" fail "$bin/main" -m "$story" -n abc
case_ "-t 0" fail "$bin/main" -m "$story" -t 0
case_ "-b 0" fail "$bin/main" -m "$story" -b 0
case_ "--temp 1e9" fail "$bin/main" -m "$story" --temp 1e9
case_ "--top-p nan" fail "$bin/main" -m "$story" --top-p nan
case_ "-s 2^40" fail "$bin/main" -m "$story" -s 1099511627776
case_ "-ngl -1" fail "$bin/main" -m "$story" -ngl -1
case_ "-c missing value" fail "$bin/main" -m "$story" -c
case_ "unknown flag" fail "$bin/main" --frobnicate
case_ "newline in flag" fail "$bin/main" $'--x\ny'
case_ "unknown chat template" fail "$bin/main" -m "$story" --chat-template chatml
case_want "(f32, f16, q8_0, q4_0)" "unknown KV cache type" "$bin/main" -m "$story" -ctk q5_1
case_want "needs flash attention" "quantized V cache with -fa off" "$bin/main" -m "$story" -fa off -ctv q8_0
case_want "multiple of 32" "q8_0 KV cache, head size 8" "$bin/main" -m "$story" -fa -ctk q8_0 -ctv q8_0 -p hi -n 4
case_want "needs flash attention" "perplexity: quantized V cache without -fa" "$bin/perplexity" -m "$story" -f "$W/short.txt" -ctv q4_0
case_want "(f32, f16, q8_0, q4_0)" "bench: unknown KV cache type" "$bin/bench" -m "$story" -ctk q8
case_want "unknown split mode 'rows' for -sm (none, layer, row)" "unknown split mode" "$bin/main" -m "$story" -sm rows
case_want "bad value '1,x' for -ts" "-ts not numbers" "$bin/main" -m "$story" -ts 1,x
case_want "invalid value 'rows' for -sm" "bench: unknown split mode" "$bin/bench" -m "$story" -sm rows
case_want "invalid value '1,-1' for -ts" "bench: negative -ts share" "$bin/bench" -m "$story" -ts 1,-1
case_want "invalid value 'rows' for -sm" "perplexity: unknown split mode" "$bin/perplexity" -m "$story" -f "$W/short.txt" -sm rows
if [ -x "$bin/batched-bench" ]; then
  case_want "bad value for -ts: '1,x'" "batched-bench: -ts not numbers" "$bin/batched-bench" -m "$story" -ts 1,x
fi
case_ "tokenize: invalid UTF-8 text (byte fallback, not an error)" ok "$bin/tokenize" -m "$story" -f "$W/bad-utf8.txt"
case_ "tokenize: no -p/-f" fail "$bin/tokenize" -m "$story"
case_ "tokenize: unknown flag" fail "$bin/tokenize" -m "$story" -p hi --frob
case_ "perplexity: text too short" fail "$bin/perplexity" -m "$story" -f "$W/short.txt" -c 128
case_ "perplexity: text file missing" fail "$bin/perplexity" -m "$story" -f "$W/nope.txt"
case_ "perplexity: -c 0" fail "$bin/perplexity" -m "$story" -f "$W/short.txt" -c 0
case_ "bench: -p -1" fail "$bin/bench" -m "$story" -p -1
case_ "bench: unknown flag" fail "$bin/bench" -m "$story" --frob
case_ "bench: --probe-mib 0" fail "$bin/bench" -m "$story" --probe-mib 0
case_ "bench: -fa 2" fail "$bin/bench" -m "$story" -fa 2
if [ -x "$bin/bench-mmvq" ]; then # arguments checked before any device is opened (no GPU needed)
  case_ "bench-mmvq: unknown weight type" fail "$bin/bench-mmvq" 2 64 16 q9_9
  case_ "bench-mmvq: f32 is not a quantized type" fail "$bin/bench-mmvq" 2 64 16 f32
  case_ "bench-mmvq: N 0" fail "$bin/bench-mmvq" 2 64 0
fi
if [ -x "$bin/bench-chain" ]; then # checked before any device is opened
  case_ "bench-chain: reps 0" fail "$bin/bench-chain" 0
  case_ "bench-chain: reps not a number" fail "$bin/bench-chain" 5x
fi
case_ "graph-dump: unknown flag" fail "$bin/graph-dump" --frob
case_ "graph-dump: unwritable prefix" fail "$bin/graph-dump" -o "$W/nodir/sub/g"

# ---- llm-server flags (rejected before the model loads or a port opens) ------------------------------
if [ -x "$bin/llm-server" ]; then
  case_want "bad value for -fa: 'maybe' (on, off or auto)" "llm-server: -fa maybe" "$bin/llm-server" -m "$story" -fa maybe
  case_want "bad value for -fa: 'yes' (on, off or auto)" "llm-server: --flash-attn yes" "$bin/llm-server" -m "$story" --flash-attn yes
  case_want "-np: '0' is not an integer in [1, 64]" "llm-server: -np 0" "$bin/llm-server" -m "$story" -np 0
  case_want "-sm: unknown split mode 'rows' (none, layer, row)" "llm-server: -sm rows" "$bin/llm-server" -m "$story" -sm rows
  case_want "-ts: bad value '3,,1'" "llm-server: -ts 3,,1" "$bin/llm-server" -m "$story" -ts 3,,1
  case_want "is not one of f32, f16, q8_0, q4_0" "llm-server: unknown KV cache type" "$bin/llm-server" -m "$story" -ctk q5_1
  case_want "unknown flag '--frob'" "llm-server: unknown flag" "$bin/llm-server" -m "$story" --frob
else
  echo "| llm-server flags | - | $bin/llm-server not built (cpp-httplib missing?) | - | skipped |"
fi

# ---- quantize outputs ------------------------------------------------------------------------------
case_want "valid types: Q4_0, Q4_1" "quantize: unknown type" "$bin/quantize" "$story" "$W/o.gguf" q4_x
case_want "valid types: Q4_0, Q4_1" "quantize: unknown type (iq2_xxs)" "$bin/quantize" "$story" "$W/o.gguf" iq2_xxs
case_ "quantize: unknown option" fail "$bin/quantize" --frob "$story" "$W/o.gguf" q4_0
case_ "quantize: --dry-run (writes nothing)" ok "$bin/quantize" --dry-run "$story" "$W/dry.gguf" q4_k_m
[ -e "$W/dry.gguf" ] && { echo "| quantize --dry-run | wrote a file | \$W/dry.gguf | - | WROTE A FILE |"; n_bad=$((n_bad + 1)); }
case_ "quantize: threads 0" fail "$bin/quantize" "$story" "$W/o.gguf" q8_0 0
case_ "quantize: output dir missing" fail "$bin/quantize" "$story" "$W/nodir/o.gguf" q8_0
case_ "quantize: output under a file" fail "$bin/quantize" "$story" "$W/short.txt/o.gguf" q8_0
case_ "quantize: output is a directory" fail "$bin/quantize" "$story" "$W/dir.gguf" q8_0
case_ "quantize: output = input" fail "$bin/quantize" "$story" "$story" q8_0
if [ "$(id -u)" -ne 0 ]; then
  case_ "quantize: read-only dir" fail "$bin/quantize" "$story" "$W/ro/o.gguf" q8_0
fi
if [ -n "$full" ]; then
  case_ "quantize: full disk ($full_note)" fail "$bin/quantize" "$story" "$full/o.gguf" f32
  left=$(ls -A "$full" | tr '\n' ' ')
else
  out=$( (trap '' XFSZ; ulimit -f 256; timeout 120 "$bin/quantize" "$story" "$W/fsz.gguf" f32) 2>&1)
  rc=$?
  report "quantize: full disk ($full_note)" fail "$rc" "$out" "ulimit -f 256; quantize \$M/stories260K.gguf \$W/fsz.gguf f32"
  left=$(ls -A "$W" | grep -E '^fsz' | tr '\n' ' ')
fi
[ -n "$left" ] && { echo "| full disk | leftover files | $left | - | NOT CLEANED UP |"; n_bad=$((n_bad + 1)); }

# ---- Ctrl-C during generation ------------------------------------------------------------------------
# random weights: end-of-text is rare, so generation is still running when SIGINT arrives; the signal is
# sent once 200 bytes of generated text have appeared (not on a timer: loading may be slow on a busy box)
"$bin/main" -m "$tiny" -p "Hello" -n 1000000000 --context-shift >"$W/gen.out" 2>"$W/gen.err" &
pid=$!
for _ in $(seq 600); do
  [ "$(stat -c %s "$W/gen.out" 2>/dev/null || echo 0)" -ge 200 ] && break
  kill -0 $pid 2>/dev/null || break
  sleep 0.1
done
kill -INT $pid 2>/dev/null
( sleep 20; kill -KILL $pid 2>/dev/null ) &
killer=$!
wait $pid
rc=$?
kill $killer 2>/dev/null
report "Ctrl-C during generation" int "$rc" "$(cat "$W/gen.err")" \
  "main -m \$M/llama-2-tiny-random.gguf -p Hello -n 1e9 --context-shift; kill -INT after 200 bytes of output"

echo
echo "bad-inputs: $n_bad case(s) misbehaved"
[ "$n_bad" -eq 0 ]
