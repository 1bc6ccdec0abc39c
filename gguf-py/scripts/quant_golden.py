#!/usr/bin/env python3
"""Golden bytes from the numpy quantizers (gguf/quants.py), for the C++ tests.

    quant_golden.py IN.f32 ROW_LEN OUT_PREFIX TYPE [TYPE ...]

IN.f32 holds float32 rows of ROW_LEN values; for each TYPE (ggml name: q4_0, q4_K, ...) writes
OUT_PREFIX.TYPE.q (the quantized rows) and OUT_PREFIX.TYPE.f32 (their dequantization).
"""
import os
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from gguf.constants import GGMLQuantizationType  # noqa: E402
from gguf.quants import dequantize, quantize  # noqa: E402


def main() -> int:
    if len(sys.argv) < 5:
        print(__doc__, file=sys.stderr)
        return 2
    src, n, prefix = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    x = np.fromfile(src, dtype="<f4").reshape(-1, n)
    for name in sys.argv[4:]:
        qt = GGMLQuantizationType[name.upper()]
        q = quantize(x, qt)
        q.tofile(f"{prefix}.{name}.q")
        dequantize(q, qt).astype("<f4").tofile(f"{prefix}.{name}.f32")
    return 0


if __name__ == "__main__":
    sys.exit(main())
