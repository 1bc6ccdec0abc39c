"""q8_0 / q8_1 quantization bit-identical to ggml's reference C code (quantize_row_q8_0_ref / _q8_1_ref).

    blocks = quantize(x_f32, GGMLQuantizationType.Q8_0)   # uint8 [..., n/32*34], one row per row of x
    y = dequantize(blocks, GGMLQuantizationType.Q8_0)      # float32 [..., n]

Layouts: block_q8_0 = f16 d + 32 x int8 (34 bytes); block_q8_1 = f16 d, f16 s + 32 x int8 (36 bytes).
All arithmetic is float32 like the C code: d = amax / 127, id = d ? 1/d : 0, q = roundf(x * id),
s = (float)sum(q) * d; d and s are then rounded to f16 (round to nearest even).
"""
from __future__ import annotations

import numpy as np

from .constants import GGML_PLAIN_DTYPES, GGML_QUANT_SIZES, QK8_0, GGMLQuantizationType


def roundf(v: np.ndarray) -> np.ndarray:
    """C roundf (half away from zero), exact for float32 input."""
    r = np.rint(v)                 # half to even
    t = np.trunc(v)
    tie = np.abs(v - t) == 0.5     # v - trunc(v) is exact in float
    return np.where(tie, t + np.sign(v), r)


def _blocks_common(x: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """x: float32 [nb, 32] -> (d f32 [nb], q int8 [nb, 32], id f32 [nb])."""
    amax = np.max(np.abs(x), axis=1)
    d = (amax / np.float32(127)).astype(np.float32)
    with np.errstate(divide="ignore"):
        idv = np.where(d != 0, np.float32(1) / d, np.float32(0)).astype(np.float32)
    q = roundf((x * idv[:, None]).astype(np.float32)).astype(np.int8)
    return d, q, idv


def quantize_q8_0(x: np.ndarray) -> np.ndarray:
    x = np.ascontiguousarray(x, dtype=np.float32)
    if x.shape[-1] % QK8_0 != 0:
        raise ValueError(f"q8_0: row length {x.shape[-1]} is not a multiple of {QK8_0}")
    lead = x.shape[:-1]
    xb = x.reshape(-1, QK8_0)
    d, q, _ = _blocks_common(xb)
    out = np.empty((xb.shape[0], 2 + QK8_0), dtype=np.uint8)
    out[:, 0:2] = d.astype("<f2").view(np.uint8).reshape(-1, 2)
    out[:, 2:] = q.view(np.uint8)
    return out.reshape(*lead, x.shape[-1] // QK8_0 * 34)


def quantize_q8_1(x: np.ndarray) -> np.ndarray:
    x = np.ascontiguousarray(x, dtype=np.float32)
    if x.shape[-1] % QK8_0 != 0:
        raise ValueError(f"q8_1: row length {x.shape[-1]} is not a multiple of {QK8_0}")
    lead = x.shape[:-1]
    xb = x.reshape(-1, QK8_0)
    d, q, _ = _blocks_common(xb)
    s = (q.astype(np.int32).sum(axis=1).astype(np.float32) * d).astype(np.float32)
    out = np.empty((xb.shape[0], 4 + QK8_0), dtype=np.uint8)
    out[:, 0:2] = d.astype("<f2").view(np.uint8).reshape(-1, 2)
    out[:, 2:4] = s.astype("<f2").view(np.uint8).reshape(-1, 2)
    out[:, 4:] = q.view(np.uint8)
    return out.reshape(*lead, x.shape[-1] // QK8_0 * 36)


def dequantize_q8_0(b: np.ndarray) -> np.ndarray:
    b = np.ascontiguousarray(b, dtype=np.uint8)
    lead = b.shape[:-1]
    blk = b.reshape(-1, 34)
    d = blk[:, 0:2].copy().view("<f2").astype(np.float32)         # [nb, 1]
    q = blk[:, 2:].view(np.int8).astype(np.float32)               # [nb, 32]
    return (q * d).astype(np.float32).reshape(*lead, b.shape[-1] // 34 * QK8_0)


def dequantize_q8_1(b: np.ndarray) -> np.ndarray:
    b = np.ascontiguousarray(b, dtype=np.uint8)
    lead = b.shape[:-1]
    blk = b.reshape(-1, 36)
    d = blk[:, 0:2].copy().view("<f2").astype(np.float32)
    q = blk[:, 4:].view(np.int8).astype(np.float32)
    return (q * d).astype(np.float32).reshape(*lead, b.shape[-1] // 36 * QK8_0)


def quantize(x: np.ndarray, qtype: GGMLQuantizationType) -> np.ndarray:
    """float32 array -> stored representation of qtype (numpy dtype for plain types, uint8 blocks otherwise)."""
    qtype = GGMLQuantizationType(qtype)
    if qtype == GGMLQuantizationType.Q8_0:
        return quantize_q8_0(x)
    if qtype == GGMLQuantizationType.Q8_1:
        return quantize_q8_1(x)
    return np.asarray(x).astype(GGML_PLAIN_DTYPES[qtype])


def dequantize(data: np.ndarray, qtype: GGMLQuantizationType) -> np.ndarray:
    qtype = GGMLQuantizationType(qtype)
    if qtype == GGMLQuantizationType.Q8_0:
        return dequantize_q8_0(data)
    if qtype == GGMLQuantizationType.Q8_1:
        return dequantize_q8_1(data)
    if qtype in GGML_PLAIN_DTYPES:
        return np.asarray(data).astype(np.float32)
    raise ValueError(f"cannot dequantize {qtype.name}")


def quant_shape_to_byte_shape(shape: tuple[int, ...], qtype: GGMLQuantizationType) -> tuple[int, ...]:
    block, size = GGML_QUANT_SIZES[GGMLQuantizationType(qtype)]
    return (*shape[:-1], shape[-1] // block * size)
