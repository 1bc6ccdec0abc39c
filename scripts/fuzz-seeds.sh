#!/usr/bin/env bash
# Seed corpora for the fuzz targets, made by the project's own writers (gguf-py) and test inputs.
#   bash scripts/fuzz-seeds.sh OUTDIR
set -euo pipefail
cd "$(dirname "$0")/.."
out=$1
LLM_SHARED=${LLM_SHARED:-$(cd .. && pwd)/shared}
mkdir -p "$out"/{fuzz_gguf,fuzz_model_load,fuzz_tokenize,fuzz_chat,fuzz_args}
py=/usr/bin/python3
# tiny valid models (gguf-py/scripts/gen_random_llama.py): synthetic SPM byte vocab of 64 tokens,
# f32/f16/q8_0, tied and untied, with and without rope_freqs; all well under fuzz.sh's -max_len (64 KiB)
i=0
for ot in f32 f16 q8_0; do
  for tied in "" "--tied"; do
    f="$out/fuzz_model_load/tiny-$ot${tied#-}.gguf"
    [ -f "$f" ] || $py gguf-py/scripts/gen_random_llama.py --custom --n-embd 32 --n-ff 32 --n-layer 1 --n-head 2 \
      --n-head-kv 1 --n-vocab 64 --ctx 64 --vocab none --outtype $ot $tied $([ $((i % 2)) = 1 ] && echo --rope-freqs) \
      --seed $i --out "$f" >/dev/null
    cp -n "$f" "$out/fuzz_gguf/" ; i=$((i+1))
  done
done
# tokenizer inputs: every test string of the llama.cpp vectors, one file each
$py - "$LLM_SHARED/models/ggml-vocab-llama-bpe.gguf.inp" "$out/fuzz_tokenize" <<'PY'
import sys, os
data = open(sys.argv[1], encoding='utf-8').read().split("\n__ggml_vocab_test__\n")
for i, s in enumerate(data):
    for flag in (0, 1, 3):
        open(os.path.join(sys.argv[2], f"inp{i}-{flag}"), "wb").write(bytes([flag]) + s.encode())
PY
printf '\x00Be brief.\x00\x01Hello\x00\x02Hi there\x00\x01How are you?' > "$out/fuzz_chat/seed1"
printf '\x01<|eot_id|>[INST]' > "$out/fuzz_chat/seed2"
printf -- '-m\x00x.gguf\x00-p\x00hello\x00-n\x0016\x00--temp\x000.7' > "$out/fuzz_args/seed1"
printf -- '-cnv\x00-sys\x00be nice\x00--top-p\x000.9\x00-c\x00512\x00-s\x00-1' > "$out/fuzz_args/seed2"
