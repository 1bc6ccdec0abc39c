"""q4_0 / q4_1 / q5_0 / q5_1 ("legacy" 32-weight blocks), bit-identical to ggml's quantize_row_*_ref and
dequantize_row_* (float32 arithmetic in the C code's order, f16 stored with round-to-nearest-even).

Block layouts (weight j of a block: nibble j % 16 of qs, low nibble for j < 16, high nibble for j >= 16):
    q4_0: f16 d, qs[16]                    x = d * (q - 8)     d = max / -8   (max: signed value of max |x|)
    q4_1: f16 d, f16 m, qs[16]             x = d * q + m       d = (max - min) / 15
    q5_0: f16 d, u32 qh, qs[16]            x = d * (q - 16)    d = max / -16, bit 4 of q_j is bit j of qh
    q5_1: f16 d, f16 m, u32 qh, qs[16]     x = d * q + m       d = (max - min) / 31
Quantized values: q = min(qmax, (int8)(x * id + offset)) with C truncation (offset 8.5 / 0.5 / 16.5 / 0.5).

All functions here work on float32 blocks [nb, 32] or byte blocks [nb, type_size]; quants.py is the front.
"""
from __future__ import annotations

import numpy as np

F32 = np.float32
QK = 32

# bytes per block
SIZE_Q4_0 = 2 + QK // 2
SIZE_Q4_1 = 4 + QK // 2
SIZE_Q5_0 = 2 + 4 + QK // 2
SIZE_Q5_1 = 4 + 4 + QK // 2


def f16_bytes(v: np.ndarray) -> np.ndarray:
    """float32 [nb] -> uint8 [nb, 2]: IEEE half, round to nearest even (as ggml's FP32_TO_FP16)."""
    return np.ascontiguousarray(v, dtype=np.float32).astype("<f2").view(np.uint8).reshape(-1, 2)


def f16_at(blk: np.ndarray, off: int) -> np.ndarray:
    """uint8 [nb, bytes] -> float32 [nb, 1] from the half at byte offset off."""
    return np.ascontiguousarray(blk[:, off:off + 2]).view("<f2").astype(np.float32)


def take_first(x: np.ndarray, idx: np.ndarray, axis: int) -> np.ndarray:
    return np.take_along_axis(x, np.expand_dims(idx, axis), axis).squeeze(axis)


def signed_absmax(x: np.ndarray, axis: int) -> tuple[np.ndarray, np.ndarray]:
    """ggml's `if (amax < fabsf(v)) { amax = fabsf(v); max = v; }` from amax = max = 0: the first element of
    largest |x| along axis -> (amax, max); both +0 when every |x| is 0 (or NaN)."""
    a = np.abs(x)
    nan = np.isnan(a)
    if nan.any():
        a = np.where(nan, F32(-1), a)
    idx = np.argmax(a, axis=axis)
    amax = take_first(a, idx, axis)
    mx = take_first(x, idx, axis)
    pos = amax > 0
    return np.where(pos, amax, F32(0)), np.where(pos, mx, F32(0))


def _first_min_max(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """min/max along axis 1 as the C loops find them (first occurrence, so the sign of a zero is x's)."""
    mn = take_first(x, np.argmin(x, axis=1), 1)
    mx = take_first(x, np.argmax(x, axis=1), 1)
    return mn, mx


def _inv(d: np.ndarray) -> np.ndarray:
    """id = d ? 1.0f/d : 0.0f"""
    with np.errstate(divide="ignore"):
        return np.where(d != 0, F32(1) / d, F32(0)).astype(np.float32)


def _trunc_u8(v: np.ndarray) -> np.ndarray:
    """C float -> integer conversion (toward zero); values here lie in [0, 32]."""
    return np.trunc(v).astype(np.int32)


def _pack_nibbles(q: np.ndarray) -> np.ndarray:
    """q int [nb, 32] (values 0..15 after & 0xF) -> uint8 [nb, 16]: qs[j] = q[j] | q[j + 16] << 4."""
    return ((q[:, :16] & 0xF) | ((q[:, 16:] & 0xF) << 4)).astype(np.uint8)


def _pack_qh(q: np.ndarray) -> np.ndarray:
    """bit 4 of q[j] -> bit j of a little-endian uint32, as uint8 [nb, 4]."""
    bits = ((q >> 4) & 1).astype(np.uint32)
    qh = (bits << np.arange(32, dtype=np.uint32)).sum(axis=1, dtype=np.uint32)
    return qh.astype("<u4").view(np.uint8).reshape(-1, 4)


def _unpack_nibbles(qs: np.ndarray) -> np.ndarray:
    """uint8 [nb, 16] -> int32 [nb, 32]"""
    return np.concatenate([qs & 0xF, qs >> 4], axis=1).astype(np.int32)


def _unpack_qh(qh: np.ndarray) -> np.ndarray:
    """uint8 [nb, 4] -> int32 [nb, 32]: bit j of the uint32 shifted to bit 4."""
    h = np.ascontiguousarray(qh).view("<u4").astype(np.uint32)          # [nb, 1]
    return (((h >> np.arange(32, dtype=np.uint32)) & 1) << 4).astype(np.int32)


# ---- quantize: float32 [nb, 32] -> uint8 [nb, size] ----------------------------------------------------

def quantize_blocks_q4_0(x: np.ndarray) -> np.ndarray:
    _, mx = signed_absmax(x, 1)
    d = (mx / F32(-8)).astype(np.float32)
    idv = _inv(d)
    q = np.minimum(15, _trunc_u8((x * idv[:, None]).astype(np.float32) + F32(8.5)))
    out = np.empty((x.shape[0], SIZE_Q4_0), np.uint8)
    out[:, 0:2] = f16_bytes(d)
    out[:, 2:] = _pack_nibbles(q)
    return out


def quantize_blocks_q4_1(x: np.ndarray) -> np.ndarray:
    mn, mx = _first_min_max(x)
    d = ((mx - mn) / F32(15)).astype(np.float32)
    idv = _inv(d)
    q = np.minimum(15, _trunc_u8(((x - mn[:, None]) * idv[:, None]).astype(np.float32) + F32(0.5)))
    out = np.empty((x.shape[0], SIZE_Q4_1), np.uint8)
    out[:, 0:2] = f16_bytes(d)
    out[:, 2:4] = f16_bytes(mn)
    out[:, 4:] = _pack_nibbles(q)
    return out


def quantize_blocks_q5_0(x: np.ndarray) -> np.ndarray:
    _, mx = signed_absmax(x, 1)
    d = (mx / F32(-16)).astype(np.float32)
    idv = _inv(d)
    q = np.minimum(31, _trunc_u8((x * idv[:, None]).astype(np.float32) + F32(16.5)))
    out = np.empty((x.shape[0], SIZE_Q5_0), np.uint8)
    out[:, 0:2] = f16_bytes(d)
    out[:, 2:6] = _pack_qh(q)
    out[:, 6:] = _pack_nibbles(q)
    return out


def quantize_blocks_q5_1(x: np.ndarray) -> np.ndarray:
    mn, mx = _first_min_max(x)
    d = ((mx - mn) / F32(31)).astype(np.float32)
    idv = _inv(d)
    q = _trunc_u8(((x - mn[:, None]) * idv[:, None]).astype(np.float32) + F32(0.5)) & 0xFF   # (uint8), no clamp
    out = np.empty((x.shape[0], SIZE_Q5_1), np.uint8)
    out[:, 0:2] = f16_bytes(d)
    out[:, 2:4] = f16_bytes(mn)
    out[:, 4:8] = _pack_qh(q)
    out[:, 8:] = _pack_nibbles(q)
    return out


# ---- dequantize: uint8 [nb, size] -> float32 [nb, 32] --------------------------------------------------

def dequantize_blocks_q4_0(b: np.ndarray) -> np.ndarray:
    d = f16_at(b, 0)
    q = (_unpack_nibbles(b[:, 2:]) - 8).astype(np.float32)
    return (q * d).astype(np.float32)


def dequantize_blocks_q4_1(b: np.ndarray) -> np.ndarray:
    d, m = f16_at(b, 0), f16_at(b, 2)
    q = _unpack_nibbles(b[:, 4:]).astype(np.float32)
    return (q * d + m).astype(np.float32)


def dequantize_blocks_q5_0(b: np.ndarray) -> np.ndarray:
    d = f16_at(b, 0)
    q = ((_unpack_nibbles(b[:, 6:]) | _unpack_qh(b[:, 2:6])) - 16).astype(np.float32)
    return (q * d).astype(np.float32)


def dequantize_blocks_q5_1(b: np.ndarray) -> np.ndarray:
    d, m = f16_at(b, 0), f16_at(b, 2)
    q = (_unpack_nibbles(b[:, 8:]) | _unpack_qh(b[:, 4:8])).astype(np.float32)
    return (q * d + m).astype(np.float32)
