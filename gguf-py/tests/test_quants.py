import math
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
