"""Llama GGUF conventions shared by the converters and the generator: hparam keys, tensor names, rope_freqs.

    hp = LlamaHParams(n_vocab=32000, n_embd=4096, n_ff=11008, n_layer=32, n_head=32, n_head_kv=32, n_ctx=4096)
    add_llama_hparams(w, hp, name="my-model", file_type=LlamaFileType.MOSTLY_F16)
    for name, shape in llama_tensor_shapes(hp): ...        # numpy order, e.g. (n_vocab, n_embd)
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from .constants import GGMLQuantizationType, LlamaFileType


@dataclass
class LlamaHParams:
    n_vocab: int
    n_embd: int
    n_ff: int
    n_layer: int
    n_head: int
    n_head_kv: int
    n_ctx: int = 2048
    rope_theta: float = 10000.0
    rms_eps: float = 1e-5
    head_dim: int | None = None      # default n_embd // n_head
    tied: bool = False               # no output.weight: output uses token_embd
    rope_freqs: bool = False         # llama 3.1 rope_freqs.weight present

    @property
    def n_rot(self) -> int:
        return self.head_dim or self.n_embd // self.n_head


def add_llama_hparams(w, hp: LlamaHParams, name: str, file_type: int | None = None) -> None:
    w.add_string("general.architecture", "llama")
    w.add_string("general.name", name)
    w.add_uint32("llama.vocab_size", hp.n_vocab)
    w.add_uint32("llama.context_length", hp.n_ctx)
    w.add_uint32("llama.embedding_length", hp.n_embd)
    w.add_uint32("llama.block_count", hp.n_layer)
    w.add_uint32("llama.feed_forward_length", hp.n_ff)
    w.add_uint32("llama.attention.head_count", hp.n_head)
    w.add_uint32("llama.attention.head_count_kv", hp.n_head_kv)
    w.add_float32("llama.attention.layer_norm_rms_epsilon", hp.rms_eps)
    w.add_float32("llama.rope.freq_base", hp.rope_theta)
    w.add_uint32("llama.rope.dimension_count", hp.n_rot)
    if hp.head_dim is not None and hp.head_dim != hp.n_embd // hp.n_head:
        w.add_uint32("llama.attention.key_length", hp.head_dim)
        w.add_uint32("llama.attention.value_length", hp.head_dim)
    if file_type is not None:
        w.add_uint32("general.file_type", int(file_type))


def llama_tensor_shapes(hp: LlamaHParams) -> list[tuple[str, tuple[int, ...]]]:
    """(name, numpy-order shape) of every tensor, in llama.cpp converter order."""
    hd = hp.n_rot
    out = [("token_embd.weight", (hp.n_vocab, hp.n_embd))]
    if hp.rope_freqs:
        out.append(("rope_freqs.weight", (hd // 2,)))
    for i in range(hp.n_layer):
        b = f"blk.{i}."
        out += [
            (b + "attn_norm.weight", (hp.n_embd,)),
            (b + "attn_q.weight", (hp.n_head * hd, hp.n_embd)),
            (b + "attn_k.weight", (hp.n_head_kv * hd, hp.n_embd)),
            (b + "attn_v.weight", (hp.n_head_kv * hd, hp.n_embd)),
            (b + "attn_output.weight", (hp.n_embd, hp.n_head * hd)),
            (b + "ffn_norm.weight", (hp.n_embd,)),
            (b + "ffn_gate.weight", (hp.n_ff, hp.n_embd)),
            (b + "ffn_up.weight", (hp.n_ff, hp.n_embd)),
            (b + "ffn_down.weight", (hp.n_embd, hp.n_ff)),
        ]
    out.append(("output_norm.weight", (hp.n_embd,)))
    if not hp.tied:
        out.append(("output.weight", (hp.n_vocab, hp.n_embd)))
    return out


def pick_qtype(name: str, shape: tuple[int, ...], outtype: str) -> GGMLQuantizationType:
    """f32 for 1-D tensors, norms and rope_freqs; otherwise the requested type (q8_0 only if rows % 32 == 0)."""
    if len(shape) == 1 or name.endswith("_norm.weight") or name.startswith("rope_freqs") or outtype == "f32":
        return GGMLQuantizationType.F32
    if outtype == "f16":
        return GGMLQuantizationType.F16
    if outtype == "q8_0":
        return GGMLQuantizationType.Q8_0 if shape[-1] % 32 == 0 else GGMLQuantizationType.F16
    raise ValueError(f"unknown --outtype '{outtype}' (f32, f16 or q8_0)")


FILE_TYPES = {"f32": LlamaFileType.ALL_F32, "f16": LlamaFileType.MOSTLY_F16, "q8_0": LlamaFileType.MOSTLY_Q8_0}


def llama3_rope_freqs(head_dim: int, theta: float, factor: float = 8.0, low_freq_factor: float = 1.0,
                      high_freq_factor: float = 4.0, original_max_position_embeddings: int = 8192) -> np.ndarray:
    """rope_freqs.weight (float32 [head_dim/2]) as llama.cpp's convert_hf_to_gguf.py LlamaModel computes it.

    llama.cpp does this with torch float32 0-d tensors and python scalars (which torch casts to float32), so
    every step here is float32 too: freqs = 1 / theta^(arange(0, d, 2)/d), wavelen = 2*pi / freq, ...
    """
    f32 = np.float32
    freqs = f32(1.0) / (f32(theta) ** (np.arange(0, head_dim, 2, dtype=np.float32) / f32(head_dim)))
    low_freq_wavelen = original_max_position_embeddings / low_freq_factor
    high_freq_wavelen = original_max_position_embeddings / high_freq_factor
    rope_factors = []
    for freq in freqs.astype(np.float32):
        wavelen = f32(f32(2 * math.pi) / freq)
        if wavelen < f32(high_freq_wavelen):
            rope_factors.append(f32(1))
        elif wavelen > f32(low_freq_wavelen):
            rope_factors.append(f32(factor))
        else:
            smooth = f32(f32(f32(original_max_position_embeddings) / wavelen) - f32(low_freq_factor))
            smooth = f32(smooth / f32(high_freq_factor - low_freq_factor))
            rope_factors.append(f32(f32(1) / f32(f32(f32(f32(1) - smooth) / f32(factor)) + smooth)))
    return np.array(rope_factors, dtype=np.float32)


def convert_tensor(a: np.ndarray, qtype: GGMLQuantizationType) -> np.ndarray:
    from .quants import quantize
    return quantize(np.asarray(a, dtype=np.float32), qtype)
