#!/usr/bin/env python3
"""Float64 numpy reference logits for a GGUF Llama (see gguf/reference.py).

    reference_forward.py model.gguf --tokens 1,2,3 --out logits.npy      # float64 [n_tokens, n_vocab]
    reference_forward.py model.gguf --tokens 1,2,3 --out-bin logits.f32  # raw float32, row-major
    reference_forward.py model.gguf --tokens 1 --generate 30             # greedy ids + SPM-decoded text
"""
import argparse
import os
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from gguf.reference import LlamaReference  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("model")
    ap.add_argument("--tokens", required=True, help="comma-separated token ids, e.g. 1,2,3")
    ap.add_argument("--out", help="write logits as .npy (float64 [n_tokens, n_vocab])")
    ap.add_argument("--out-bin", help="write logits as raw float32 [n_tokens, n_vocab] row-major")
    ap.add_argument("--generate", type=int, default=0, help="greedy-decode this many tokens and print them")
    args = ap.parse_args()
    try:
        tokens = [int(t) for t in args.tokens.split(",") if t.strip()]
    except ValueError:
        sys.exit(f"error: --tokens '{args.tokens}' is not a comma-separated list of integers")
    try:
        m = LlamaReference(args.model)
        if args.generate:
            ids = m.generate_greedy(tokens, args.generate)
            print(",".join(map(str, ids)))
            print(m.detokenize(ids))
        if args.out or args.out_bin or not args.generate:
            logits = m.forward(tokens)
            if args.out:
                np.save(args.out, logits)
            if args.out_bin:
                logits.astype("<f4").tofile(args.out_bin)
            if not args.out and not args.out_bin:
                print("argmax per position:", ",".join(str(int(i)) for i in logits.argmax(axis=1)))
    except (ValueError, OSError, KeyError) as e:
        sys.exit(f"error: {e}")


if __name__ == "__main__":
    main()
