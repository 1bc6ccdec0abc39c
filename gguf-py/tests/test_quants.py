import math
import struct
import os
import subprocess
import sys

import numpy as np
import pytest

from gguf.quants import dequantize_q8_0, dequantize_q8_1, quantize_q8_0, quantize_q8_1, roundf
from q8_golden import golden_input


def _ref_block(x, with_sum):
    """Scalar transcription of ggml quantize_row_q8_0_ref / q8_1_ref for one block (np.float32 scalars)."""
    amax = np.float32(0)
    for v in x:
        amax = max(amax, np.float32(abs(v)))
    d = np.float32(amax / np.float32(127))
    idv = np.float32(np.float32(1) / d) if d != 0 else np.float32(0)
    qs = []
    for v in x:
        p = float(np.float32(v * idv))
        qs.append(int(math.copysign(math.floor(abs(p) + 0.5), p)))  # roundf; exact in float64
    out = np.float16(d).tobytes()
    if with_sum:
        out += np.float16(np.float32(np.float32(sum(qs)) * d)).tobytes()
    return out + np.array(qs, np.int8).tobytes()


def _ref(x, with_sum):
    return b"".join(_ref_block(x[i:i + 32], with_sum) for i in range(0, len(x), 32))


def test_roundf_half_away_from_zero():
    v = np.array([0.5, 1.5, 2.5, -0.5, -1.5, -2.5, 0.49999997, -0.49999997, 126.5, -126.5, 0.0], np.float32)
    assert roundf(v).tolist() == [1, 2, 3, -1, -2, -3, 0, -0, 127, -127, 0]


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_q8_matches_scalar_reference(seed):
    rng = np.random.default_rng(seed)
    x = (rng.standard_normal(32 * 40) * rng.choice([1e-3, 1, 50], 32 * 40)).astype(np.float32)
    x[:32] = 0                                   # all-zero block: d = 0, id = 0
    x[32:64] = np.float32(0.5) * np.arange(32)   # exact ties in x*id
    x[64:96] = -x[32:64]
    assert quantize_q8_0(x).tobytes() == _ref(x, False)
    assert quantize_q8_1(x).tobytes() == _ref(x, True)


def test_golden_input_bytes():
    x = golden_input(64)
    assert quantize_q8_0(x).tobytes() == _ref(x, False)
    assert quantize_q8_1(x).tobytes() == _ref(x, True)
    # hand-checked first block: amax = 3.8 ~ x[20], d = f16(amax/127); x[0] = 0 -> q = 0
    q0 = quantize_q8_0(x)
    assert q0[2] == 0 and np.abs(q0[2:34].view(np.int8)).max() == 127


def test_golden_script_output_matches():
    script = os.path.join(os.path.dirname(__file__), "..", "scripts", "q8_golden.py")
    out = subprocess.run([sys.executable, script], check=True, capture_output=True, text=True).stdout
    q0 = quantize_q8_0(golden_input(64)).tobytes()
    assert ", ".join(f"0x{b:02x}" for b in q0[:12]) in out
    assert "q8_1_golden[72]" in out and "q8_golden_x_bits[64]" in out


def test_dequantize_and_shapes():
    rng = np.random.default_rng(3)
    x = rng.standard_normal((3, 5, 96)).astype(np.float32)
    b0, b1 = quantize_q8_0(x), quantize_q8_1(x)
    assert b0.shape == (3, 5, 3 * 34) and b1.shape == (3, 5, 3 * 36)
    y0, y1 = dequantize_q8_0(b0), dequantize_q8_1(b1)
    assert y0.shape == x.shape and np.array_equal(y0, y1)
    amax = np.abs(x.reshape(-1, 32)).max(axis=1)
    err = np.abs((y0 - x).reshape(-1, 32)).max(axis=1)
    assert np.all(err <= amax / 127 * (0.5 + 127 * 2.0**-11) + 1e-7)  # rounding + f16 d error
    with pytest.raises(ValueError, match="multiple of 32"):
        quantize_q8_0(np.zeros(33, np.float32))


# =====================================================================================================
# All block types: q4_0 q4_1 q5_0 q5_1 (32) and q2_K q3_K q4_K q5_K q6_K q8_K (256).
# The scalar functions below transcribe ggml's quantize_row_*_ref / dequantize_row_* statement by statement,
# one block at a time, with np.float32 scalars (every operation rounded to float32 in the C order). They are
# the independent reference for the vectorised gguf.quants code; the llama.cpp-made files in
# test_quant_vectors.py check both against ggml itself.
# =====================================================================================================

from gguf import GGUFReader, GGUFWriter  # noqa: E402
from gguf.constants import GGML_QUANT_SIZES, GGMLQuantizationType as QT  # noqa: E402
from gguf.quants import dequantize, quantize  # noqa: E402

f = np.float32
FLT_MAX = f(np.finfo(np.float32).max)
BLOCK_TYPES = [QT.Q4_0, QT.Q4_1, QT.Q5_0, QT.Q5_1, QT.Q8_0, QT.Q8_1, QT.Q2_K, QT.Q3_K, QT.Q4_K, QT.Q5_K, QT.Q6_K,
               QT.Q8_K]
K_TYPES = [QT.Q2_K, QT.Q3_K, QT.Q4_K, QT.Q5_K, QT.Q6_K, QT.Q8_K]
LEGACY_TYPES = [QT.Q4_0, QT.Q4_1, QT.Q5_0, QT.Q5_1]


def h16(v) -> bytes:
    return np.float16(f(v)).tobytes()                 # GGML_FP32_TO_FP16: round to nearest even


def fh(b: bytes, off: int) -> np.float32:
    return f(np.frombuffer(b, "<f2", 1, off)[0])      # GGML_FP16_TO_FP32


def nint(v) -> int:
    """nearest_int: float add of 12582912.f, then the mantissa bits."""
    i = int(np.array([f(f(v) + f(12582912.0))], np.float32).view(np.int32)[0])
    return (i & 0x007FFFFF) - 0x00400000


def u8(v: int) -> int:
    return v & 0xFF


def i8(v: int) -> int:
    return ((v + 128) & 0xFF) - 128


# ---- legacy ---------------------------------------------------------------------------------------------

def _absmax(x):
    """The value of largest magnitude, sign kept (the first of equals), as ggml's reference quantizers pick it."""
    amax, mx = f(0), f(0)
    for v in x:
        if amax < abs(v):
            amax, mx = abs(v), v
    return mx


def ref_q4_0(x):
    mx = _absmax(x)
    d = f(mx / f(-8))
    idv = f(f(1) / d) if d else f(0)
    q = [min(15, int(f(f(v * idv) + f(8.5)))) for v in x]
    return h16(d) + bytes(q[j] | (q[j + 16] << 4) for j in range(16))


def _minmax(x):
    mn, mx = FLT_MAX, -FLT_MAX
    for v in x:
        if v < mn:
            mn = v
        if v > mx:
            mx = v
    return mn, mx


def ref_q4_1(x):
    mn, mx = _minmax(x)
    d = f(f(mx - mn) / f(15))
    idv = f(f(1) / d) if d else f(0)
    q = [min(15, int(f(f(f(v - mn) * idv) + f(0.5)))) for v in x]
    return h16(d) + h16(mn) + bytes(q[j] | (q[j + 16] << 4) for j in range(16))


def _q5_pack(q):
    qh = 0
    for j in range(16):
        qh |= ((q[j] & 0x10) >> 4) << j
        qh |= ((q[j + 16] & 0x10) >> 4) << (j + 16)
    return struct.pack("<I", qh) + bytes((q[j] & 0xF) | ((q[j + 16] & 0xF) << 4) for j in range(16))


def ref_q5_0(x):
    mx = _absmax(x)
    d = f(mx / f(-16))
    idv = f(f(1) / d) if d else f(0)
    return h16(d) + _q5_pack([min(31, int(f(f(v * idv) + f(16.5)))) for v in x])


def ref_q5_1(x):
    mn, mx = _minmax(x)
    d = f(f(mx - mn) / f(31))
    idv = f(f(1) / d) if d else f(0)
    return h16(d) + h16(mn) + _q5_pack([u8(int(f(f(f(v - mn) * idv) + f(0.5)))) for v in x])


def deref_legacy(b, qtype):
    off = {QT.Q4_0: 2, QT.Q4_1: 4, QT.Q5_0: 6, QT.Q5_1: 8}[qtype]
    d = fh(b, 0)
    m = fh(b, 2) if qtype in (QT.Q4_1, QT.Q5_1) else None
    qh = struct.unpack_from("<I", b, off - 4)[0] if qtype in (QT.Q5_0, QT.Q5_1) else 0
    y = [f(0)] * 32
    for j in range(16):
        x0, x1 = b[off + j] & 0xF, b[off + j] >> 4
        if qtype in (QT.Q5_0, QT.Q5_1):
            x0 |= ((qh >> j) << 4) & 0x10
            x1 |= (qh >> (j + 12)) & 0x10
        if m is None:
            c = 8 if qtype == QT.Q4_0 else 16
            y[j], y[j + 16] = f(f(x0 - c) * d), f(f(x1 - c) * d)
        else:
            y[j], y[j + 16] = f(f(f(x0) * d) + m), f(f(f(x1) * d) + m)
    return y


# ---- K-quant scale searches ------------------------------------------------------------------------------

def make_qkx2_quants(n, nmax, x, weights, rmin, rdelta, nstep, use_mad):
    mn, mx = x[0], x[0]
    sum_w = weights[0]
    sum_x = f(sum_w * x[0])
    for i in range(1, n):
        if x[i] < mn:
            mn = x[i]
        if x[i] > mx:
            mx = x[i]
        sum_w = f(sum_w + weights[i])
        sum_x = f(sum_x + f(weights[i] * x[i]))
    if mn > 0:
        mn = f(0)
    if mx == mn:
        return f(0), f(-mn), [0] * n
    iscale = f(f(nmax) / f(mx - mn))
    scale = f(f(1) / iscale)
    best = f(0)
    L = [0] * n
    for i in range(n):
        L[i] = max(0, min(nmax, nint(f(iscale * f(x[i] - mn)))))
        diff = f(f(f(scale * f(L[i])) + mn) - x[i])
        best = f(best + f(weights[i] * (abs(diff) if use_mad else f(diff * diff))))
    for step in range(nstep + 1):
        iscale = f(f(f(f(rmin) + f(f(rdelta) * f(step))) + f(nmax)) / f(mx - mn))
        sum_l = sum_l2 = sum_xl = f(0)
        Laux = [0] * n
        for i in range(n):
            lv = max(0, min(nmax, nint(f(iscale * f(x[i] - mn)))))
            Laux[i] = lv
            w = weights[i]
            sum_l = f(sum_l + f(w * f(lv)))
            sum_l2 = f(sum_l2 + f(f(w * f(lv)) * f(lv)))
            sum_xl = f(sum_xl + f(f(w * f(lv)) * x[i]))
        D = f(f(sum_w * sum_l2) - f(sum_l * sum_l))
        if D > 0:
            this_scale = f(f(f(sum_w * sum_xl) - f(sum_x * sum_l)) / D)
            this_min = f(f(f(sum_l2 * sum_x) - f(sum_l * sum_xl)) / D)
            if this_min > 0:
                this_min = f(0)
                this_scale = f(sum_xl / sum_l2)
            cur = f(0)
            for i in range(n):
                diff = f(f(f(this_scale * f(Laux[i])) + this_min) - x[i])
                cur = f(cur + f(weights[i] * (abs(diff) if use_mad else f(diff * diff))))
            if cur < best:
                L, best, scale, mn = Laux, cur, this_scale, this_min
    return scale, f(-mn), L


def make_q3_quants(n, nmax, x):
    mx = _absmax(x)
    if abs(mx) < f(1e-15):
        return f(0), [0] * n
    iscale = f(f(-nmax) / mx)
    sumlx = suml2 = f(0)
    L = [0] * n
    for i in range(n):
        L[i] = max(-nmax, min(nmax - 1, nint(f(iscale * x[i]))))
        w = f(x[i] * x[i])
        sumlx = f(sumlx + f(f(w * x[i]) * f(L[i])))
        suml2 = f(suml2 + f(f(w * f(L[i])) * f(L[i])))
    for _ in range(5):
        n_changed = 0
        for i in range(n):
            w = f(x[i] * x[i])
            slx = f(sumlx - f(f(w * x[i]) * f(L[i])))
            if slx > 0:
                sl2 = f(suml2 - f(f(w * f(L[i])) * f(L[i])))
                new_l = max(-nmax, min(nmax - 1, nint(f(f(x[i] * sl2) / slx))))
                if new_l != L[i]:
                    slx = f(slx + f(f(w * x[i]) * f(new_l)))
                    sl2 = f(sl2 + f(f(w * f(new_l)) * f(new_l)))
                    if sl2 > 0 and f(f(slx * slx) * suml2) > f(f(sumlx * sumlx) * sl2):
                        L[i], sumlx, suml2 = new_l, slx, sl2
                        n_changed += 1
        if not n_changed:
            break
    return f(sumlx / suml2), [v + nmax for v in L]


def make_qx_quants_1(n, nmax, x):
    """make_qx_quants(n, nmax, x, L, rmse_type = 1, qw = NULL)"""
    mx = _absmax(x)
    if abs(mx) < f(1e-15):
        return f(0), [0] * n

    def sums(iscale):
        slx = sl2 = f(0)
        ls = []
        for v in x:
            lv = max(-nmax, min(nmax - 1, nint(f(iscale * v))))
            ls.append(lv)
            w = f(v * v)
            slx = f(slx + f(f(w * v) * f(lv)))
            sl2 = f(sl2 + f(f(w * f(lv)) * f(lv)))
        return ls, slx, sl2

    ls, sumlx, suml2 = sums(f(f(-nmax) / mx))
    L = [v + nmax for v in ls]
    scale = f(sumlx / suml2) if suml2 else f(0)
    best = f(scale * sumlx)
    for step in range(-9, 10):
        if step == 0:
            continue
        ls, sumlx, suml2 = sums(f(f(-f(f(nmax) + f(f(0.1) * f(step)))) / mx))
        if suml2 > 0 and f(sumlx * sumlx) > f(best * suml2):
            L = [v + nmax for v in ls]
            scale = f(sumlx / suml2)
            best = f(scale * sumlx)
    return scale, L


def _pack2(L):
    return bytes(L[j + l] | (L[j + l + 32] << 2) | (L[j + l + 64] << 4) | (L[j + l + 96] << 6)
                 for j in (0, 128) for l in range(32))


def get_scale_min_k4(j, q):
    if j < 4:
        return q[j] & 63, q[j + 4] & 63
    return (q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4), (q[j + 4] >> 4) | ((q[j] >> 6) << 4)


# ---- K-quant rows (one super-block of 256) ---------------------------------------------------------------

def ref_q2_K(x):
    L, scales, mins = [0] * 256, [f(0)] * 16, [f(0)] * 16
    max_scale = max_min = f(0)
    for j in range(16):
        xs = x[16 * j:16 * j + 16]
        scales[j], mins[j], L[16 * j:16 * j + 16] = make_qkx2_quants(16, 3, xs, [abs(v) for v in xs], -0.5, 0.1, 15,
                                                                      True)
        max_scale = scales[j] if scales[j] > max_scale else max_scale
        max_min = mins[j] if mins[j] > max_min else max_min
    sc = [0] * 16
    if max_scale > 0:
        iscale = f(f(15) / max_scale)
        sc = [u8(nint(f(iscale * s))) for s in scales]
        d = h16(f(max_scale / f(15)))
    else:
        d = h16(0)
    if max_min > 0:
        iscale = f(f(15) / max_min)
        sc = [u8(sc[j] | (nint(f(iscale * mins[j])) << 4)) for j in range(16)]
        dmin = h16(f(max_min / f(15)))
    else:
        dmin = h16(0)
    for j in range(16):
        dd = f(fh(d, 0) * f(sc[j] & 0xF))
        if not dd:
            continue
        dm = f(fh(dmin, 0) * f(sc[j] >> 4))
        for ii in range(16):
            L[16 * j + ii] = max(0, min(3, nint(f(f(x[16 * j + ii] + dm) / dd))))
    return bytes(sc) + _pack2(L) + d + dmin


def ref_q3_K(x):
    L, scales = [0] * 256, [f(0)] * 16
    amax = max_scale = f(0)
    for j in range(16):
        scales[j], L[16 * j:16 * j + 16] = make_q3_quants(16, 4, x[16 * j:16 * j + 16])
        if abs(scales[j]) > amax:
            amax, max_scale = abs(scales[j]), scales[j]
    s = [0] * 12
    if max_scale:
        iscale = f(f(-32) / max_scale)
        for j in range(16):
            lv = max(-32, min(31, i8(nint(f(iscale * scales[j]))))) + 32
            if j < 8:
                s[j] = lv & 0xF
            else:
                s[j - 8] |= (lv & 0xF) << 4
            s[j % 4 + 8] |= (lv >> 4) << (2 * (j // 4))
        d = h16(f(f(1) / iscale))
    else:
        d = h16(0)
    for j in range(16):
        sc = s[j] & 0xF if j < 8 else s[j - 8] >> 4
        sc = (sc | (((s[8 + j % 4] >> (2 * (j // 4))) & 3) << 4)) - 32
        dd = f(fh(d, 0) * f(sc))
        if not dd:
            continue
        for ii in range(16):
            L[16 * j + ii] = max(-4, min(3, nint(f(x[16 * j + ii] / dd)))) + 4
    hmask = [0] * 32
    for j in range(256):
        if L[j] > 3:
            hmask[j % 32] |= 1 << (j // 32)
            L[j] -= 4
    return bytes(hmask) + _pack2(L) + bytes(s) + d


def _ref_q45_K(x, nmax, rmin, nstep):
    L, scales, mins = [0] * 256, [f(0)] * 8, [f(0)] * 8
    max_scale = max_min = f(0)
    for j in range(8):
        xs = x[32 * j:32 * j + 32]
        sum_x2 = f(0)
        for v in xs:
            sum_x2 = f(sum_x2 + f(v * v))
        av_x = f(np.sqrt(f(sum_x2 / f(32))))
        w = [f(av_x + abs(v)) for v in xs]
        scales[j], mins[j], L[32 * j:32 * j + 32] = make_qkx2_quants(32, nmax, xs, w, rmin, 0.1, nstep, False)
        max_scale = scales[j] if scales[j] > max_scale else max_scale
        max_min = mins[j] if mins[j] > max_min else max_min
    inv_scale = f(f(63) / max_scale) if max_scale > 0 else f(0)
    inv_min = f(f(63) / max_min) if max_min > 0 else f(0)
    s = [0] * 12
    for j in range(8):
        ls = min(63, u8(nint(f(inv_scale * scales[j]))))
        lm = min(63, u8(nint(f(inv_min * mins[j]))))
        if j < 4:
            s[j], s[j + 4] = ls, lm
        else:
            s[j + 4] = (ls & 0xF) | ((lm & 0xF) << 4)
            s[j - 4] |= (ls >> 4) << 6
            s[j] |= (lm >> 4) << 6
    d, dmin = h16(f(max_scale / f(63))), h16(f(max_min / f(63)))
    for j in range(8):
        sc, m = get_scale_min_k4(j, s)
        dd = f(fh(d, 0) * f(sc))
        if not dd:
            continue
        dm = f(fh(dmin, 0) * f(m))
        for ii in range(32):
            L[32 * j + ii] = max(0, min(nmax, nint(f(f(x[32 * j + ii] + dm) / dd))))
    return d + dmin + bytes(s), L


def ref_q4_K(x):
    head, L = _ref_q45_K(x, 15, -1.0, 20)
    return head + bytes(L[j + l] | (L[j + l + 32] << 4) for j in range(0, 256, 64) for l in range(32))


def ref_q5_K(x):
    head, L = _ref_q45_K(x, 31, -0.5, 15)
    qh, ql = [0] * 32, [0] * 128
    m1, m2 = 1, 2
    for c, n in enumerate(range(0, 256, 64)):
        for j in range(32):
            l1, l2 = L[n + j], L[n + j + 32]
            if l1 > 15:
                l1 -= 16
                qh[j] |= m1
            if l2 > 15:
                l2 -= 16
                qh[j] |= m2
            ql[32 * c + j] = l1 | (l2 << 4)
        m1, m2 = m1 << 2, m2 << 2
    return head + bytes(qh) + bytes(ql)


def ref_q6_K(x):
    L, scales = [0] * 256, [f(0)] * 16
    max_scale = max_abs = f(0)
    for ib in range(16):
        scales[ib], L[16 * ib:16 * ib + 16] = make_qx_quants_1(16, 32, x[16 * ib:16 * ib + 16])
        if abs(scales[ib]) > max_abs:
            max_abs, max_scale = abs(scales[ib]), scales[ib]
    if max_abs < f(1e-15):
        return bytes(210)
    iscale = f(f(-128) / max_scale)
    d = h16(f(f(1) / iscale))
    sc = [i8(min(127, nint(f(iscale * s)))) for s in scales]
    for j in range(16):
        dd = f(fh(d, 0) * f(sc[j]))
        if not dd:
            continue
        for ii in range(16):
            L[16 * j + ii] = max(-32, min(31, nint(f(x[16 * j + ii] / dd)))) + 32
    ql, qh = [0] * 128, [0] * 64
    for c, j in enumerate((0, 128)):
        for l in range(32):
            q1, q2, q3, q4 = (L[j + l + 32 * k] for k in range(4))
            ql[64 * c + l] = (q1 & 0xF) | ((q3 & 0xF) << 4)
            ql[64 * c + l + 32] = (q2 & 0xF) | ((q4 & 0xF) << 4)
            qh[32 * c + l] = (q1 >> 4) | ((q2 >> 4) << 2) | ((q3 >> 4) << 4) | ((q4 >> 4) << 6)
    return bytes(ql) + bytes(qh) + np.array(sc, np.int8).tobytes() + d


def ref_q8_K(x):
    mx, amax = f(0), f(0)
    for v in x:
        if abs(v) > amax:
            amax, mx = abs(v), v
    if not amax:
        return bytes(292)
    iscale = f(f(-127) / mx)
    q = [min(127, nint(f(iscale * v))) for v in x]
    bsums = [sum(q[16 * j:16 * j + 16]) for j in range(16)]
    return f(f(1) / iscale).tobytes() + np.array(q, np.int8).tobytes() + np.array(bsums, "<i2").tobytes()


def deref_K(b, qtype):
    y = []
    if qtype == QT.Q2_K:
        d, dmin = fh(b, 80), fh(b, 82)
        for n in (0, 1):
            q = b[16 + 32 * n:48 + 32 * n]
            for j in range(4):
                for half in (0, 1):
                    sc = b[8 * n + 2 * j + half]
                    dl, ml = f(d * f(sc & 0xF)), f(dmin * f(sc >> 4))
                    y += [f(f(dl * f((q[l + 16 * half] >> (2 * j)) & 3)) - ml) for l in range(16)]
    elif qtype == QT.Q3_K:
        d = fh(b, 108)
        s = b[96:108]
        sc = [((s[j] & 0xF if j < 8 else s[j - 8] >> 4) | (((s[8 + j % 4] >> (2 * (j // 4))) & 3) << 4)) - 32
              for j in range(16)]
        m = 0
        for n in (0, 1):
            q = b[32 + 32 * n:64 + 32 * n]
            for j in range(4):
                for half in (0, 1):
                    dl = f(d * f(sc[8 * n + 2 * j + half]))
                    for l in range(16 * half, 16 * half + 16):
                        y.append(f(dl * f(((q[l] >> (2 * j)) & 3) - (0 if b[l] & (1 << m) else 4))))
                m += 1
    elif qtype in (QT.Q4_K, QT.Q5_K):
        d, dmin = fh(b, 0), fh(b, 2)
        ql = b[16:144] if qtype == QT.Q4_K else b[48:176]
        for c in range(4):
            for half in (0, 1):
                sc, m = get_scale_min_k4(2 * c + half, b[4:16])
                d1, m1 = f(d * f(sc)), f(dmin * f(m))
                for l in range(32):
                    q = (ql[32 * c + l] >> (4 * half)) & 0xF
                    if qtype == QT.Q5_K and b[16 + l] & (1 << (2 * c + half)):
                        q += 16
                    y.append(f(f(d1 * f(q)) - m1))
    elif qtype == QT.Q6_K:
        d = fh(b, 208)
        sc = np.frombuffer(b, np.int8, 16, 192)
        out = [f(0)] * 256
        for n in (0, 1):
            ql, qh = b[64 * n:64 * n + 64], b[128 + 32 * n:160 + 32 * n]
            for l in range(32):
                vals = [(ql[l] & 0xF) | (((qh[l] >> 0) & 3) << 4), (ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4),
                        (ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4), (ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)]
                for k in range(4):
                    out[128 * n + 32 * k + l] = f(f(d * f(sc[8 * n + l // 16 + 2 * k])) * f(vals[k] - 32))
        y = out
    elif qtype == QT.Q8_K:
        d = f(np.frombuffer(b, "<f4", 1, 0)[0])
        y = [f(d * f(v)) for v in np.frombuffer(b, np.int8, 256, 4)]
    return y


SCALAR_QUANT = {QT.Q4_0: ref_q4_0, QT.Q4_1: ref_q4_1, QT.Q5_0: ref_q5_0, QT.Q5_1: ref_q5_1, QT.Q2_K: ref_q2_K,
                QT.Q3_K: ref_q3_K, QT.Q4_K: ref_q4_K, QT.Q5_K: ref_q5_K, QT.Q6_K: ref_q6_K, QT.Q8_K: ref_q8_K}


def special_blocks(n: int, rng) -> np.ndarray:
    """Blocks of n weights that hit every branch: zero, constant, one spike, all positive, all negative, tiny,
    exact ties, huge range, mixed sub-block magnitudes; [m, n] float32."""
    g = rng.standard_normal(n).astype(np.float32)
    sub = 16 if n == 256 else 8
    mixed = g * np.repeat(rng.choice([0.0, 1e-4, 1e-2, 1.0, 30.0], n // sub), sub).astype(np.float32)
    spike = np.zeros(n, np.float32)
    spike[n // 3] = -2.5
    sub_const = g.copy()
    sub_const[:32] = -0.75                             # constant negative sub-blocks
    sub_const[32:64] = 0.0                             # zero sub-blocks inside a non-zero super-block
    sub_const[64:80] = 1.25
    return np.stack([
        np.zeros(n, np.float32), np.full(n, -1.5, np.float32), np.full(n, 2.0, np.float32), spike,
        np.abs(g) + 0.5, -np.abs(g) - 0.25, (g * 1e-20).astype(np.float32), (g * 1e-7).astype(np.float32),
        (np.round(g * 4) / 2).astype(np.float32), (g * np.float32(3e4)).astype(np.float32), mixed, sub_const,
        (g ** 3).astype(np.float32),
    ])


@pytest.mark.parametrize("qtype", LEGACY_TYPES + K_TYPES, ids=lambda t: t.name)
def test_quantize_matches_scalar_ref(qtype):
    block, size = GGML_QUANT_SIZES[qtype]
    rng = np.random.default_rng(1000 + int(qtype))
    x = np.concatenate([special_blocks(block, rng),
                        rng.standard_normal((3 if block == 256 else 40, block)).astype(np.float32)])
    got = quantize(x, qtype)
    assert got.shape == (x.shape[0], size)
    ref = SCALAR_QUANT[qtype]
    for i in range(x.shape[0]):
        with np.errstate(over="ignore", invalid="ignore", divide="ignore"):   # inf/NaN as in C (3e4-scaled block)
            want = ref(list(x[i]))
        assert got[i].tobytes() == want, f"{qtype.name}: block {i} differs from the scalar transcription"


def _random_blocks(qtype, nb, rng) -> np.ndarray:
    """Random bytes with finite f16 / f32 scale fields."""
    block, size = GGML_QUANT_SIZES[qtype]
    b = rng.integers(0, 256, (nb, size), dtype=np.uint8)
    halves = {QT.Q4_0: [0], QT.Q4_1: [0, 2], QT.Q5_0: [0], QT.Q5_1: [0, 2], QT.Q2_K: [80, 82], QT.Q3_K: [108],
              QT.Q4_K: [0, 2], QT.Q5_K: [0, 2], QT.Q6_K: [208]}.get(qtype, [])
    for off in halves:
        b[:, off:off + 2] = (rng.standard_normal(nb) * 0.05).astype("<f2").view(np.uint8).reshape(nb, 2)
    if qtype == QT.Q8_K:
        b[:, 0:4] = (rng.standard_normal(nb) * 0.01).astype("<f4").view(np.uint8).reshape(nb, 4)
    return b


@pytest.mark.parametrize("qtype", LEGACY_TYPES + K_TYPES, ids=lambda t: t.name)
def test_dequantize_matches_scalar_ref(qtype):
    rng = np.random.default_rng(2000 + int(qtype))
    b = _random_blocks(qtype, 6 if qtype in K_TYPES else 64, rng)
    y = dequantize(b, qtype)
    for i in range(b.shape[0]):
        raw = b[i].tobytes()
        want = np.array(deref_K(raw, qtype) if qtype in K_TYPES else deref_legacy(raw, qtype), np.float32)
        assert np.array_equal(y[i].view(np.uint32), want.view(np.uint32)), f"{qtype.name}: block {i}"


# RMSE / std of N(0, 1) data after a round trip (measured about 0.91 of these)
RMSE_BOUND = {QT.Q4_0: 0.094, QT.Q4_1: 0.086, QT.Q5_0: 0.047, QT.Q5_1: 0.042, QT.Q8_0: 0.0059, QT.Q8_1: 0.0059,
              QT.Q2_K: 0.325, QT.Q3_K: 0.166, QT.Q4_K: 0.078, QT.Q5_K: 0.04, QT.Q6_K: 0.0195, QT.Q8_K: 0.0077}


@pytest.mark.parametrize("qtype", BLOCK_TYPES, ids=lambda t: t.name)
def test_round_trip_error(qtype):
    block, size = GGML_QUANT_SIZES[qtype]
    rng = np.random.default_rng(3000 + int(qtype))
    n = 2 * 256
    x = (rng.standard_normal((37, n)) * 0.02).astype(np.float32)    # odd row count
    x[5] = 0                                                        # all-zero row
    x[11] *= 1000                                                   # a loud row
    b = quantize(x, qtype)
    assert b.shape == (37, n // block * size) and b.dtype == np.uint8
    y = dequantize(b, qtype)
    assert y.shape == x.shape and y.dtype == np.float32
    assert np.all(y[5] == 0)
    rows = [r for r in range(37) if r != 5]
    rel = np.sqrt(np.mean((y[rows] - x[rows]) ** 2, axis=1)) / np.sqrt(np.mean(x[rows] ** 2, axis=1))
    assert rel.max() < RMSE_BOUND[qtype] * 1.25, rel.max()          # per row
    err = np.sqrt(np.mean((y[rows] - x[rows]) ** 2 / np.mean(x[rows] ** 2, axis=1, keepdims=True)))
    assert err < RMSE_BOUND[qtype], err
    # quantizing is a function of each row alone: a row quantizes the same on its own
    assert np.array_equal(quantize(x[11:12], qtype)[0], b[11])
    # 3-D input keeps its leading shape
    b3 = quantize(x[:36].reshape(4, 9, n), qtype)
    assert b3.shape == (4, 9, n // block * size) and np.array_equal(b3.reshape(36, -1), b[:36])
    assert dequantize(b3, qtype).shape == (4, 9, n)


@pytest.mark.parametrize("qtype", BLOCK_TYPES, ids=lambda t: t.name)
def test_zero_and_bad_lengths(qtype):
    block, size = GGML_QUANT_SIZES[qtype]
    b = quantize(np.zeros((3, block), np.float32), qtype)
    assert np.all(dequantize(b, qtype) == 0)
    with pytest.raises(ValueError, match=f"not a multiple of {block}"):
        quantize(np.zeros((2, block + 16), np.float32), qtype)
    with pytest.raises(ValueError):
        dequantize(np.zeros((2, size + 1), np.uint8), qtype)


def test_block_sizes_match_ggml_structs():
    want = {QT.Q4_0: (32, 18), QT.Q4_1: (32, 20), QT.Q5_0: (32, 22), QT.Q5_1: (32, 24), QT.Q8_0: (32, 34),
            QT.Q8_1: (32, 36), QT.Q2_K: (256, 84), QT.Q3_K: (256, 110), QT.Q4_K: (256, 144), QT.Q5_K: (256, 176),
            QT.Q6_K: (256, 210), QT.Q8_K: (256, 292)}
    for t, v in want.items():
        assert GGML_QUANT_SIZES[t] == v, t.name
    assert [int(t) for t in want] == [2, 3, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15]


def test_q8_K_fields():
    rng = np.random.default_rng(7)
    x = rng.standard_normal((5, 512)).astype(np.float32)
    b = quantize(x, QT.Q8_K).reshape(-1, 292)
    q = b[:, 4:260].view(np.int8).astype(np.int32)
    assert np.array_equal(b[:, 260:].copy().view("<i2"), q.reshape(-1, 16, 16).sum(axis=2))
    assert q.min() >= -128 and q.max() <= 127 and np.all(np.abs(q).max(axis=1) == 127)


def test_reader_writer_block_types(tmp_path):
    """Every block type goes through the writer (sized from GGML_QUANT_SIZES) and the reader (accepted, viewed
    as rows of block bytes, tensor_f32 dequantizes)."""
    rng = np.random.default_rng(11)
    x = rng.standard_normal((3, 512)).astype(np.float32)
    w = GGUFWriter(str(tmp_path / "q.gguf"))
    w.add_string("general.architecture", "llama")
    for t in BLOCK_TYPES:
        w.add_tensor(f"t.{t.name}", quantize(x, t), t, shape=x.shape)
    w.write()
    r = GGUFReader(str(tmp_path / "q.gguf"))
    for t in BLOCK_TYPES:
        rt = r.tensor(f"t.{t.name}")
        block, size = GGML_QUANT_SIZES[t]
        assert rt.type == t and rt.ne == [512, 3] and rt.data.shape == (3, 512 // block * size)
        assert np.array_equal(r.tensor_f32(f"t.{t.name}"), dequantize(quantize(x, t), t))
    with pytest.raises(ValueError, match="needs"):
        GGUFWriter(str(tmp_path / "bad.gguf")).add_tensor("t", quantize(x, QT.Q4_K)[:, :-1], QT.Q4_K, shape=x.shape)


@pytest.mark.parametrize("t", [4, 5, 16, 99])
def test_reader_rejects_unknown_types(tmp_path, t):
    name = b"t"
    data = (struct.pack("<IIQQ", 0x46554747, 3, 1, 0) + struct.pack("<Q", len(name)) + name
            + struct.pack("<I", 1) + struct.pack("<Q", 256) + struct.pack("<IQ", t, 0))
    data += b"\0" * ((-len(data)) % 32) + b"\0" * 4096
    p = tmp_path / "t.gguf"
    p.write_bytes(data)
    with pytest.raises(ValueError, match=f"unsupported ggml type {t}"):
        GGUFReader(str(p))
