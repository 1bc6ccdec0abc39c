"""K-quants (256-weight super-blocks): q2_K, q3_K, q4_K, q5_K, q6_K and q8_K, bit-identical to ggml's
quantize_row_*_ref (no importance matrix) and dequantize_row_*.

The scale searches are ggml's: make_qkx2_quants (q2_K: nmax 3, rmin -0.5, rdelta 0.1, 15 steps, weights |x|,
abs error; q4_K: nmax 15, rmin -1, 20 steps; q5_K: nmax 31, rmin -0.5, 15 steps; q4/q5 weights
sqrt(mean x^2) + |x|, squared error), make_q3_quants (q3_K: nmax 4, 5 rounds of per-weight refinement) and
make_qx_quants (q6_K: nmax 32, rmse_type 1, 18 trial scales). Every step is float32 in the C code's order
(sums left to right, a*b*c as (a*b)*c), rounding with ggml's nearest_int (the 1.5*2^23 trick), f16 with
round-to-nearest-even. The searches run vectorised over sub-blocks in a [weight, sub-block] layout.

Block layouts (bytes):
    q2_K  84: scales[16] (low 4 bits scale, high 4 bits min), qs[64] (2 bits), f16 d, f16 dmin
    q3_K 110: hmask[32] (bit 2 of q), qs[64] (low 2 bits), scales[12] (16 x 6-bit, offset 32), f16 d
    q4_K 144: f16 d, f16 dmin, scales[12] (8 x 6-bit scale + 8 x 6-bit min), qs[128]
    q5_K 176: f16 d, f16 dmin, scales[12], qh[32] (bit 4 of q), qs[128]
    q6_K 210: ql[128] (low 4 bits), qh[64] (high 2 bits), int8 scales[16], f16 d
    q8_K 292: f32 d, int8 qs[256], int16 bsums[16]
"""
from __future__ import annotations

import numpy as np

from .quants_legacy import F32, f16_at, f16_bytes, signed_absmax, take_first

QK_K = 256
SIZE_Q2_K = QK_K // 16 + QK_K // 4 + 4
SIZE_Q3_K = QK_K // 8 + QK_K // 4 + 12 + 2
SIZE_Q4_K = 4 + 12 + QK_K // 2
SIZE_Q5_K = 4 + 12 + QK_K // 8 + QK_K // 2
SIZE_Q6_K = QK_K // 2 + QK_K // 4 + QK_K // 16 + 2
SIZE_Q8_K = 4 + QK_K + 2 * (QK_K // 16)

GROUP_MAX_EPS = F32(1e-15)


# ---- helpers ---------------------------------------------------------------------------------------------

def nearest_int(v: np.ndarray) -> np.ndarray:
    """ggml's nearest_int: (bits(v + 12582912.f) & 0x7fffff) - 0x400000 (round half to even for |v| < 2^22;
    the same garbage as the C code outside that range)."""
    t = (np.asarray(v, dtype=np.float32) + F32(12582912.0)).astype(np.float32)
    return (t.view(np.int32) & 0x007FFFFF) - 0x00400000


def _ssum(a: np.ndarray) -> np.ndarray:
    """`s = 0; for i: s += a[i]` along axis 0, in float32 and in order."""
    s = F32(0) + a[0]
    for i in range(1, a.shape[0]):
        s = s + a[i]
    return s


def _ssum_first(a: np.ndarray) -> np.ndarray:
    """`s = a[0]; for i >= 1: s += a[i]` along axis 0."""
    s = a[0].copy()
    for i in range(1, a.shape[0]):
        s = s + a[i]
    return s


def _pos_max(v: np.ndarray) -> np.ndarray:
    """`m = 0; for j: if (v[j] > m) m = v[j];` along axis 1 (NaN never wins)."""
    m = np.fmax.reduce(v, axis=1)
    return np.where(m > 0, m, F32(0)).astype(np.float32)


def _sub_t(x: np.ndarray, n: int) -> np.ndarray:
    """float32 [nsb, 256] -> [n, nsb * 256 / n]: sub-blocks of n weights as columns."""
    return np.ascontiguousarray(x.reshape(-1, n).T)


def _unsub_t(L: np.ndarray, nsb: int) -> np.ndarray:
    return np.ascontiguousarray(L.T).reshape(nsb, QK_K)


def _f16_round(v: np.ndarray) -> np.ndarray:
    return np.asarray(v, dtype=np.float32).astype(np.float16).astype(np.float32)


# ---- scale searches (columns are sub-blocks: x is [n, N]) -----------------------------------------------

def make_qkx2_quants(x: np.ndarray, w: np.ndarray, nmax: int, rmin: float, rdelta: float, nstep: int,
                     use_mad: bool) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """-> (scale [N], the_min [N] (= -min >= 0), L int32 [n, N] in 0..nmax)."""
    mn = take_first(x, np.argmin(x, axis=0), 0)
    mx = take_first(x, np.argmax(x, axis=0), 0)
    mn = np.where(mn > 0, F32(0), mn).astype(np.float32)
    sum_w = _ssum_first(w)
    sum_x = _ssum_first(w * x)
    rng = (mx - mn).astype(np.float32)
    deg = rng == 0
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        iscale = (F32(nmax) / rng).astype(np.float32)
        scale = (F32(1) / iscale).astype(np.float32)
        L = np.clip(nearest_int(iscale * (x - mn)), 0, nmax)
        diff = scale * L.astype(np.float32) + mn - x
        best = _ssum(w * (np.abs(diff) if use_mad else diff * diff))
        for step in range(nstep + 1):
            # min moves when a step wins, and later steps use the new one (in max - min and x - min)
            isc = (F32(rmin) + F32(rdelta) * F32(step) + F32(nmax)) / (mx - mn)
            li = np.clip(nearest_int(isc * (x - mn)), 0, nmax)
            lf = li.astype(np.float32)
            wl = w * lf
            sum_l = _ssum(wl)
            sum_l2 = _ssum(wl * lf)
            sum_xl = _ssum(wl * x)
            D = sum_w * sum_l2 - sum_l * sum_l
            this_scale = (sum_w * sum_xl - sum_x * sum_l) / D
            this_min = (sum_l2 * sum_x - sum_l * sum_xl) / D
            pos = this_min > 0
            this_min = np.where(pos, F32(0), this_min).astype(np.float32)
            this_scale = np.where(pos, sum_xl / sum_l2, this_scale).astype(np.float32)
            diff = this_scale * lf + this_min - x
            cur = _ssum(w * (np.abs(diff) if use_mad else diff * diff))
            upd = (D > 0) & (cur < best) & ~deg
            if upd.any():
                L = np.where(upd, li, L)
                best = np.where(upd, cur, best)
                scale = np.where(upd, this_scale, scale)
                mn = np.where(upd, this_min, mn)
    scale = np.where(deg, F32(0), scale).astype(np.float32)
    L = np.where(deg, 0, L)
    return scale, (-mn).astype(np.float32), L


def make_q3_quants(x: np.ndarray, nmax: int) -> tuple[np.ndarray, np.ndarray]:
    """make_q3_quants(n, nmax, x, L, do_rmse=true) -> (scale [N], L int32 [n, N] in 0..2*nmax-1, 0 for zero
    sub-blocks)."""
    amax, mx = signed_absmax(x, 0)
    zero = amax < GROUP_MAX_EPS
    n = x.shape[0]
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        iscale = (F32(-nmax) / mx).astype(np.float32)
        L = np.clip(nearest_int(iscale * x), -nmax, nmax - 1).astype(np.float32)
        w = x * x
        wx = w * x
        sumlx = _ssum(wx * L)
        suml2 = _ssum(w * L * L)
        for _ in range(5):
            for i in range(n):
                wi, xi, wxi, li = w[i], x[i], wx[i], L[i]
                slx = sumlx - wxi * li
                ok = slx > 0
                sl2 = suml2 - wi * li * li
                nl = np.clip(nearest_int(xi * sl2 / slx), -nmax, nmax - 1).astype(np.float32)
                ok &= nl != li
                slx = slx + wxi * nl
                sl2 = sl2 + wi * nl * nl
                ok &= (sl2 > 0) & (slx * slx * suml2 > sumlx * sumlx * sl2)
                if ok.any():
                    L[i] = np.where(ok, nl, li)
                    sumlx = np.where(ok, slx, sumlx)
                    suml2 = np.where(ok, sl2, suml2)
        scale = (sumlx / suml2).astype(np.float32)
    Li = L.astype(np.int32) + nmax
    return np.where(zero, F32(0), scale).astype(np.float32), np.where(zero, 0, Li)


def make_qx_quants_rmse1(x: np.ndarray, nmax: int) -> tuple[np.ndarray, np.ndarray]:
    """make_qx_quants(n, nmax, x, L, rmse_type=1, qw=NULL) -> (scale [N], L int32 [n, N] in 0..2*nmax-1)."""
    amax, mx = signed_absmax(x, 0)
    zero = amax < GROUP_MAX_EPS
    w = x * x
    wx = w * x
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        iscale = (F32(-nmax) / mx).astype(np.float32)
        l = np.clip(nearest_int(iscale * x), -nmax, nmax - 1)
        L = l + nmax
        lf = l.astype(np.float32)
        sumlx = _ssum(wx * lf)
        suml2 = _ssum(w * lf * lf)
        scale = np.where(suml2 != 0, sumlx / suml2, F32(0)).astype(np.float32)
        best = scale * sumlx
        for step in range(-9, 10):
            if step == 0:
                continue
            isc = -(F32(nmax) + F32(0.1) * F32(step)) / mx
            l = np.clip(nearest_int(isc * x), -nmax, nmax - 1)
            lf = l.astype(np.float32)
            sumlx = _ssum(wx * lf)
            suml2 = _ssum(w * lf * lf)
            upd = (suml2 > 0) & (sumlx * sumlx > best * suml2)
            if upd.any():
                L = np.where(upd, l + nmax, L)
                scale = np.where(upd, sumlx / suml2, scale).astype(np.float32)
                best = np.where(upd, scale * sumlx, best).astype(np.float32)
    return np.where(zero, F32(0), scale).astype(np.float32), np.where(zero, 0, L)


# ---- packing helpers --------------------------------------------------------------------------------------

def _pack_2bit(L: np.ndarray) -> np.ndarray:
    """L [nsb, 256] in 0..3 -> qs [nsb, 64]: qs[32c + l] = sum_k L[128c + 32k + l] << 2k."""
    q = L.reshape(-1, 2, 4, 32).astype(np.uint8)
    return (q[:, :, 0] | (q[:, :, 1] << 2) | (q[:, :, 2] << 4) | (q[:, :, 3] << 6)).reshape(-1, 64)


def _unpack_2bit(qs: np.ndarray) -> np.ndarray:
    """qs [nsb, 64] -> int32 [nsb, 256]"""
    q = qs.reshape(-1, 2, 1, 32).astype(np.int32)
    sh = np.array([0, 2, 4, 6], np.int32).reshape(1, 1, 4, 1)
    return ((q >> sh) & 3).reshape(-1, QK_K)


def _pack_scale_min_k4(ls: np.ndarray, lm: np.ndarray) -> np.ndarray:
    """6-bit scales and mins [nsb, 8] -> scales[12] as q4_K/q5_K store them."""
    ls = ls.astype(np.uint8)
    lm = lm.astype(np.uint8)
    s = np.zeros((ls.shape[0], 12), np.uint8)
    s[:, 0:4] = ls[:, 0:4] | ((ls[:, 4:8] >> 4) << 6)
    s[:, 4:8] = lm[:, 0:4] | ((lm[:, 4:8] >> 4) << 6)
    s[:, 8:12] = (ls[:, 4:8] & 0xF) | ((lm[:, 4:8] & 0xF) << 4)
    return s


def _unpack_scale_min_k4(s: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """get_scale_min_k4 for j = 0..7: scales[12] -> (sc, m) int32 [nsb, 8]."""
    s = s.astype(np.int32)
    sc = np.concatenate([s[:, 0:4] & 63, (s[:, 8:12] & 0xF) | ((s[:, 0:4] >> 6) << 4)], axis=1)
    m = np.concatenate([s[:, 4:8] & 63, (s[:, 8:12] >> 4) | ((s[:, 4:8] >> 6) << 4)], axis=1)
    return sc, m


def _requant(x: np.ndarray, d: np.ndarray, dm: np.ndarray | None, lo: int, hi: int, L: np.ndarray) -> np.ndarray:
    """Final pass: for each sub-block with d != 0, L = clamp(nearest_int((x + dm) / d)) (x / d without dm);
    sub-blocks with d == 0 keep the search's L. x [nsb, nsub, n], d/dm [nsb, nsub]."""
    with np.errstate(divide="ignore", invalid="ignore"):
        v = x if dm is None else x + dm[..., None]
        l = np.clip(nearest_int(v / d[..., None]), lo, hi)
    return np.where((d != 0)[..., None], l, L.reshape(l.shape))


# ---- quantize: float32 [nsb, 256] -> uint8 [nsb, size] --------------------------------------------------

def quantize_blocks_q2_K(x: np.ndarray) -> np.ndarray:
    nsb = x.shape[0]
    xt = _sub_t(x, 16)
    scales, mins, Lt = make_qkx2_quants(xt, np.abs(xt), 3, -0.5, 0.1, 15, True)
    scales, mins, L = scales.reshape(nsb, 16), mins.reshape(nsb, 16), _unsub_t(Lt, nsb)
    max_scale, max_min = _pos_max(scales), _pos_max(mins)
    with np.errstate(divide="ignore"):
        isc = np.where(max_scale > 0, F32(15) / max_scale, F32(0)).astype(np.float32)
        imn = np.where(max_min > 0, F32(15) / max_min, F32(0)).astype(np.float32)
    sc = np.where(max_scale[:, None] > 0, nearest_int(isc[:, None] * scales), 0) & 0xFF
    sc |= np.where(max_min[:, None] > 0, nearest_int(imn[:, None] * mins) << 4, 0) & 0xFF
    d = np.where(max_scale > 0, max_scale / F32(15), F32(0)).astype(np.float32)
    dmin = np.where(max_min > 0, max_min / F32(15), F32(0)).astype(np.float32)
    dd = _f16_round(d)[:, None] * (sc & 0xF).astype(np.float32)
    dm = _f16_round(dmin)[:, None] * (sc >> 4).astype(np.float32)
    L = _requant(x.reshape(nsb, 16, 16), dd, dm, 0, 3, L)
    out = np.empty((nsb, SIZE_Q2_K), np.uint8)
    out[:, 0:16] = sc
    out[:, 16:80] = _pack_2bit(L.reshape(nsb, QK_K))
    out[:, 80:82] = f16_bytes(d)
    out[:, 82:84] = f16_bytes(dmin)
    return out


def quantize_blocks_q3_K(x: np.ndarray) -> np.ndarray:
    nsb = x.shape[0]
    scales, Lt = make_q3_quants(_sub_t(x, 16), 4)
    scales, L = scales.reshape(nsb, 16), _unsub_t(Lt, nsb)
    _, max_scale = signed_absmax(scales, 1)
    has = max_scale != 0
    with np.errstate(divide="ignore", invalid="ignore"):
        iscale = (F32(-32) / max_scale).astype(np.float32)
        l6 = np.clip(((nearest_int(iscale[:, None] * scales) + 128) & 0xFF) - 128, -32, 31) + 32   # (int8_t)
        d = np.where(has, F32(1) / iscale, F32(0)).astype(np.float32)
    l6 = np.where(has[:, None], l6, 0)
    s = np.zeros((nsb, 12), np.uint8)
    s[:, 0:8] = (l6[:, 0:8] & 0xF) | ((l6[:, 8:16] & 0xF) << 4)
    hi = l6 >> 4
    s[:, 8:12] = hi[:, 0:4] | (hi[:, 4:8] << 2) | (hi[:, 8:12] << 4) | (hi[:, 12:16] << 6)
    dd = _f16_round(d)[:, None] * (l6 - 32).astype(np.float32)
    L = (_requant(x.reshape(nsb, 16, 16), dd, None, -4, 3, L.reshape(nsb, 16, 16) - 4) + 4).reshape(nsb, QK_K)
    high = (L > 3).reshape(nsb, 8, 32).astype(np.uint8)
    hmask = np.zeros((nsb, 32), np.uint8)
    for k in range(8):
        hmask |= high[:, k] << k
    out = np.empty((nsb, SIZE_Q3_K), np.uint8)
    out[:, 0:32] = hmask
    out[:, 32:96] = _pack_2bit(L & 3)
    out[:, 96:108] = s
    out[:, 108:110] = f16_bytes(d)
    return out


def _quantize_q45_K(x: np.ndarray, nmax: int, rmin: float, nstep: int) -> tuple[np.ndarray, ...]:
    nsb = x.shape[0]
    xt = _sub_t(x, 32)
    av_x = np.sqrt(_ssum(xt * xt) / F32(32))
    w = av_x + np.abs(xt)
    scales, mins, Lt = make_qkx2_quants(xt, w, nmax, rmin, 0.1, nstep, False)
    scales, mins, L = scales.reshape(nsb, 8), mins.reshape(nsb, 8), _unsub_t(Lt, nsb)
    max_scale, max_min = _pos_max(scales), _pos_max(mins)
    with np.errstate(divide="ignore"):
        inv_scale = np.where(max_scale > 0, F32(63) / max_scale, F32(0)).astype(np.float32)
        inv_min = np.where(max_min > 0, F32(63) / max_min, F32(0)).astype(np.float32)
    ls = np.minimum(63, nearest_int(inv_scale[:, None] * scales) & 0xFF)     # (uint8_t) then MIN(63, .)
    lm = np.minimum(63, nearest_int(inv_min[:, None] * mins) & 0xFF)
    d = (max_scale / F32(63)).astype(np.float32)
    dmin = (max_min / F32(63)).astype(np.float32)
    dd = _f16_round(d)[:, None] * ls.astype(np.float32)
    dm = _f16_round(dmin)[:, None] * lm.astype(np.float32)
    L = _requant(x.reshape(nsb, 8, 32), dd, dm, 0, nmax, L).reshape(nsb, QK_K)
    return d, dmin, _pack_scale_min_k4(ls, lm), L


def quantize_blocks_q4_K(x: np.ndarray) -> np.ndarray:
    nsb = x.shape[0]
    d, dmin, s, L = _quantize_q45_K(x, 15, -1.0, 20)
    q = L.reshape(nsb, 4, 2, 32).astype(np.uint8)
    out = np.empty((nsb, SIZE_Q4_K), np.uint8)
    out[:, 0:2] = f16_bytes(d)
    out[:, 2:4] = f16_bytes(dmin)
    out[:, 4:16] = s
    out[:, 16:] = (q[:, :, 0] | (q[:, :, 1] << 4)).reshape(nsb, 128)
    return out


def quantize_blocks_q5_K(x: np.ndarray) -> np.ndarray:
    nsb = x.shape[0]
    d, dmin, s, L = _quantize_q45_K(x, 31, -0.5, 15)
    q = L.reshape(nsb, 4, 2, 32).astype(np.uint8)
    hb = q >> 4
    qh = np.zeros((nsb, 32), np.uint8)
    for c in range(4):
        qh |= (hb[:, c, 0] << (2 * c)) | (hb[:, c, 1] << (2 * c + 1))
    out = np.empty((nsb, SIZE_Q5_K), np.uint8)
    out[:, 0:2] = f16_bytes(d)
    out[:, 2:4] = f16_bytes(dmin)
    out[:, 4:16] = s
    out[:, 16:48] = qh
    out[:, 48:] = ((q[:, :, 0] & 0xF) | ((q[:, :, 1] & 0xF) << 4)).reshape(nsb, 128)
    return out


def quantize_blocks_q6_K(x: np.ndarray) -> np.ndarray:
    nsb = x.shape[0]
    scales, Lt = make_qx_quants_rmse1(_sub_t(x, 16), 32)
    scales, L = scales.reshape(nsb, 16), _unsub_t(Lt, nsb)
    max_abs, max_scale = signed_absmax(scales, 1)
    zero = max_abs < GROUP_MAX_EPS
    with np.errstate(divide="ignore", invalid="ignore"):
        iscale = (F32(-128) / max_scale).astype(np.float32)
        d = (F32(1) / iscale).astype(np.float32)
        sc = np.minimum(127, nearest_int(iscale[:, None] * scales))
    sc = ((sc + 128) & 0xFF) - 128                                           # int8_t store
    dd = _f16_round(d)[:, None] * sc.astype(np.float32)
    L = _requant(x.reshape(nsb, 16, 16), dd, None, -32, 31, L.reshape(nsb, 16, 16) - 32) + 32
    q = L.reshape(nsb, 2, 4, 32).astype(np.uint8)
    ql = np.concatenate([(q[:, :, 0] & 0xF) | ((q[:, :, 2] & 0xF) << 4),
                         (q[:, :, 1] & 0xF) | ((q[:, :, 3] & 0xF) << 4)], axis=2).reshape(nsb, 128)
    qh = ((q[:, :, 0] >> 4) | ((q[:, :, 1] >> 4) << 2) | ((q[:, :, 2] >> 4) << 4) | ((q[:, :, 3] >> 4) << 6))
    out = np.empty((nsb, SIZE_Q6_K), np.uint8)
    out[:, 0:128] = ql
    out[:, 128:192] = qh.reshape(nsb, 64)
    out[:, 192:208] = sc.astype(np.int8).view(np.uint8)
    out[:, 208:210] = f16_bytes(d)
    out[zero] = 0
    return out


def quantize_blocks_q8_K(x: np.ndarray) -> np.ndarray:
    nsb = x.shape[0]
    amax, mx = signed_absmax(x, 1)
    zero = amax == 0
    with np.errstate(divide="ignore", invalid="ignore"):
        iscale = (F32(-127) / mx).astype(np.float32)
        q = np.minimum(127, nearest_int(iscale[:, None] * x))
        d = (F32(1) / iscale).astype(np.float32)
    q = np.where(zero[:, None], 0, q)
    d = np.where(zero, F32(0), d).astype(np.float32)
    qi8 = (((q + 128) & 0xFF) - 128).astype(np.int8)
    bsums = qi8.reshape(nsb, 16, 16).astype(np.int32).sum(axis=2).astype("<i2")
    out = np.empty((nsb, SIZE_Q8_K), np.uint8)
    out[:, 0:4] = d.astype("<f4").view(np.uint8).reshape(nsb, 4)
    out[:, 4:260] = qi8.view(np.uint8)
    out[:, 260:292] = bsums.view(np.uint8).reshape(nsb, 32)
    return out


# ---- dequantize: uint8 [nsb, size] -> float32 [nsb, 256] ------------------------------------------------

def dequantize_blocks_q2_K(b: np.ndarray) -> np.ndarray:
    nsb = b.shape[0]
    sc = b[:, 0:16].astype(np.int32)
    d, dmin = f16_at(b, 80), f16_at(b, 82)
    dl = (d * (sc & 0xF).astype(np.float32))[:, :, None]                  # [nsb, 16, 1]
    ml = (dmin * (sc >> 4).astype(np.float32))[:, :, None]
    q = _unpack_2bit(b[:, 16:80]).reshape(nsb, 16, 16).astype(np.float32)
    return (dl * q - ml).astype(np.float32).reshape(nsb, QK_K)


def dequantize_blocks_q3_K(b: np.ndarray) -> np.ndarray:
    nsb = b.shape[0]
    s = b[:, 96:108].astype(np.int32)
    lo = np.concatenate([s[:, 0:8] & 0xF, s[:, 0:8] >> 4], axis=1)         # [nsb, 16]
    hi = np.concatenate([(s[:, 8:12] >> (2 * k)) & 3 for k in range(4)], axis=1)
    d = f16_at(b, 108)
    dl = (d * ((lo | (hi << 4)) - 32).astype(np.float32))[:, :, None]
    hm = b[:, 0:32].astype(np.int32)[:, None, :]                            # [nsb, 1, 32]
    h = ((hm >> np.arange(8, dtype=np.int32)[None, :, None]) & 1).reshape(nsb, QK_K)
    q = (_unpack_2bit(b[:, 32:96]) - np.where(h != 0, 0, 4)).reshape(nsb, 16, 16).astype(np.float32)
    return (dl * q).astype(np.float32).reshape(nsb, QK_K)


def _dequantize_q45_K(b: np.ndarray, q: np.ndarray) -> np.ndarray:
    nsb = b.shape[0]
    d, dmin = f16_at(b, 0), f16_at(b, 2)
    sc, m = _unpack_scale_min_k4(b[:, 4:16])
    d1 = (d * sc.astype(np.float32))[:, :, None]                          # [nsb, 8, 1]
    m1 = (dmin * m.astype(np.float32))[:, :, None]
    return (d1 * q.reshape(nsb, 8, 32).astype(np.float32) - m1).astype(np.float32).reshape(nsb, QK_K)


def _unpack_nibbles_k(qs: np.ndarray) -> np.ndarray:
    """qs [nsb, 128] -> int32 [nsb, 4, 2, 32]: chunk c of 64 weights = low nibbles of qs[32c:32c+32], then high."""
    q = qs.reshape(-1, 4, 1, 32).astype(np.int32)
    return np.concatenate([q & 0xF, q >> 4], axis=2)


def dequantize_blocks_q4_K(b: np.ndarray) -> np.ndarray:
    return _dequantize_q45_K(b, _unpack_nibbles_k(b[:, 16:144]))


def dequantize_blocks_q5_K(b: np.ndarray) -> np.ndarray:
    q = _unpack_nibbles_k(b[:, 48:176])
    qh = b[:, 16:48].astype(np.int32)                                      # [nsb, 32]
    sh = (2 * np.arange(4, dtype=np.int32)[:, None] + np.arange(2, dtype=np.int32)[None, :])  # [4, 2]
    h = (qh[:, None, None, :] >> sh[None, :, :, None]) & 1
    return _dequantize_q45_K(b, q + (h << 4))


def dequantize_blocks_q6_K(b: np.ndarray) -> np.ndarray:
    nsb = b.shape[0]
    ql = b[:, 0:128].reshape(nsb, 2, 2, 32).astype(np.int32)               # [c, half, l]
    qh = b[:, 128:192].reshape(nsb, 2, 1, 32).astype(np.int32)
    lo = np.stack([ql[:, :, 0] & 0xF, ql[:, :, 1] & 0xF, ql[:, :, 0] >> 4, ql[:, :, 1] >> 4], axis=2)  # [nsb,2,4,32]
    hi = (qh >> (2 * np.arange(4, dtype=np.int32)[None, None, :, None])) & 3
    q = ((lo | (hi << 4)) - 32).reshape(nsb, 16, 16).astype(np.float32)
    sc = b[:, 192:208].view(np.int8).astype(np.float32)
    d = f16_at(b, 208)
    return ((d * sc)[:, :, None] * q).astype(np.float32).reshape(nsb, QK_K)


def dequantize_blocks_q8_K(b: np.ndarray) -> np.ndarray:
    d = np.ascontiguousarray(b[:, 0:4]).view("<f4").astype(np.float32)
    return (d * b[:, 4:260].view(np.int8).astype(np.float32)).astype(np.float32)
