#!/usr/bin/env bash
# End-to-end checks of the tools on the real shared model (run by scripts/test.sh):
# the README main job's greedy story, a q8_0 quantize round trip that still generates, a Q4_K_M mix
# (type summary in gguf-info and main), quantize vs llama-quantize's files on the shared quant vectors,
# perplexity, tokenize, graph-dump, main's llama.cpp flags (-i/-r on a scripted stdin, -st, --ignore-eos, -fa,
# escapes, unsupported flags), scripts/fattn-trace.py on a made-up trace and its bad inputs, then every bad input of
# scripts/bad-inputs.sh.
#   bash scripts/smoke-tools.sh [BUILD_DIR]
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
bin=$build/bin
export LLM_SHARED=${LLM_SHARED:-$(cd .. && pwd)/shared}
model=$LLM_SHARED/models/stories260K.gguf
W=$(mktemp -d /tmp/smoke-tools.XXXXXX)
trap 'rm -rf "$W"' EXIT
pass=0 fail=0
check() {  # name, expected substring, command...
  local name=$1 want=$2
  shift 2
  local out
  if out=$("$@" 2>"$W/err") && [[ "$out" == *"$want"* ]]; then
    pass=$((pass + 1))
    echo "ok   $name"
  else
    fail=$((fail + 1))
    echo "FAIL $name: wanted '$want'"
    echo "$out" | head -5
    head -5 "$W/err"
  fi
}
story="Once upon a time, there was a little girl named Lily. She loved to play outside in the park."
check "main greedy story (f32)" "$story" "$bin/main" -m "$model" -p "Once upon a time" -n 40 --temp 0 -t 2
check "quantize to q8_0" "model size:" "$bin/quantize" "$model" "$W/q8.gguf" q8_0 2
check "main on the q8_0 file" "Once upon a time, there was" "$bin/main" -m "$W/q8.gguf" -p "Once upon a time" -n 16 --temp 0
check "quantize to Q4_K_M (64-wide rows: fallbacks)" "file type   = Q4_K - Medium" "$bin/quantize" "$model" "$W/q4km.gguf" Q4_K_M 2
check "gguf-info: per-type counts and BPW" "file size   = 0.28 MiB (7.92 BPW)" "$bin/gguf-info" "$W/q4km.gguf"
main_summary() { "$bin/main" -m "$W/q4km.gguf" -p "Once upon a time" -n 8 --temp 0 2>&1; }
check "main on the Q4_K_M file prints its type summary" "- type q5_0:   29 tensors" main_summary
quant_vectors=$LLM_SHARED/models/quant-vectors
if [ -f "$quant_vectors/kq-f16.gguf" ]; then
  same_as_llama_cpp() {
    for t in Q4_0 Q2_K Q3_K_M Q4_K_M Q5_K_M Q6_K; do
      "$bin/quantize" "$quant_vectors/kq-f16.gguf" "$W/kq-$t.gguf" $t 2 > /dev/null 2>&1 &&
        cmp -s "$W/kq-$t.gguf" "$quant_vectors/kq-$t.gguf" && printf '%s ' $t
    done
  }
  check "quantize equals llama-quantize byte for byte" "Q4_0 Q2_K Q3_K_M Q4_K_M Q5_K_M Q6_K " same_as_llama_cpp
else
  echo "skip quantize vs llama-quantize ($quant_vectors missing)"
fi
check "main seeded sampling is reproducible" "$("$bin/main" -m "$model" -p "Once" -n 24 --temp 0.8 -s 42 2>/dev/null)" \
  "$bin/main" -m "$model" -p "Once" -n 24 --temp 0.8 -s 42
printf '%s\n' "$story One day, she saw a big, red ball. She wanted to play with it." > "$W/text.txt"
for i in 1 2 3 4; do cat "$W/text.txt" "$W/text.txt" > "$W/t2" && mv "$W/t2" "$W/text.txt"; done
check "perplexity" "Final estimate: PPL =" "$bin/perplexity" -m "$model" -f "$W/text.txt" -c 64
check "tokenize --ids" "[1, 403, 407, 261, 378]" "$bin/tokenize" -m "$model" -p "Once upon a time" --ids
check "graph-dump of a decode step" "wrote $W/g.dot" "$bin/graph-dump" -m "$model" -n 1 -o "$W/g"
# chat: a Llama 3 vocab (random weights); turn 2 must evaluate only what it adds to the cache:
# <|start_header_id|>user<|end_header_id|>\n\nSecond question<|eot_id|><|start_header_id|>assistant... = 11 tokens
/usr/bin/python3 gguf-py/scripts/gen_random_llama.py --custom --n-embd 32 --n-ff 64 --n-layer 1 --n-head 2 \
  --n-head-kv 1 --n-vocab 128256 --vocab bpe --ctx 512 --outtype f32 --out "$W/l3.gguf" > /dev/null
chat_turns() {
  printf 'Hello there\nSecond question\n' | "$bin/main" -m "$W/l3.gguf" -cnv -sys "Be brief" -n 3 --temp 0 \
    --verbose-prompt 2>&1 | grep -o 'prompt: [0-9]* tokens' | tr '\n' ' '
}
check "chat keeps history in the KV cache" "prompt: 19 tokens prompt: 11 tokens" chat_turns
# main's llama.cpp flags. -i -r: the story stops at the first "."; the input line (2 tokens) goes in and the story
# goes on from it to the next "."; EOF on stdin ends with status 0
interactive_reverse_prompt() {
  local out
  out=$(printf 'Once upon\n' | "$bin/main" -m "$model" -p "Once upon a time" -i -r "." -n 32 --temp 0 \
    --verbose-prompt 2>"$W/i.err") || return 1
  printf '%s|' "$out"
  grep '^prompt: ' "$W/i.err" | tr '\n' ' '
}
check "main -i -r: the reverse prompt hands control back, the input goes on" \
  " Once upon a time, there was a little girl named Lily. a time, there was a little girl named Lily.|prompt: 5 tokens prompt: 2 tokens " \
  interactive_reverse_prompt
single_turn() {  # two lines on stdin, one turn taken (stories260K has no chat template of its own)
  local out
  out=$(printf 'Hello\nSecond\n' | "$bin/main" -m "$model" -cnv -st --chat-template llama2 -n 8 --temp 0 \
    --verbose-prompt 2>&1) || return 1
  echo "turns: $(printf '%s\n' "$out" | grep -o 'prompt: [0-9]* tokens' | wc -l)."
}
check "main -cnv -st: one chat turn, then exit" "turns: 1." single_turn
ignore_eos() {  # the sampler's path (EOS masked in the logits it gets); the timing line counts the tokens
  "$bin/main" -m "$model" -p "Once upon a time" -n 64 --ignore-eos --temp 1 -s 3 2>&1 >/dev/null |
    grep -o 'sampling time .* runs' | sed 's/.*\/ *\([0-9]*\) runs/[\1 runs]/'
}
check "main --ignore-eos -n 64: exactly 64 tokens" "[64 runs]" ignore_eos
fa_same() {
  local a b c
  a=$("$bin/main" -m "$model" -p "Once upon a time" -n 40 --temp 0 -fa auto 2>/dev/null) &&
    b=$("$bin/main" -m "$model" -p "Once upon a time" -n 40 --temp 0 -fa on 2>/dev/null) &&
    c=$("$bin/main" -m "$model" -p "Once upon a time" -n 40 --temp 0 -fa off 2>/dev/null) &&
    [ "$a" = "$b" ] && [ "$a" = "$c" ] && echo "same:$a"
}
check "main -fa auto|on|off: the same greedy text on the CPU" "same: $story" fa_same
unsupported_flag() { "$bin/main" -m "$model" --lora x.gguf 2>&1 || true; }
check "main --lora: a llama.cpp flag main lacks says so" "error: not supported: --lora" unsupported_flag
unknown_flag() { "$bin/main" -m "$model" --foo 2>&1 || true; }
check "main --foo: unknown" "error: unknown argument: --foo" unknown_flag
escapes() {  # -n 0: only the echoed prompt
  printf '[%s][%s]' "$("$bin/main" -m "$model" -p 'a\nb' -n 0 2>/dev/null)" \
    "$("$bin/main" -m "$model" -p 'a\nb' -n 0 --no-escape 2>/dev/null)"
}
check "main -p 'a\\nb': escapes processed, --no-escape keeps them" $'[ a\nb][ a\\nb]' escapes
# constrained output: 200 seeded generations under a JSON schema, each validated by python3-jsonschema
json_schema_200() {
  local schema='{"type":"object","properties":{"name":{"type":"string","maxLength":12},"age":{"type":"integer","minimum":0,"maximum":120},"pet":{"enum":["cat","dog","bird"]},"happy":{"type":"boolean"}},"required":["name","age","pet","happy"],"additionalProperties":false}'
  mkdir -p "$W/js"
  for s in $(seq 1 200); do
    "$bin/main" -m "$model" -p "The answer:" -n 400 --temp 0.8 -s "$s" -j "$schema" --log-disable --no-display-prompt \
      > "$W/js/$s.json" 2>/dev/null || { echo "seed $s: main failed"; return 1; }
  done
  /usr/bin/python3 - "$schema" "$W/js" <<'PY'
import json, jsonschema, os, sys
schema = json.loads(sys.argv[1])
ok = 0
for f in sorted(os.listdir(sys.argv[2])):
    try:
        jsonschema.validate(json.loads(open(os.path.join(sys.argv[2], f)).read()), schema)
        ok += 1
    except Exception as e:
        print(f, "invalid:", str(e).splitlines()[0])
print(f"{ok} valid")
PY
}
check "main -j SCHEMA: 200 seeded generations validate against the schema" "200 valid" json_schema_200
grammar_file() {  # arithmetic.gbnf: numbers, variables, operators, parentheses, "=", spaces, newlines; anything else is an error
  local out
  out=$("$bin/main" -m "$model" -p "x" -n 24 --temp 0.8 -s 1 --grammar-file grammars/arithmetic.gbnf --log-disable \
        --no-display-prompt) || return 1
  [ -n "$out" ] && echo "left over: [$(printf '%s' "$out" | tr -d '0-9a-z_+*/().= \n\t-')]"
}
check "main --grammar-file: only the grammar's characters" "left over: []" grammar_file
jinja_chat() {  # a ChatML template as the model's own: 46 prompt tokens (the template's text, not [INST])
  printf '{%% for m in messages %%}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{%% endfor %%}{%% if add_generation_prompt %%}<|im_start|>assistant\n{%% endif %%}' > "$W/chatml.jinja"
  "$bin/main" -m "$model" --jinja --chat-template-file "$W/chatml.jinja" -cnv -st -p "Once upon a time" -n 4 --temp 0 2>&1 |
    grep -o 'prompt eval time .* tokens' | sed 's/.*\/ *\([0-9]*\) tokens/[\1 tokens]/'
}
check "main --jinja --chat-template-file: the template renders the turn" "[46 tokens]" jinja_chat
fattn_trace() {  # the decode attention timeline's summary (scripts/fattn-trace.py) on two made-up launches
  {  # launch 1 at 0 ns; launch 2 at 100 us: block 0 0 waits 1 us, loops to 21 us, counts at 23 us; the last
     # block (0 1) counts at 24 us, fences at 24.5 us and merges until 30 us; the other ends at 22 us
    echo "FATTN 0 0 5 0 100000 101000 120000 121000 123000"
    echo "FATTN 0 1 6 1 100000 101000 119000 121000 124000 124500 130000"
    echo "FATTN 1 0 7 0 102000 103000 118000 119000 122000"
    echo "FATTN 0 0 5 0 0 1000 20000 21000 23000"
    echo "FATTN 0 1 6 1 0 1000 19000 21000 24000 24500 30000"
    echo "unrelated output"
  } > "$W/fattn.txt"
  /usr/bin/python3 scripts/fattn-trace.py "$W/fattn.txt" --last 1 | tr -s ' ' | tr '\n' '|'
}
check "fattn-trace.py: one launch's phases" \
  "2 launches, the last 1, 3 blocks; us, median (max)| start 0.00 (2.00)| wait 1.00 (1.00)| loop 20.00 (20.00)| finish 3.00 (3.00)| block end 22.50 (23.00)| merge fence 0.50 (0.50)| merge 5.50 (5.50)| launch end 30.00 (30.00)|" \
  fattn_trace
fattn_trace_bad() {  # each bad input: its one-line error, and "rc 0" where it exited 0
  echo "FATTN 0 0 5 0 0 1000 x 21000 23000" > "$W/fattn-bad.txt"
  echo "no trace here" > "$W/fattn-none.txt"
  local args out
  for args in "$W/none.txt" "$W/fattn-none.txt" "$W/fattn-bad.txt" "$W/fattn.txt --last 0"; do
    # shellcheck disable=SC2086
    if out=$(/usr/bin/python3 scripts/fattn-trace.py $args 2>&1); then echo "rc 0"; fi
    printf '%s|' "$out"
  done
}
check "fattn-trace.py: bad inputs are one-line errors with a non-zero exit" \
  "fattn-trace: $W/none.txt: No such file or directory|fattn-trace: $W/fattn-none.txt: no FATTN lines (built with -DGGML_CUDA_FATTN_TRACE=ON, run with GGML_CUDA_FATTN_TRACE=1?)|fattn-trace: malformed line: FATTN 0 0 5 0 0 1000 x 21000 23000|fattn-trace: --last 0: must be 1 or more|" \
  fattn_trace_bad
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
bash scripts/bad-inputs.sh "$build" > "$W/bad.md"
tail -1 "$W/bad.md"
