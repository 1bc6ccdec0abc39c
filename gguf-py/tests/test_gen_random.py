import os
import subprocess
import sys

import numpy as np
import pytest

from gguf import GGMLQuantizationType as QT
from gguf import GGUFReader
from gguf.llama import llama3_rope_freqs
from gguf.reference import LlamaReference

SCRIPT = os.path.join(os.path.dirname(__file__), "..", "scripts", "gen_random_llama.py")


def run(*args, env=None):
    return subprocess.run([sys.executable, SCRIPT, *args], capture_output=True, text=True, env=env)


def test_custom_q8_0_tied_rope_freqs(tmp_path):
    out = str(tmp_path / "c.gguf")
    r = run("--custom", "--out", out, "--n-embd", "128", "--n-ff", "200", "--n-layer", "3", "--n-head", "4",
            "--n-head-kv", "2", "--n-vocab", "300", "--theta", "500000", "--tied", "--rope-freqs", "--outtype", "q8_0",
            "--seed", "7")
    assert r.returncode == 0, r.stderr
    g = GGUFReader(out)
    assert g.get("llama.block_count") == 3 and g.get("llama.attention.head_count_kv") == 2
    assert g.get("llama.rope.freq_base") == 500000.0 and g.get("llama.vocab_size") == 300
    assert not g.has_tensor("output.weight") and len(g.tensors) == 1 + 1 + 3 * 9 + 1
    assert g.tensor("rope_freqs.weight").data.tobytes() == llama3_rope_freqs(32, 500000.0).tobytes()
    assert g.tensor("blk.0.attn_q.weight").type == QT.Q8_0
    assert g.tensor("blk.0.ffn_down.weight").type == QT.F16          # 200 columns: f16 fallback
    assert g.tensor("blk.2.ffn_norm.weight").type == QT.F32
    assert len(g.get("tokenizer.ggml.tokens")) == 300 and g.get("tokenizer.ggml.tokens")[3] == "<0x00>"
    wq = g.tensor_f32("blk.1.attn_q.weight")
    assert abs(wq.std() - 0.02) < 0.002 and abs(wq.mean()) < 0.002
    nrm = g.tensor("blk.1.attn_norm.weight").data
    assert abs(nrm.mean() - 1) < 0.01 and 0.01 < nrm.std() < 0.03
    # same seed -> same bytes; other seed -> other weights
    out2, out3 = str(tmp_path / "c2.gguf"), str(tmp_path / "c3.gguf")
    base = ["--custom", "--n-embd", "128", "--n-ff", "200", "--n-layer", "3", "--n-head", "4", "--n-head-kv", "2",
            "--n-vocab", "300", "--theta", "500000", "--tied", "--rope-freqs", "--outtype", "q8_0"]
    assert run(*base, "--seed", "7", "--out", out2).returncode == 0
    assert run(*base, "--seed", "8", "--out", out3).returncode == 0
    assert open(out, "rb").read() == open(out2, "rb").read()
    assert not np.array_equal(GGUFReader(out3).tensor_f32("blk.1.attn_q.weight"), wq)
    # the reference forward runs and activations are sane
    logits = LlamaReference(out).forward([1, 5, 9, 250])
    assert logits.shape == (4, 300) and np.all(np.isfinite(logits)) and np.abs(logits).max() < 100


@pytest.mark.parametrize("vocab,n", [("spm", 32000), ("bpe", 128256)])
def test_real_vocab(tmp_path, models, vocab, n):
    out = str(tmp_path / "v.gguf")
    env = dict(os.environ, LLM_SHARED=os.path.dirname(models))
    r = run("--custom", "--vocab", vocab, "--n-embd", "32", "--n-ff", "64", "--n-layer", "1", "--n-head", "2",
            "--outtype", "f16", "--out", out, env=env)
    assert r.returncode == 0, r.stderr
    g = GGUFReader(out)
    ref = GGUFReader(os.path.join(models, f"ggml-vocab-llama-{vocab}.gguf"))
    assert g.get("tokenizer.ggml.tokens") == ref.get("tokenizer.ggml.tokens")
    assert np.array_equal(g.get("tokenizer.ggml.token_type"), ref.get("tokenizer.ggml.token_type"))
    assert g.tensor("token_embd.weight").ne == [32, n] and g.tensor("output.weight").type == QT.F16
    assert g.get("general.file_type") == 1


def test_preset_shapes_without_writing():
    sys.path.insert(0, os.path.dirname(SCRIPT))
    from gen_random_llama import PRESETS
    from gguf.llama import llama_tensor_shapes
    hp, _ = PRESETS["llama2-7b"]
    n = sum(int(np.prod(s)) for _, s in llama_tensor_shapes(hp))
    assert n == 6738415616                      # Llama 2 7B parameter count
    hp, _ = PRESETS["llama3-8b"]
    assert sum(int(np.prod(s)) for _, s in llama_tensor_shapes(hp)) == 8030261248
    hp, _ = PRESETS["tinyllama-1.1b"]
    assert sum(int(np.prod(s)) for _, s in llama_tensor_shapes(hp)) == 1100048384
    hp, _ = PRESETS["llama2-70b"]
    assert sum(int(np.prod(s)) for _, s in llama_tensor_shapes(hp)) == 68976648192   # Llama 2 70B


def test_bad_flags(tmp_path):
    out = str(tmp_path / "x.gguf")
    r = run("--custom", "--n-embd", "100", "--n-head", "8", "--out", out)
    assert r.returncode != 0 and r.stderr.startswith("error: ") and "n_embd % n_head" in r.stderr
    r = run("--custom", "--vocab", "spm", "--n-vocab", "100", "--n-embd", "32", "--n-head", "2", "--out", out)
    assert r.returncode != 0 and "n_vocab is 100" in r.stderr
    assert not os.path.exists(out) and not os.path.exists(out + ".tmp")
