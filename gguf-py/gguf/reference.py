"""Float64 numpy reference forward pass for a GGUF Llama: the independent check of the C++ logits.

    m = LlamaReference("model.gguf")
    logits = m.forward([1, 15043, 29871])      # float64 [n_tokens, n_vocab]
    ids = m.generate_greedy([1], 40)
    text = m.detokenize(ids)

Deliberately plain: full recompute over the whole sequence (no KV cache), one layer at a time, weights
dequantized to float64. Rope is ggml's normal mode (adjacent pairs), theta_i = pos * base^(-2i/n_rot) / ff[i].
"""
from __future__ import annotations

import numpy as np

from .reader import GGUFReader


def rms_norm(x: np.ndarray, w: np.ndarray, eps: float) -> np.ndarray:
    return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps) * w


def rope_normal(x: np.ndarray, pos: np.ndarray, n_rot: int, base: float, freq_factors: np.ndarray | None) -> np.ndarray:
    """x [n_tokens, n_heads, head_dim]; rotates pairs (2i, 2i+1) for 2i < n_rot."""
    i = np.arange(n_rot // 2)
    inv = base ** (-2.0 * i / n_rot)
    if freq_factors is not None:
        inv = inv / freq_factors
    ang = pos[:, None].astype(np.float64) * inv[None, :]           # [n_tokens, n_rot/2]
    c, s = np.cos(ang)[:, None, :], np.sin(ang)[:, None, :]
    out = x.copy()
    x0, x1 = x[..., 0:n_rot:2], x[..., 1:n_rot:2]
    out[..., 0:n_rot:2] = x0 * c - x1 * s
    out[..., 1:n_rot:2] = x0 * s + x1 * c
    return out


def silu(x: np.ndarray) -> np.ndarray:
    return x / (1.0 + np.exp(-x))


class LlamaReference:
    def __init__(self, path: str):
        self.r = r = GGUFReader(path)
        arch = r.get("general.architecture")
        if arch != "llama":
            raise ValueError(f"{path}: general.architecture is '{arch}', expected llama")
        need = ["embedding_length", "block_count", "feed_forward_length", "attention.head_count"]
        for k in need:
            if r.get(f"llama.{k}") is None:
                raise ValueError(f"{path}: missing key llama.{k}")
        self.n_embd = r.get("llama.embedding_length")
        self.n_layer = r.get("llama.block_count")
        self.n_head = r.get("llama.attention.head_count")
        self.n_head_kv = r.get("llama.attention.head_count_kv", self.n_head)
        self.head_dim = r.get("llama.attention.key_length", self.n_embd // self.n_head)
        self.n_rot = r.get("llama.rope.dimension_count", self.head_dim)
        self.base = float(r.get("llama.rope.freq_base", 10000.0))
        self.eps = float(r.get("llama.attention.layer_norm_rms_epsilon", 1e-5))
        self.freq_factors = self.w("rope_freqs.weight") if r.has_tensor("rope_freqs.weight") else None
        self.tok_embd = self.w("token_embd.weight")                        # [n_vocab, n_embd] (numpy order)
        self.n_vocab = self.tok_embd.shape[0]
        self.output = self.w("output.weight") if r.has_tensor("output.weight") else self.tok_embd

    def w(self, name: str) -> np.ndarray:
        return self.r.tensor_f32(name).astype(np.float64)

    def forward(self, tokens: list[int]) -> np.ndarray:
        tokens = np.asarray(tokens, dtype=np.int64)
        if tokens.ndim != 1 or len(tokens) == 0 or tokens.min() < 0 or tokens.max() >= self.n_vocab:
            raise ValueError(f"tokens must be a non-empty list of ids in [0, {self.n_vocab})")
        T, H, KV, hd = len(tokens), self.n_head, self.n_head_kv, self.head_dim
        pos = np.arange(T)
        x = self.tok_embd[tokens]                                          # [T, n_embd]
        mask = np.triu(np.full((T, T), -np.inf), k=1)                      # causal
        for il in range(self.n_layer):
            b = f"blk.{il}."
            h = rms_norm(x, self.w(b + "attn_norm.weight"), self.eps)
            q = (h @ self.w(b + "attn_q.weight").T).reshape(T, H, hd)
            k = (h @ self.w(b + "attn_k.weight").T).reshape(T, KV, hd)
            v = (h @ self.w(b + "attn_v.weight").T).reshape(T, KV, hd)
            q = rope_normal(q, pos, self.n_rot, self.base, self.freq_factors)
            k = rope_normal(k, pos, self.n_rot, self.base, self.freq_factors)
            att = np.empty((T, H, hd))
            for hh in range(H):
                kvh = hh // (H // KV)                                      # GQA: consecutive q heads share
                s = q[:, hh, :] @ k[:, kvh, :].T / np.sqrt(hd) + mask      # [T, T]
                s = np.exp(s - s.max(axis=1, keepdims=True))
                s /= s.sum(axis=1, keepdims=True)
                att[:, hh, :] = s @ v[:, kvh, :]
            x = x + att.reshape(T, H * hd) @ self.w(b + "attn_output.weight").T
            h = rms_norm(x, self.w(b + "ffn_norm.weight"), self.eps)
            g = h @ self.w(b + "ffn_gate.weight").T
            u = h @ self.w(b + "ffn_up.weight").T
            x = x + (silu(g) * u) @ self.w(b + "ffn_down.weight").T
        x = rms_norm(x, self.w("output_norm.weight"), self.eps)
        return x @ self.output.T                                           # [T, n_vocab]

    def generate_greedy(self, prompt: list[int], n: int, stop_at_eos: bool = True) -> list[int]:
        ids = list(prompt)
        eos = self.r.get("tokenizer.ggml.eos_token_id")
        for _ in range(n):
            nxt = int(np.argmax(self.forward(ids)[-1]))
            ids.append(nxt)
            if stop_at_eos and nxt == eos:
                break
        return ids

    def detokenize(self, ids: list[int]) -> str:
        """SentencePiece-style: byte tokens <0xXX> -> bytes, '▁' -> ' ', control tokens dropped, one leading
        space (from the dummy prefix) removed."""
        toks = self.r.get("tokenizer.ggml.tokens")
        types = self.r.get("tokenizer.ggml.token_type")
        if toks is None:
            raise ValueError("the model has no embedded vocab")
        out = bytearray()
        for i in ids:
            t = toks[i]
            tt = int(types[i]) if types is not None else 1
            if tt == 3:
                continue
            if tt == 6 and len(t) == 6 and t.startswith("<0x"):
                out.append(int(t[3:5], 16))
            else:
                out += t.replace("\u2581", " ").encode("utf-8")
        s = out.decode("utf-8", errors="replace")
        return s[1:] if s.startswith(" ") else s
