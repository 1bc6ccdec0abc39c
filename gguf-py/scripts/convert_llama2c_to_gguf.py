#!/usr/bin/env python3
"""Convert a llama2.c checkpoint (legacy format) + tokenizer to a GGUF llama model.

    convert_llama2c_to_gguf.py stories260K.bin --tokenizer tok512.bin --out stories260K.gguf [--outtype f32]

Checkpoint: 7 int32 (dim, hidden_dim, n_layers, n_heads, n_kv_heads, vocab_size (<0: unshared classifier),
seq_len), then float32: token_embedding [vocab, dim], rms_att [L, dim], wq [L, dim, dim], wk [L, kv_dim, dim],
wv [L, kv_dim, dim], wo [L, dim, dim], rms_ffn [L, dim], w1 [L, hidden, dim], w2 [L, dim, hidden],
w3 [L, hidden, dim], rms_final [dim], freq_cis_real/imag [seq_len, head_size/2], [wcls [vocab, dim]].
llama2.c's run.c rotates adjacent pairs (like GGUF's normal rope), so wq/wk are stored unpermuted.
Tokenizer: llama2.c tokenizer.bin, SentencePiece tokenizer.model, or a directory with tokenizer.json.
"""
import argparse
import os
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from gguf import GGUFWriter  # noqa: E402
from gguf.llama import FILE_TYPES, LlamaHParams, add_llama_hparams, convert_tensor, pick_qtype  # noqa: E402
from gguf.vocab import load_hf_tokenizer, load_llama2c_tokenizer, load_spm_model  # noqa: E402


def read_checkpoint(path: str) -> tuple[LlamaHParams, dict[str, np.ndarray]]:
    raw = np.memmap(path, dtype=np.uint8, mode="r")
    if len(raw) < 28:
        raise ValueError(f"{path}: too small for a llama2.c header ({len(raw)} bytes)")
    dim, hidden, n_layers, n_heads, n_kv_heads, vocab, seq_len = (int(v) for v in raw[:28].view("<i4"))
    shared = vocab > 0
    vocab = abs(vocab)
    if min(dim, hidden, n_layers, n_heads, n_kv_heads, vocab, seq_len) <= 0 or dim % n_heads or n_heads % n_kv_heads:
        raise ValueError(f"{path}: bad header dim={dim} hidden={hidden} layers={n_layers} heads={n_heads} "
                         f"kv_heads={n_kv_heads} vocab={vocab} seq_len={seq_len}")
    hs = dim // n_heads
    kv_dim = n_kv_heads * hs
    L = n_layers
    layout = [("token_embedding", (vocab, dim)), ("rms_att", (L, dim)), ("wq", (L, dim, dim)),
              ("wk", (L, kv_dim, dim)), ("wv", (L, kv_dim, dim)), ("wo", (L, dim, dim)), ("rms_ffn", (L, dim)),
              ("w1", (L, hidden, dim)), ("w2", (L, dim, hidden)), ("w3", (L, hidden, dim)), ("rms_final", (dim,)),
              ("freq_cis_real", (seq_len, hs // 2)), ("freq_cis_imag", (seq_len, hs // 2))]
    if not shared:
        layout.append(("wcls", (vocab, dim)))
    need = 28 + 4 * sum(int(np.prod(s)) for _, s in layout)
    if len(raw) < need:
        raise ValueError(f"{path}: truncated checkpoint: {len(raw)} bytes, header implies {need}")
    w, off = {}, 28
    for name, shape in layout:
        n = int(np.prod(shape)) * 4
        w[name] = raw[off:off + n].view("<f4").reshape(shape)
        off += n
    if shared:
        w["wcls"] = w["token_embedding"]
    hp = LlamaHParams(n_vocab=vocab, n_embd=dim, n_ff=hidden, n_layer=L, n_head=n_heads, n_head_kv=n_kv_heads,
                      n_ctx=seq_len)
    return hp, w


def gguf_tensors(hp: LlamaHParams, w: dict[str, np.ndarray]):
    """(gguf name, numpy array [numpy order]) in the order llama.cpp's llama2c converter writes them."""
    yield "token_embd.weight", w["token_embedding"]
    yield "output_norm.weight", w["rms_final"]
    yield "output.weight", w["wcls"]
    for i in range(hp.n_layer):
        b = f"blk.{i}."
        yield b + "attn_q.weight", w["wq"][i]
        yield b + "attn_k.weight", w["wk"][i]
        yield b + "attn_v.weight", w["wv"][i]
        yield b + "attn_output.weight", w["wo"][i]
        yield b + "attn_norm.weight", w["rms_att"][i]
        yield b + "ffn_gate.weight", w["w1"][i]
        yield b + "ffn_down.weight", w["w2"][i]
        yield b + "ffn_up.weight", w["w3"][i]
        yield b + "ffn_norm.weight", w["rms_ffn"][i]


def load_tokenizer(path: str, n_vocab: int):
    if os.path.isdir(path):
        v = load_hf_tokenizer(path)
    elif path.endswith(".model"):
        v = load_spm_model(path)
    elif path.endswith(".json"):
        v = load_hf_tokenizer(os.path.dirname(path) or ".")
    else:
        v = load_llama2c_tokenizer(path, n_vocab)
    if len(v.tokens) != n_vocab:
        raise ValueError(f"{path}: tokenizer has {len(v.tokens)} tokens, checkpoint vocab_size is {n_vocab}")
    return v


def convert(model: str, tokenizer: str, out: str, outtype: str = "f32", name: str | None = None,
            ctx: int | None = None) -> None:
    hp, w = read_checkpoint(model)
    if ctx:
        hp.n_ctx = ctx
    vocab = load_tokenizer(tokenizer, hp.n_vocab)
    wr = GGUFWriter(out)
    add_llama_hparams(wr, hp, name or os.path.splitext(os.path.basename(model))[0], FILE_TYPES[outtype])
    vocab.add_to_writer(wr)
    for tname, a in gguf_tensors(hp, w):
        qt = pick_qtype(tname, a.shape, outtype)
        wr.add_tensor_lazy(tname, list(reversed(a.shape)), qt, lambda a=a, qt=qt: convert_tensor(a, qt))
    wr.write()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("model", help="llama2.c checkpoint (.bin, legacy format)")
    ap.add_argument("--tokenizer", required=True, help="tokenizer.bin, tokenizer.model or HF tokenizer dir")
    ap.add_argument("--out", required=True, help="output .gguf")
    ap.add_argument("--outtype", default="f32", choices=["f32", "f16", "q8_0"])
    ap.add_argument("--name", help="general.name (default: checkpoint file name)")
    ap.add_argument("--ctx", type=int, help="llama.context_length (default: the checkpoint's seq_len)")
    args = ap.parse_args()
    try:
        convert(args.model, args.tokenizer, args.out, args.outtype, args.name, args.ctx)
    except (ValueError, OSError) as e:
        sys.exit(f"error: {e}")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
