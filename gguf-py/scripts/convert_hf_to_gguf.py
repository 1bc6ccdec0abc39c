#!/usr/bin/env python3
"""Convert a Hugging Face Llama directory (config.json, *.safetensors, tokenizer files) to a GGUF llama model.

    convert_hf_to_gguf.py /path/to/Llama-3.1-8B --out model.gguf --outtype f16
    convert_hf_to_gguf.py /path/to/llama3-tokenizer --out vocab.gguf --vocab-only

As llama.cpp's converter: q_proj/k_proj are un-permuted from HF's NeoX (half-split) rope layout back to the
adjacent-pair layout GGUF's normal rope uses; Llama 3.1 rope_scaling (rope_type llama3) becomes
rope_freqs.weight; lm_head is dropped when tie_word_embeddings. 1-D tensors stay f32.
"""
import argparse
import glob
import json
import os
import re
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from gguf import GGUFWriter, TokenType  # noqa: E402
from gguf.llama import (FILE_TYPES, LlamaHParams, add_llama_hparams, convert_tensor, llama3_rope_freqs,  # noqa: E402
                        pick_qtype)
from gguf.safetensors import SafetensorsFile  # noqa: E402
from gguf.vocab import load_vocab_dir  # noqa: E402

LAYER_MAP = {
    "self_attn.q_proj": "attn_q", "self_attn.k_proj": "attn_k", "self_attn.v_proj": "attn_v",
    "self_attn.o_proj": "attn_output", "mlp.gate_proj": "ffn_gate", "mlp.up_proj": "ffn_up",
    "mlp.down_proj": "ffn_down", "input_layernorm": "attn_norm", "post_attention_layernorm": "ffn_norm",
}
TOP_MAP = {"model.embed_tokens": "token_embd", "model.norm": "output_norm", "lm_head": "output"}


def permute(w: np.ndarray, n_head: int) -> np.ndarray:
    """HF (NeoX half-split) q/k rows -> GGUF (adjacent pairs), exactly llama.cpp's LlamaModel.permute."""
    return w.reshape(n_head, 2, w.shape[0] // n_head // 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def unpermute(w: np.ndarray, n_head: int) -> np.ndarray:
    """Inverse of permute (GGUF -> HF layout)."""
    return w.reshape(n_head, w.shape[0] // n_head // 2, 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def gguf_name(hf: str) -> str | None:
    """HF tensor name -> GGUF name; None for tensors to skip; ValueError for unknown ones."""
    if hf.endswith("rotary_emb.inv_freq"):
        return None
    m = re.fullmatch(r"model\.layers\.(\d+)\.(.+)\.(weight|bias)", hf)
    if m and m.group(2) in LAYER_MAP:
        return f"blk.{m.group(1)}.{LAYER_MAP[m.group(2)]}.{m.group(3)}"
    m = re.fullmatch(r"(.+)\.(weight|bias)", hf)
    if m and m.group(1) in TOP_MAP:
        return f"{TOP_MAP[m.group(1)]}.{m.group(2)}"
    raise ValueError(f"tensor '{hf}': no GGUF name for it (not a Llama tensor?)")


def read_hparams(cfg: dict, cfg_path: str) -> LlamaHParams:
    try:
        n_head = int(cfg["num_attention_heads"])
        hp = LlamaHParams(
            n_vocab=int(cfg["vocab_size"]), n_embd=int(cfg["hidden_size"]), n_ff=int(cfg["intermediate_size"]),
            n_layer=int(cfg["num_hidden_layers"]), n_head=n_head,
            n_head_kv=int(cfg.get("num_key_value_heads") or n_head),
            n_ctx=int(cfg.get("max_position_embeddings", 4096)), rope_theta=float(cfg.get("rope_theta", 10000.0)),
            rms_eps=float(cfg.get("rms_norm_eps", 1e-5)), head_dim=cfg.get("head_dim"),
            tied=bool(cfg.get("tie_word_embeddings", False)))
    except KeyError as e:
        raise ValueError(f"{cfg_path}: missing key {e}") from None
    if hp.n_head % hp.n_head_kv or (hp.head_dim is None and hp.n_embd % hp.n_head):
        raise ValueError(f"{cfg_path}: inconsistent heads: hidden_size={hp.n_embd} heads={hp.n_head} "
                         f"kv_heads={hp.n_head_kv}")
    rs = cfg.get("rope_scaling") or {}
    rtype = (rs.get("rope_type") or rs.get("type") or "").lower()
    if rtype == "llama3":
        hp.rope_freqs = True
    elif rtype not in ("", "default"):
        raise ValueError(f"{cfg_path}: rope_scaling type '{rtype}' is not supported")
    return hp


def open_weights(model_dir: str) -> dict[str, SafetensorsFile]:
    """HF tensor name -> the safetensors file holding it (index.json for shards, else all *.safetensors)."""
    index = os.path.join(model_dir, "model.safetensors.index.json")
    where: dict[str, SafetensorsFile] = {}
    if os.path.exists(index):
        wm = json.load(open(index))["weight_map"]
        files = {f: SafetensorsFile(os.path.join(model_dir, f)) for f in sorted(set(wm.values()))}
        for name, f in wm.items():
            if name not in files[f].infos:
                raise ValueError(f"{index}: '{name}' is mapped to {f}, which does not hold it")
            where[name] = files[f]
    else:
        paths = sorted(glob.glob(os.path.join(model_dir, "*.safetensors")))
        if not paths:
            raise ValueError(f"{model_dir}: no *.safetensors files (pytorch .bin is not supported)")
        for p in paths:
            st = SafetensorsFile(p)
            for name in st.keys():
                where[name] = st
    return where


def pad_vocab(vocab, n_vocab: int, where: str) -> None:
    n = len(vocab.tokens)
    if n > n_vocab:
        raise ValueError(f"{where}: tokenizer has {n} tokens, more than vocab_size {n_vocab}")
    for i in range(n, n_vocab):
        vocab.tokens.append(f"[PAD{i}]")
        vocab.token_types.append(int(TokenType.UNUSED))
        if vocab.scores is not None:
            vocab.scores.append(-1000.0)


def convert(model_dir: str, out: str, outtype: str = "f16", vocab_only: bool = False, name: str | None = None) -> None:
    if outtype not in FILE_TYPES:
        raise ValueError(f"unknown --outtype '{outtype}' (f32, f16 or q8_0)")
    cfg_path = os.path.join(model_dir, "config.json")
    cfg = json.load(open(cfg_path)) if os.path.exists(cfg_path) else None
    if cfg is None and not vocab_only:
        raise ValueError(f"{model_dir}: no config.json")
    if cfg is not None and cfg.get("model_type", "llama") != "llama":
        raise ValueError(f"{cfg_path}: model_type '{cfg.get('model_type')}' is not llama")
    name = name or os.path.basename(os.path.normpath(model_dir))
    vocab = load_vocab_dir(model_dir)
    w = GGUFWriter(out)
    if cfg is None:
        w.add_string("general.architecture", "llama")
        w.add_string("general.name", name)
    else:
        hp = read_hparams(cfg, cfg_path)
        add_llama_hparams(w, hp, name, None if vocab_only else FILE_TYPES[outtype])
        pad_vocab(vocab, hp.n_vocab, model_dir)
    vocab.add_to_writer(w)
    if vocab_only:
        w.write()
        return

    where = open_weights(model_dir)
    by_gguf: dict[str, str] = {}
    for hf in where:
        g = gguf_name(hf)
        if g is not None:
            by_gguf[g] = hf
    if hp.tied:
        by_gguf.pop("output.weight", None)
    if hp.rope_freqs:
        rs = cfg["rope_scaling"]
        rf = llama3_rope_freqs(hp.n_rot, hp.rope_theta, rs.get("factor", 8.0), rs.get("low_freq_factor", 1.0),
                               rs.get("high_freq_factor", 4.0), cfg.get("original_max_position_embeddings", 8192))
        w.add_tensor("rope_freqs.weight", rf)
    from gguf.llama import llama_tensor_shapes
    for gname, shape in llama_tensor_shapes(hp):
        if gname == "rope_freqs.weight":
            continue
        if gname not in by_gguf:
            raise ValueError(f"{model_dir}: tensor for '{gname}' not found in the safetensors files")
        hf = by_gguf.pop(gname)
        st = where[hf]
        got = tuple(st.infos[hf]["shape"])
        if got != shape:
            raise ValueError(f"{st.path}: tensor '{hf}' has shape {list(got)}, config implies {list(shape)}")
        qt = pick_qtype(gname, shape, outtype)
        n_perm = hp.n_head if ".attn_q." in gname else hp.n_head_kv if ".attn_k." in gname else 0

        def produce(st=st, hf=hf, qt=qt, n_perm=n_perm):
            a = st.get_f32(hf)
            if n_perm:
                a = permute(a, n_perm)
            return convert_tensor(a, qt)
        w.add_tensor_lazy(gname, list(reversed(shape)), qt, produce)
    if by_gguf:
        raise ValueError(f"{model_dir}: unexpected tensors {sorted(by_gguf.values())[:5]}")
    w.write()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("model_dir")
    ap.add_argument("--out", required=True, help="output .gguf")
    ap.add_argument("--outtype", default="f16", choices=["f32", "f16", "q8_0"])
    ap.add_argument("--vocab-only", action="store_true", help="write only the tokenizer (and hparams if present)")
    ap.add_argument("--name", help="general.name (default: directory name)")
    args = ap.parse_args()
    try:
        convert(args.model_dir, args.out, args.outtype, args.vocab_only, args.name)
    except (ValueError, OSError, KeyError) as e:
        sys.exit(f"error: {e}")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
