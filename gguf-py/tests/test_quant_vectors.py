"""Bit-exactness against llama.cpp: the GGUFs of $LLM_SHARED/models/quant-vectors were quantized from kq-f16.gguf
by llama.cpp's llama-quantize (q8_0 q4_0 q4_1 q5_0 q5_1 q2_K q3_K_M q4_K_M q5_K_M q6_K; the _M mixes and the
q6_K output.weight bring q3_K..q6_K tensors into several files). reference.json holds, per 2-D tensor, the first
16 hex digits of the sha256 of llama.cpp's dequantized float32 data.

- dequantize: every 2-D tensor of every file hashes to reference.json's f32_sha256;
- quantize: kq-f16.gguf's tensors (f16 -> f32), quantized by gguf.quants to the type the tensor has in each
  kq-*.gguf, equal that file's bytes (every block of every tensor; on a mismatch the message gives the blocks
  that differ and the RMSE against llama.cpp's).
Skipped when the vectors are missing.
"""
import hashlib
import json
import os
from collections import defaultdict

import numpy as np
import pytest

from conftest import shared_path
from gguf import GGUFReader
from gguf.constants import GGML_QUANT_SIZES, GGMLQuantizationType as QT
from gguf.quants import dequantize, quantize

VECTORS = shared_path(os.path.join("models", "quant-vectors"))
# every weight type the vectors hold (q8_1 and q8_K are activation types: tests/test_quants.py only)
EXPECTED_TYPES = {QT.Q8_0, QT.Q4_0, QT.Q4_1, QT.Q5_0, QT.Q5_1, QT.Q2_K, QT.Q3_K, QT.Q4_K, QT.Q5_K, QT.Q6_K}


@pytest.fixture(scope="module")
def vectors():
    ref_path = os.path.join(VECTORS, "reference.json")
    if not os.path.isfile(ref_path):
        pytest.skip(f"quant vectors not found at {VECTORS} (set LLM_SHARED)")
    with open(ref_path) as fp:
        ref = json.load(fp)["model"]
    readers = {k: GGUFReader(os.path.join(VECTORS, v["file"])) for k, v in ref.items()}
    return ref, readers


def _sha16(y: np.ndarray) -> str:
    return hashlib.sha256(np.ascontiguousarray(y, dtype="<f4").tobytes()).hexdigest()[:16]


def _quantized_tensors(ref, readers):
    """(file key, tensor) for every 2-D block-type tensor of the quantized files."""
    for k, v in ref.items():
        if "f32_sha256" not in v:
            continue
        for t in readers[k].tensors:
            if len(t.ne) == 2 and t.type in GGML_QUANT_SIZES and GGML_QUANT_SIZES[t.type][0] > 1:
                yield k, t


def test_files_and_types(vectors):
    ref, readers = vectors
    for k, v in ref.items():
        assert os.path.getsize(os.path.join(VECTORS, v["file"])) == v["bytes"], v["file"]
    seen = {t.type for _, t in _quantized_tensors(ref, readers)}
    assert seen == EXPECTED_TYPES, sorted(t.name for t in seen)


def test_dequantize_matches_llama_cpp(vectors):
    ref, readers = vectors
    bad, n, types = [], 0, set()
    for k, v in ref.items():
        for name, want in v.get("f32_sha256", {}).items():
            t = readers[k].tensor(name)
            y = readers[k].tensor_f32(name)
            assert y.shape == t.shape and y.dtype == np.float32
            n += 1
            types.add(t.type)
            if _sha16(y) != want:
                bad.append(f"{v['file']}:{name} ({t.type.name})")
    assert n == 90 and types >= EXPECTED_TYPES
    assert not bad, f"{len(bad)}/{n} dequantized tensors differ from llama.cpp: {bad}"


@pytest.mark.parametrize("qtype", sorted(EXPECTED_TYPES), ids=lambda t: t.name)
def test_quantize_matches_llama_cpp(vectors, qtype):
    ref, readers = vectors
    src = readers["f16"]
    block, size = GGML_QUANT_SIZES[qtype]
    n_tensors, n_blocks, problems = 0, 0, []
    cache = {}
    for k, t in _quantized_tensors(ref, readers):
        if t.type != qtype:
            continue
        x = cache.get(t.name)
        if x is None:
            x = cache[t.name] = src.tensor_f32(t.name)               # f16 -> f32 (exact), as llama-quantize does
        ours = quantize(x, qtype).reshape(-1, size)
        theirs = np.asarray(t.data).reshape(-1, size)
        n_tensors += 1
        n_blocks += ours.shape[0]
        diff = int(np.count_nonzero((ours != theirs).any(axis=1)))
        if diff:
            e_ours = np.sqrt(np.mean((dequantize(ours, qtype).reshape(x.shape) - x) ** 2))
            e_theirs = np.sqrt(np.mean((dequantize(theirs, qtype).reshape(x.shape) - x) ** 2))
            problems.append(f"{ref[k]['file']}:{t.name}: {diff}/{ours.shape[0]} blocks differ, "
                            f"RMSE ours/llama.cpp = {e_ours / e_theirs:.6f}")
    assert n_tensors > 0
    assert not problems, f"{qtype.name}: {len(problems)}/{n_tensors} tensors differ:\n" + "\n".join(problems)


def test_quantize_summary(vectors, capsys):
    """Counts per type (shown with -s): tensors and blocks compared."""
    ref, readers = vectors
    count = defaultdict(lambda: [0, 0])
    for _, t in _quantized_tensors(ref, readers):
        count[t.type][0] += 1
        count[t.type][1] += t.n_bytes // GGML_QUANT_SIZES[t.type][1]
    with capsys.disabled():
        print("\nquant-vectors tensors (blocks) per type: "
              + ", ".join(f"{qt.name} {c[0]} ({c[1]})" for qt, c in sorted(count.items())))
    assert sum(c[0] for c in count.values()) == 90          # 10 quantized files x 9 matrices
