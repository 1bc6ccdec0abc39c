#!/usr/bin/env bash
# The shared quant vectors' perplexities on the GPU against llama.cpp's (reference.json), run on the device machine
# after scripts/gpu-check.sh built the perplexity tool (EXTRA_TARGETS=perplexity):
#   bash scripts/gpu-ppl.sh [build-gpu] [dir of the vectors: build-deps/models/quant-vectors]
set -uo pipefail
BUILD=${1:-build-gpu}
DIR=${2:-build-deps/models/quant-vectors}
[ -f "$DIR/reference.json" ] || { echo "gpu-ppl: no $DIR/reference.json"; exit 1; }
python3 - "$BUILD/bin/perplexity" "$DIR" <<'PY'
import json, subprocess, sys
tool, d = sys.argv[1], sys.argv[2]
ref = json.load(open(f"{d}/reference.json"))
worst = 0.0
for name, m in ref["model"].items():
    cmd = [tool, "-m", f"{d}/{m['file']}", "-f", f"{d}/{ref['text']}", *ref["ppl_args"].split(), "-ngl", "99"]
    out = subprocess.run(cmd, capture_output=True, text=True)
    key = "Final estimate: PPL = "
    txt = out.stdout + out.stderr
    got = float(txt[txt.rfind(key) + len(key):].split()[0]) if key in txt else float("nan")
    dev = 100.0 * (got / m["ppl"] - 1.0)
    worst = max(worst, abs(dev)) if dev == dev else float("inf")
    print(f"| {name} | {got:.1f} | {m['ppl']:.1f} | {dev:+.2f}% |")
print(f"gpu-ppl: largest deviation {worst:.2f}% ({'within' if worst < 1.0 else 'NOT within'} 1%)")
PY
