#!/usr/bin/env bash
# Seed corpora for the fuzz targets, made by the project's own writers (gguf-py) and test inputs.
#   bash scripts/fuzz-seeds.sh OUTDIR
set -euo pipefail
cd "$(dirname "$0")/.."
out=$1
LLM_SHARED=${LLM_SHARED:-$(cd .. && pwd)/shared}
mkdir -p "$out"/{fuzz_gguf,fuzz_model_load,fuzz_tokenize,fuzz_chat,fuzz_args,fuzz_jinja}
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
# the same tiny model with a 64-token byte-level BPE vocab (llama3 pre-tokenizer, merges, specials)
f="$out/fuzz_model_load/tiny-f32-tied-bpe.gguf"
[ -f "$f" ] || $py - "$out/fuzz_model_load/tiny-f32-tied.gguf" "$f" <<'PY'
import sys
import numpy as np
sys.path.insert(0, "gguf-py")
from gguf import GGUFReader, GGUFValueType, GGUFWriter
r = GGUFReader(sys.argv[1])
w = GGUFWriter(sys.argv[2])
for key, fld in r.fields.items():
    if not key.startswith("tokenizer."):
        w.add_kv(key, fld.value, fld.type, fld.array_type)
merges = ["\u0120 t", "h e", "\u0120t he", "i n", "e r", "a n", "\u0120 a", "o n", "r e", "a t", "e n", "\u0120 s",
          "o r", "i s", "i t", "in g", "\u0120 w", "o u", "\u0120 o", "e d", "a r"]
tokens = ["<|begin_of_text|>", "<|eot_id|>", "\u0120"] + [chr(c) for c in range(ord("a"), ord("z") + 1)] + \
         [str(d) for d in range(10)] + list(".,!?") + [m.replace(" ", "") for m in merges]
assert len(tokens) == 64 and len(set(tokens)) == 64
w.add_string("tokenizer.ggml.model", "gpt2")
w.add_string("tokenizer.ggml.pre", "llama-bpe")
w.add_array("tokenizer.ggml.tokens", tokens, GGUFValueType.STRING)
w.add_array("tokenizer.ggml.token_type", np.array([3, 3] + [1] * 62, np.int32))
w.add_array("tokenizer.ggml.merges", merges, GGUFValueType.STRING)
w.add_uint32("tokenizer.ggml.bos_token_id", 0)
w.add_uint32("tokenizer.ggml.eos_token_id", 1)
for t in r.tensors:
    w.add_tensor(t.name, np.array(t.data))
w.write()
PY
cp -n "$f" "$out/fuzz_gguf/"
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
# Jinja chat templates (the first byte selects the render context)
printf '\x00{%% for m in messages %%}{{ m.role }}: {{ m.content|trim }}{%% endfor %%}' > "$out/fuzz_jinja/seed1"
printf '\x01{%%- set ns = namespace(x=0) -%%}{%% for m in messages if m.role != "system" %%}{{ loop.index ~ m.content|tojson }}{%% set ns.x = ns.x + 1 %%}{%% endfor %%}{{ ns.x }}' > "$out/fuzz_jinja/seed2"
