import json
import math
import os
import shutil
import subprocess
import sys

import numpy as np
import pytest

from gguf import GGMLQuantizationType as QT
from gguf import GGUFReader
from gguf.llama import llama3_rope_freqs
from gguf.safetensors import SafetensorsFile, bf16_to_f32, f32_to_bf16, write_safetensors
from convert_hf_to_gguf import convert, permute, unpermute

SCRIPT = os.path.join(os.path.dirname(__file__), "..", "scripts", "convert_hf_to_gguf.py")


def make_hf_dir(d, models, *, n_embd=64, n_head=4, n_kv=2, n_ff=96, n_layer=2, tied=False, rope_scaling=None,
                dtype="BF16", shards=2, seed=0):
    rng = np.random.default_rng(seed)
    n_vocab = 32000
    cfg = {"model_type": "llama", "vocab_size": n_vocab, "hidden_size": n_embd, "intermediate_size": n_ff,
           "num_hidden_layers": n_layer, "num_attention_heads": n_head, "num_key_value_heads": n_kv,
           "max_position_embeddings": 4096, "rms_norm_eps": 1e-6, "rope_theta": 500000.0,
           "tie_word_embeddings": tied}
    if rope_scaling:
        cfg["rope_scaling"] = rope_scaling
    json.dump(cfg, open(os.path.join(d, "config.json"), "w"))
    shutil.copy(os.path.join(models, "llama2-tokenizer", "tokenizer.model"), d)
    shutil.copy(os.path.join(models, "llama2-tokenizer", "tokenizer_config.json"), d)
    hd = n_embd // n_head
    t = {"model.embed_tokens.weight": (n_vocab, n_embd), "model.norm.weight": (n_embd,)}
    if not tied:
        t["lm_head.weight"] = (n_vocab, n_embd)
    for i in range(n_layer):
        p = f"model.layers.{i}."
        t.update({p + "self_attn.q_proj.weight": (n_head * hd, n_embd), p + "self_attn.k_proj.weight": (n_kv * hd, n_embd),
                  p + "self_attn.v_proj.weight": (n_kv * hd, n_embd), p + "self_attn.o_proj.weight": (n_embd, n_embd),
                  p + "mlp.gate_proj.weight": (n_ff, n_embd), p + "mlp.up_proj.weight": (n_ff, n_embd),
                  p + "mlp.down_proj.weight": (n_embd, n_ff), p + "input_layernorm.weight": (n_embd,),
                  p + "post_attention_layernorm.weight": (n_embd,)})
    np_dt = np.float16 if dtype == "F16" else np.float32
    arrays = {k: (rng.standard_normal(s) * 0.1).astype(np.float32) for k, s in t.items()}
    if dtype == "BF16":
        arrays = {k: bf16_to_f32(f32_to_bf16(a)) for k, a in arrays.items()}   # exactly representable
    arrays = {k: a.astype(np_dt) for k, a in arrays.items()}
    names = list(arrays)
    if shards > 1:
        wm = {}
        for s in range(shards):
            fn = f"model-{s + 1:05d}-of-{shards:05d}.safetensors"
            part = {k: arrays[k] for k in names[s::shards]}
            write_safetensors(os.path.join(d, fn), part, {k: dtype for k in part} if dtype == "BF16" else None)
            wm.update({k: fn for k in part})
        json.dump({"metadata": {}, "weight_map": wm}, open(os.path.join(d, "model.safetensors.index.json"), "w"))
    else:
        write_safetensors(os.path.join(d, "model.safetensors"), arrays, {k: dtype for k in arrays} if dtype == "BF16" else None)
    return cfg, {k: a.astype(np.float32) for k, a in arrays.items()}


def test_permute_round_trip():
    w = np.random.default_rng(0).standard_normal((48, 5))
    for nh in (1, 2, 3, 6):
        assert np.array_equal(unpermute(permute(w, nh), nh), w)
    # one head, head_dim 4: HF rows [r0 r1 | r2 r3] (halves) -> GGUF pairs (r0, r2), (r1, r3)
    assert permute(np.arange(4.0).reshape(4, 1), 1).ravel().tolist() == [0, 2, 1, 3]


def _rope_neox(x, pos, theta):          # HF rotate_half; x [n_head, hd]
    hd = x.shape[-1]
    inv = theta ** (-np.arange(0, hd, 2) / hd)
    c, s = np.cos(pos * inv), np.sin(pos * inv)
    x1, x2 = x[:, :hd // 2], x[:, hd // 2:]
    return np.concatenate([x1 * c - x2 * s, x2 * c + x1 * s], axis=1)


def _rope_normal(x, pos, theta):        # ggml normal mode: adjacent pairs
    hd = x.shape[-1]
    inv = theta ** (-np.arange(0, hd, 2) / hd)
    c, s = np.cos(pos * inv), np.sin(pos * inv)
    x0, x1 = x[:, 0::2], x[:, 1::2]
    out = np.empty_like(x)
    out[:, 0::2], out[:, 1::2] = x0 * c - x1 * s, x0 * s + x1 * c
    return out


def test_sharded_bf16_conversion_f32(tmp_path, models):
    d = tmp_path / "hf"
    d.mkdir()
    cfg, src = make_hf_dir(str(d), models)
    out = str(tmp_path / "m.gguf")
    convert(str(d), out, "f32")
    g = GGUFReader(out)
    assert g.get("general.architecture") == "llama" and g.get("llama.block_count") == 2
    assert g.get("llama.embedding_length") == 64 and g.get("llama.feed_forward_length") == 96
    assert g.get("llama.attention.head_count") == 4 and g.get("llama.attention.head_count_kv") == 2
    assert g.get("llama.rope.freq_base") == 500000.0 and g.get("llama.rope.dimension_count") == 16
    assert g.get("llama.context_length") == 4096 and g.get("llama.vocab_size") == 32000
    assert abs(g.get("llama.attention.layer_norm_rms_epsilon") - 1e-6) < 1e-12 and g.get("general.file_type") == 0
    assert len(g.tensors) == 3 + 2 * 9 and not g.has_tensor("rope_freqs.weight")
    assert g.tensor("blk.1.attn_k.weight").ne == [64, 32] and g.tensor("blk.0.ffn_down.weight").ne == [96, 64]
    assert np.array_equal(g.tensor("output.weight").data, src["lm_head.weight"])
    assert np.array_equal(g.tensor("blk.1.ffn_up.weight").data, src["model.layers.1.mlp.up_proj.weight"])
    assert np.array_equal(g.tensor("blk.0.attn_norm.weight").data, src["model.layers.0.input_layernorm.weight"])
    # attention scores: HF weights + NeoX rope == GGUF weights + normal rope
    x = np.random.default_rng(1).standard_normal((2, 64))
    wq_hf, wk_hf = src["model.layers.0.self_attn.q_proj.weight"], src["model.layers.0.self_attn.k_proj.weight"]
    wq_g, wk_g = g.tensor("blk.0.attn_q.weight").data, g.tensor("blk.0.attn_k.weight").data
    for wq, wk, rope in ((wq_hf, wk_hf, _rope_neox), (wq_g, wk_g, _rope_normal)):
        q = rope((wq @ x[0]).reshape(4, 16), 7, 500000.0)
        k = rope((wk @ x[1]).reshape(2, 16), 3, 500000.0)
        scores = np.array([[q[h] @ k[h // 2] for h in range(4)]])
        if rope is _rope_neox:
            ref = scores
    assert np.allclose(scores, ref, rtol=1e-9, atol=1e-9) and not np.allclose(wq_g, wq_hf)
    # vocab from tokenizer.model equals llama.cpp's Llama 2 vocab
    ref_v = GGUFReader(os.path.join(models, "ggml-vocab-llama-spm.gguf"))
    assert g.get("tokenizer.ggml.tokens") == ref_v.get("tokenizer.ggml.tokens")
    assert np.array_equal(g.get("tokenizer.ggml.scores"), ref_v.get("tokenizer.ggml.scores"))
    assert np.array_equal(g.get("tokenizer.ggml.token_type"), ref_v.get("tokenizer.ggml.token_type"))
    assert g.get("tokenizer.ggml.model") == "llama" and g.get("tokenizer.ggml.add_space_prefix") is True


def test_llama31_tied_f16_to_q8_0(tmp_path, models):
    d = tmp_path / "hf"
    d.mkdir()
    rs = {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
          "original_max_position_embeddings": 8192}
    cfg, src = make_hf_dir(str(d), models, n_embd=256, n_head=2, n_kv=1, tied=True, rope_scaling=rs,
                           dtype="F16", shards=1)
    out = str(tmp_path / "m.gguf")
    r = subprocess.run([sys.executable, SCRIPT, str(d), "--out", out, "--outtype", "q8_0"], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    g = GGUFReader(out)
    assert not g.has_tensor("output.weight") and g.get("general.file_type") == 7
    assert g.tensor("blk.0.attn_q.weight").type == QT.Q8_0 and g.tensor("output_norm.weight").type == QT.F32
    rf = g.tensor("rope_freqs.weight")
    assert rf.type == QT.F32 and rf.ne == [64]
    # independent float64 evaluation of the llama 3.1 formula
    hd, theta = 128, 500000.0
    exp = []
    for i in range(0, hd, 2):
        wl = 2 * math.pi * theta ** (i / hd)
        if wl < 8192 / 4:
            exp.append(1.0)
        elif wl > 8192:
            exp.append(8.0)
        else:
            sm = (8192 / wl - 1) / 3
            exp.append(1 / ((1 - sm) / 8 + sm))
    assert np.allclose(rf.data, exp, rtol=1e-5) and rf.data.tobytes() == llama3_rope_freqs(128, theta).tobytes()
    assert (rf.data == 1).sum() > 0 and (rf.data == 8).sum() > 0 and ((rf.data > 1) & (rf.data < 8)).sum() > 0
    deq = g.tensor_f32("blk.1.ffn_gate.weight")
    assert np.abs(deq - src["model.layers.1.mlp.gate_proj.weight"]).max() < 0.01


def test_vocab_only_llama3_matches_llama_cpp(tmp_path, models):
    out = str(tmp_path / "v.gguf")
    convert(os.path.join(models, "llama3-tokenizer"), out, vocab_only=True)
    ours, ref = GGUFReader(out), GGUFReader(os.path.join(models, "ggml-vocab-llama-bpe.gguf"))
    assert len(ours.tensors) == 0
    assert ours.get("tokenizer.ggml.model") == "gpt2" and ours.get("tokenizer.ggml.pre") == "llama-bpe"
    assert ours.get("tokenizer.ggml.tokens") == ref.get("tokenizer.ggml.tokens")
    assert ours.get("tokenizer.ggml.merges") == ref.get("tokenizer.ggml.merges")
    assert np.array_equal(ours.get("tokenizer.ggml.token_type"), ref.get("tokenizer.ggml.token_type"))
    assert ours.get("tokenizer.ggml.bos_token_id") == ref.get("tokenizer.ggml.bos_token_id") == 128000
    assert ours.get("tokenizer.ggml.add_bos_token") is True
    # Documented difference: this tokenizer_config.json names eos_token <|end_of_text|> (128001); the reference
    # file was made with eos = <|eot_id|> (128009), the instruct models' end-of-turn token.
    assert ours.get("tokenizer.ggml.eos_token_id") == 128001 and ref.get("tokenizer.ggml.eos_token_id") == 128009
    assert "<|start_header_id|>" in ours.get("tokenizer.chat_template")


def test_errors(tmp_path, models):
    d = tmp_path / "hf"
    d.mkdir()
    make_hf_dir(str(d), models, shards=1, dtype="F32")
    st = SafetensorsFile(str(d / "model.safetensors"))
    arrays = {k: np.array(st.get(k)) for k in st.keys()}
    del st
    out = str(tmp_path / "o.gguf")
    w = dict(arrays)
    w.pop("model.layers.1.mlp.up_proj.weight")
    write_safetensors(str(d / "model.safetensors"), w)
    with pytest.raises(ValueError, match="'blk.1.ffn_up.weight' not found"):
        convert(str(d), out, "f32")
    w = dict(arrays)
    w["model.layers.0.self_attn.k_proj.weight"] = np.zeros((16, 64), np.float32)
    write_safetensors(str(d / "model.safetensors"), w)
    with pytest.raises(ValueError, match=r"shape \[16, 64\], config implies \[32, 64\]"):
        convert(str(d), out, "f32")
    (d / "model.safetensors").write_bytes(b"\x10\x00\x00\x00\x00\x00\x00\x00{not json}      ")
    r = subprocess.run([sys.executable, SCRIPT, str(d), "--out", out], capture_output=True, text=True)
    assert r.returncode != 0 and r.stderr.startswith("error: ") and "bad JSON header" in r.stderr
    assert not os.path.exists(out)


def test_hf_spm_tokenizer_json(models):
    """Llama 2 style tokenizer.json (BPE + byte_fallback) -> SPM vocab; scores follow the merge order."""
    from gguf.vocab import load_hf_tokenizer
    d = os.path.join(models, "llama2-tokenizer")
    v = load_hf_tokenizer(d)
    tj = json.load(open(os.path.join(d, "tokenizer.json")))
    vocab, merges = tj["model"]["vocab"], tj["model"]["merges"]
    assert v.model == "llama" and len(v.tokens) == 32000
    assert all(v.tokens[i] == t for t, i in vocab.items())
    assert v.special_ids == {"unknown": 0, "bos": 1, "eos": 2} and v.add_bos is True and v.add_eos is False
    assert v.token_types[:4] == [2, 3, 3, 6] and v.token_types[3 + 255] == 6 and v.token_types[300] == 1
    # the first merges produce the highest-scoring merged pieces, in order
    first = {}
    for r, m in enumerate(merges[:50]):       # '▁th e' and '▁ the' both make '▁the': the first one counts
        first.setdefault(vocab[m.replace(" ", "", 1)], r)
    assert len(first) < 50 and [v.scores[i] for i in first] == [-float(r) for r in first.values()]
