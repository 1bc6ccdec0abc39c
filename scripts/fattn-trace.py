#!/usr/bin/env python3
"""Summarize the decode attention's per-block timeline (ggml/src/cuda/fattn-trace.cuh).

Build with `cmake -DGGML_CUDA_FATTN_TRACE=ON`, run a decode with the lines printed, e.g.
    GGML_CUDA_FATTN_TRACE=1 build/bin/bench -m M -p 0 -n 2 -d 16384 -ngl 99 -fa 1 -r 1 > trace.txt
    python3 scripts/fattn-trace.py trace.txt [--last N]
Lines (one per block, %globaltimer ns):
    FATTN hk split smid last entry wait loop_end_min loop_end_max counted [fenced merged]
Blocks are grouped into launches by their entry stamps (a launch's blocks start within GAP_NS of its first one).
Prints the medians over the last N launches (default 32: one token of a 32-layer model) of each phase, in us from
the launch's first block or as durations.
"""
import argparse
import statistics

GAP_NS = 15000


def launches(lines):
    recs = []
    for line in lines:
        f = line.split()
        if len(f) < 10 or f[0] != "FATTN":
            continue
        try:
            hk, split, sm, last = map(int, f[1:5])
            t = list(map(int, f[5:]))
        except ValueError:
            t = None
        if t is None or last not in (0, 1) or len(t) != (7 if last else 5):
            raise SystemExit(f"fattn-trace: malformed line: {line.strip()}")
        recs.append((hk, split, sm, last, t))
    recs.sort(key=lambda r: r[4][0])
    out, cur = [], []
    for r in recs:
        if cur and r[4][0] - cur[0][4][0] > GAP_NS:
            out.append(cur)
            cur = []
        cur.append(r)
    if cur:
        out.append(cur)
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("trace")
    ap.add_argument("--last", type=int, default=32)
    a = ap.parse_args()
    if a.last < 1:
        raise SystemExit(f"fattn-trace: --last {a.last}: must be 1 or more")
    try:
        with open(a.trace) as f:
            ls = launches(f)
    except OSError as e:
        raise SystemExit(f"fattn-trace: {a.trace}: {e.strerror}")
    if not ls:
        raise SystemExit(f"fattn-trace: {a.trace}: no FATTN lines (built with -DGGML_CUDA_FATTN_TRACE=ON, run with "
                         "GGML_CUDA_FATTN_TRACE=1?)")
    ph = {k: [] for k in ("start", "wait", "loop", "finish", "block end", "merge fence", "merge", "launch end")}
    for ln in ls[-a.last:]:
        t0 = min(r[4][0] for r in ln)
        end = t0
        for _, _, _, last, t in ln:
            entry, wait, lo, hi, counted = t[:5]
            ph["start"].append(entry - t0)
            ph["wait"].append(wait - entry)
            ph["loop"].append(hi - wait)
            ph["finish"].append(counted - hi)
            if last:
                fenced, merged = t[5:]
                ph["merge fence"].append(fenced - counted)
                ph["merge"].append(merged - fenced)
                end = max(end, merged)
            else:
                ph["block end"].append(counted - t0)
        ph["launch end"].append(end - t0)
    n = min(a.last, len(ls))
    print(f"{a.trace}: {len(ls)} launches, the last {n}, {sum(len(l) for l in ls[-n:])} blocks; us, median (max)")
    for k, v in ph.items():
        if v:
            print(f"  {k:12s} {statistics.median(v) / 1000:8.2f} ({max(v) / 1000:.2f})")


if __name__ == "__main__":
    main()
