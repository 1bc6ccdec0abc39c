"""Quantize / dequantize every ggml block type, bit-identical to ggml's reference C code
(quantize_row_*_ref without importance matrix, dequantize_row_*): q4_0 q4_1 q5_0 q5_1 q8_0 q8_1 (32-weight
blocks) and q2_K q3_K q4_K q5_K q6_K q8_K (256-weight super-blocks). numpy only, vectorised over blocks.

    blocks = quantize(x_f32, GGMLQuantizationType.Q4_K)   # uint8 [..., n/256*144], one row per row of x
    y = dequantize(blocks, GGMLQuantizationType.Q4_K)      # float32 [..., n]

The legacy types live in quants_legacy.py, the K-quants (with ggml's scale searches) in quants_k.py; this
module is the front and holds q8_0 / q8_1:
block_q8_0 = f16 d + 32 x int8 (34 bytes); block_q8_1 = f16 d, f16 s + 32 x int8 (36 bytes).
All arithmetic is float32 like the C code: d = amax / 127, id = d ? 1/d : 0, q = roundf(x * id),
s = (float)sum(q) * d; d and s are then rounded to f16 (round to nearest even).
"""
from __future__ import annotations

import numpy as np

from . import quants_k as _k
from . import quants_legacy as _l
from .constants import GGML_PLAIN_DTYPES, GGML_QUANT_SIZES, QK8_0, GGMLQuantizationType

QT = GGMLQuantizationType


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


def _q8_0_blocks(xb: np.ndarray) -> np.ndarray:
    return quantize_q8_0(xb).reshape(-1, 34)


def _q8_1_blocks(xb: np.ndarray) -> np.ndarray:
    return quantize_q8_1(xb).reshape(-1, 36)


# type -> (quantize float32 [nb, block] -> uint8 [nb, size], dequantize uint8 [nb, size] -> float32 [nb, block])
BLOCK_CODECS = {
    QT.Q4_0: (_l.quantize_blocks_q4_0, _l.dequantize_blocks_q4_0),
    QT.Q4_1: (_l.quantize_blocks_q4_1, _l.dequantize_blocks_q4_1),
    QT.Q5_0: (_l.quantize_blocks_q5_0, _l.dequantize_blocks_q5_0),
    QT.Q5_1: (_l.quantize_blocks_q5_1, _l.dequantize_blocks_q5_1),
    QT.Q8_0: (_q8_0_blocks, dequantize_q8_0),
    QT.Q8_1: (_q8_1_blocks, dequantize_q8_1),
    QT.Q2_K: (_k.quantize_blocks_q2_K, _k.dequantize_blocks_q2_K),
    QT.Q3_K: (_k.quantize_blocks_q3_K, _k.dequantize_blocks_q3_K),
    QT.Q4_K: (_k.quantize_blocks_q4_K, _k.dequantize_blocks_q4_K),
    QT.Q5_K: (_k.quantize_blocks_q5_K, _k.dequantize_blocks_q5_K),
    QT.Q6_K: (_k.quantize_blocks_q6_K, _k.dequantize_blocks_q6_K),
    QT.Q8_K: (_k.quantize_blocks_q8_K, _k.dequantize_blocks_q8_K),
}

# weights per call of a block codec: bounds the temporaries (a few MiB each) and keeps them in cache
CHUNK_WEIGHTS = 1 << 17


def quantize_blocks(x: np.ndarray, qtype: GGMLQuantizationType) -> np.ndarray:
    """float32 [..., n] (n a multiple of the block size) -> uint8 [..., n / block * type_size]."""
    qtype = QT(qtype)
    block, size = GGML_QUANT_SIZES[qtype]
    x = np.ascontiguousarray(x, dtype=np.float32)
    if x.ndim == 0 or x.shape[-1] % block != 0:
        n = x.shape[-1] if x.ndim else 1
        raise ValueError(f"{qtype.name.lower()}: row length {n} is not a multiple of {block}")
    out = _by_chunks(BLOCK_CODECS[qtype][0], x.reshape(-1, block), size, np.uint8, block)
    return out.reshape(*x.shape[:-1], x.shape[-1] // block * size)


def _by_chunks(fn, rows: np.ndarray, width: int, dtype, block: int) -> np.ndarray:
    """fn over the rows (one block each) in chunks of about CHUNK_WEIGHTS weights -> dtype [n_rows, width]."""
    out = np.empty((rows.shape[0], width), dtype)
    step = max(1, CHUNK_WEIGHTS // block)
    for i in range(0, rows.shape[0], step):
        out[i:i + step] = fn(rows[i:i + step])
    return out


def dequantize_blocks(b: np.ndarray, qtype: GGMLQuantizationType) -> np.ndarray:
    """uint8 [..., n / block * type_size] -> float32 [..., n]."""
    qtype = QT(qtype)
    block, size = GGML_QUANT_SIZES[qtype]
    b = np.ascontiguousarray(b, dtype=np.uint8)
    if b.ndim == 0 or b.shape[-1] % size != 0:
        raise ValueError(f"{qtype.name.lower()}: {b.shape[-1] if b.ndim else 0} bytes per row is not a multiple "
                         f"of the block size {size}")
    out = _by_chunks(BLOCK_CODECS[qtype][1], b.reshape(-1, size), block, np.float32, block)
    return out.reshape(*b.shape[:-1], b.shape[-1] // size * block)


def quantize(x: np.ndarray, qtype: GGMLQuantizationType) -> np.ndarray:
    """float32 array -> stored representation of qtype (numpy dtype for plain types, uint8 blocks otherwise)."""
    qtype = QT(qtype)
    if qtype in GGML_PLAIN_DTYPES:
        return np.asarray(x).astype(GGML_PLAIN_DTYPES[qtype])
    return quantize_blocks(x, qtype)


def dequantize(data: np.ndarray, qtype: GGMLQuantizationType) -> np.ndarray:
    """Stored representation of qtype -> float32 (blocks: last axis bytes -> weights)."""
    qtype = QT(qtype)
    if qtype in GGML_PLAIN_DTYPES:
        return np.asarray(data).astype(np.float32)
    if qtype in BLOCK_CODECS:
        return dequantize_blocks(data, qtype)
    raise ValueError(f"cannot dequantize {qtype.name}")


def quant_shape_to_byte_shape(shape: tuple[int, ...], qtype: GGMLQuantizationType) -> tuple[int, ...]:
    block, size = GGML_QUANT_SIZES[GGMLQuantizationType(qtype)]
    return (*shape[:-1], shape[-1] // block * size)
