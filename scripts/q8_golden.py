#!/usr/bin/env python3
"""Golden q8_0 / q8_1 blocks for tests/test_quants.cpp, computed independently with numpy.

Input: x[i] = float32(sin(i*0.37)*3 + (i%7)*0.25) (double math, one rounding), i in 0..63.
Algorithm (ggml's quantize_row_q8_0_ref / _q8_1_ref), in float32 like ggml:
  amax = max|x| per 32-block, d = amax/127, id = 1/d (0 if d == 0), q = roundf(x*id)
  (round half away from zero), block.d = f16(d); q8_1 also block.s = f16(float(sum(q)) * d).
Prints C++ initializers: the input bits (so the test does not depend on libm's sin) and the
expected block bytes (little endian, as stored).
"""
import numpy as np

f32 = np.float32


def roundf(v):  # round half away from zero, exact for float32 inputs (done in float64)
    a = np.abs(v.astype(np.float64))
    return (np.sign(v) * np.floor(a + 0.5)).astype(np.int64)


def quant(x, with_sum):
    out = bytearray()
    for b in range(len(x) // 32):
        xb = x[b * 32:(b + 1) * 32]
        amax = f32(np.max(np.abs(xb)))
        d = f32(amax / f32(127))
        idv = f32(f32(1) / d) if d != 0 else f32(0)
        v = (xb * idv).astype(np.float32)
        q = roundf(v)
        assert np.all(np.abs(q) <= 127)
        out += np.float16(d).tobytes()
        if with_sum:
            s = f32(f32(int(q.sum())) * d)
            out += np.float16(s).tobytes()
        out += q.astype(np.int8).tobytes()
    return bytes(out)


def main():
    i = np.arange(64)
    x = (np.sin(i * 0.37) * 3.0 + (i % 7) * 0.25).astype(np.float32)
    bits = x.view(np.uint32)

    def arr(name, ctype, vals, per_line, fmt):
        print(f"static const {ctype} {name}[{len(vals)}] = {{")
        for k in range(0, len(vals), per_line):
            print("    " + ", ".join(fmt(v) for v in vals[k:k + per_line]) + ",")
        print("};")

    arr("k_golden_x_bits", "uint32_t", list(bits), 8, lambda v: f"0x{int(v):08x}u")
    arr("k_golden_q8_0", "uint8_t", list(quant(x, False)), 17, lambda v: f"0x{v:02x}")
    arr("k_golden_q8_1", "uint8_t", list(quant(x, True)), 18, lambda v: f"0x{v:02x}")


if __name__ == "__main__":
    main()
