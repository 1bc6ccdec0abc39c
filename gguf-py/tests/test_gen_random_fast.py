"""gen_random_llama.py --fast: pool-sliced random weights (f16 / q8_0 written directly)."""
import os
import subprocess
import sys

import numpy as np
import pytest

from gguf import GGMLQuantizationType as QT
from gguf import GGUFReader
from gguf.quants import quantize

import gen_random_llama as gen

SCRIPT = os.path.join(os.path.dirname(__file__), "..", "scripts", "gen_random_llama.py")
# n_vocab * n_embd = 3000 * 128 > SEGMENT_ELEMENTS: token_embd is written as several pool slices;
# n_ff 200 is no multiple of 32, so with q8_0 ffn_down falls back to f16 (a second pool)
TINY = ["--custom", "--n-embd", "128", "--n-ff", "200", "--n-layer", "2", "--n-head", "4", "--n-head-kv", "2",
        "--n-vocab", "3000", "--fast"]


def run(out, outtype, seed):
    r = subprocess.run([sys.executable, SCRIPT, *TINY, "--outtype", outtype, "--seed", str(seed), "--out", out],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    return GGUFReader(out)


def read(path):
    with open(path, "rb") as f:
        return f.read()


@pytest.mark.parametrize("outtype,mat_type", [("f16", QT.F16), ("q8_0", QT.Q8_0)])
def test_fast_model(tmp_path, outtype, mat_type):
    a, b, c = (str(tmp_path / f"{n}.gguf") for n in "abc")
    g = run(a, outtype, 5)
    assert len(g.tensors) == 1 + 1 + 1 + 2 * 9            # token_embd, output_norm, output, 9 per layer
    assert g.tensor("token_embd.weight").ne == [128, 3000] and g.tensor("token_embd.weight").type == mat_type
    assert g.tensor("blk.1.attn_k.weight").ne == [128, 64] and g.tensor("blk.1.attn_k.weight").type == mat_type
    assert g.tensor("blk.0.ffn_down.weight").ne == [200, 128] and g.tensor("blk.0.ffn_down.weight").type == QT.F16
    assert g.tensor("blk.0.ffn_up.weight").ne == [128, 200] and g.tensor("blk.0.ffn_up.weight").type == mat_type
    assert g.tensor("blk.0.attn_norm.weight").type == QT.F32 and g.tensor("output_norm.weight").ne == [128]
    for name in ("token_embd.weight", "output.weight", "blk.0.ffn_down.weight", "blk.1.attn_q.weight"):
        w = g.tensor_f32(name)
        assert np.all(np.isfinite(w)) and abs(w.std() - 0.02) < 0.002 and abs(w.mean()) < 0.002, name
    norms = np.concatenate([t.data for t in g.tensors if t.name.endswith("_norm.weight")])
    assert abs(norms.mean() - 1) < 0.005 and 0.015 < norms.std() < 0.025
    # the segments of one tensor are different slices (not one slice repeated)
    emb = g.tensor_f32("token_embd.weight").reshape(-1)
    seg = gen.SEGMENT_ELEMENTS
    assert emb.size > seg + 100000 and not np.array_equal(emb[:100000], emb[seg:seg + 100000])
    # same seed -> same bytes; other seed -> other weights
    run(b, outtype, 5)
    assert read(a) == read(b)
    g3 = run(c, outtype, 6)
    assert not np.array_equal(g3.tensor("blk.1.attn_q.weight").data, g.tensor("blk.1.attn_q.weight").data)
    assert not np.array_equal(g3.tensor("blk.1.attn_norm.weight").data, g.tensor("blk.1.attn_norm.weight").data)


def test_fast_q8_0_blocks_are_whole_pool_blocks(tmp_path):
    """Every q8_0 block written is one block of the quantized pool: slices start on 34-byte block boundaries."""
    g = run(str(tmp_path / "q.gguf"), "q8_0", 9)
    pool = gen.random_pool(QT.Q8_0, 9, False)                # [n_blocks, 34]
    known = {bytes(r) for r in pool}
    for name in ("token_embd.weight", "blk.0.attn_q.weight", "output.weight"):
        blocks = g.tensor(name).data.reshape(-1, 34)
        assert all(bytes(r) in known for r in blocks), name


def test_random_pool_matches_quantize():
    x = np.random.default_rng([3, gen.POOL_SEED_TAG, 0]).standard_normal(gen.POOL_ELEMENTS, dtype=np.float32)
    x *= np.float32(0.02)
    q = gen.random_pool(QT.Q8_0, 3, False)
    assert q.shape == (gen.POOL_ELEMENTS // 32, 34)
    assert np.array_equal(q[:4096].reshape(-1), quantize(x[:4096 * 32], QT.Q8_0))   # bit-exact ggml q8_0
    h = gen.random_pool(QT.F16, 3, False)
    assert h.dtype == np.float16 and np.array_equal(h, x.astype(np.float16))
    n = gen.random_pool(QT.F32, 3, True)
    assert abs(n.mean() - 1) < 0.001 and abs(n.std() - 0.02) < 0.001


@pytest.mark.parametrize("qtype,unit_bytes", [(QT.F16, 2), (QT.Q8_0, 34)])
def test_fast_chunks_are_pool_views(qtype, unit_bytes):
    pool = gen.random_pool(qtype, 0, False)
    shape = (7, 3 * gen.SEGMENT_ELEMENTS // 7 // 32 * 32 + 64)            # rows of K % 32 == 0, > 2 segments
    chunks = list(gen.fast_tensor_chunks(shape, qtype, 0, 4, pool))
    assert len(chunks) == 4 and sum(c.nbytes for c in chunks) == shape[0] * shape[1] // (
        32 if qtype == QT.Q8_0 else 1) * unit_bytes
    assert all(np.shares_memory(c, pool) for c in chunks)                      # no copies
    again = list(gen.fast_tensor_chunks(shape, qtype, 0, 4, pool))
    other = list(gen.fast_tensor_chunks(shape, qtype, 0, 5, pool))
    assert all(np.array_equal(x, y) for x, y in zip(chunks, again))
    assert not all(np.array_equal(x, y) for x, y in zip(chunks, other))
