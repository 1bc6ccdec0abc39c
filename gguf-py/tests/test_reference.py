import os
import subprocess
import sys

import numpy as np

from gguf.reference import LlamaReference, rope_normal
from convert_llama2c_to_gguf import convert

SCRIPT = os.path.join(os.path.dirname(__file__), "..", "scripts", "reference_forward.py")
STORY = "Once upon a time, there was a little girl named Lily. She loved to play outside in the park."


def test_stories260k_greedy_story(models):
    m = LlamaReference(os.path.join(models, "stories260K.gguf"))
    ids = m.generate_greedy([1], 40)
    assert m.detokenize(ids).startswith(STORY)


def test_causal_and_batch_consistent(models):
    m = LlamaReference(os.path.join(models, "stories260K.gguf"))
    toks = [1, 403, 407, 261, 378, 432]
    full = m.forward(toks)
    for n in (1, 3):
        assert np.allclose(m.forward(toks[:n]), full[:n], rtol=1e-12, atol=1e-12)


def test_rope_normal_mode_pairs():
    x = np.zeros((1, 1, 6))
    x[0, 0, :] = [1, 0, 1, 0, 5, 7]
    y = rope_normal(x, np.array([3]), 4, 10000.0, None)
    a0, a1 = 3.0, 3.0 * 10000 ** (-2 / 4)
    assert np.allclose(y[0, 0], [np.cos(a0), np.sin(a0), np.cos(a1), np.sin(a1), 5, 7])   # dims >= n_rot untouched
    y2 = rope_normal(x, np.array([3]), 4, 10000.0, np.array([1.0, 4.0]))
    assert np.allclose(y2[0, 0, 2:4], [np.cos(a1 / 4), np.sin(a1 / 4)])


def test_q8_0_logits_close_to_f32(tmp_path, models):
    out = str(tmp_path / "q.gguf")
    convert(os.path.join(models, "stories260K.bin"), os.path.join(models, "tok512.bin"), out, "q8_0")
    toks = [1, 403, 407, 261, 378]
    a = LlamaReference(out).forward(toks)
    b = LlamaReference(os.path.join(models, "stories260K.gguf")).forward(toks)
    nmse = np.mean((a - b) ** 2) / np.mean(b ** 2)
    assert nmse < 1e-3 and (a.argmax(1) == b.argmax(1)).all()


def test_cli_outputs(tmp_path, models):
    npy, raw = str(tmp_path / "l.npy"), str(tmp_path / "l.f32")
    model = os.path.join(models, "stories260K.gguf")
    r = subprocess.run([sys.executable, SCRIPT, model, "--tokens", "1,403,407", "--out", npy, "--out-bin", raw],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    a = np.load(npy)
    b = np.fromfile(raw, dtype="<f4").reshape(3, 512)
    assert a.shape == (3, 512) and np.array_equal(a.astype(np.float32), b)
    r = subprocess.run([sys.executable, SCRIPT, model, "--tokens", "1", "--generate", "12"], capture_output=True,
                       text=True)
    assert r.returncode == 0 and "Once upon a time" in r.stdout
    r = subprocess.run([sys.executable, SCRIPT, model, "--tokens", "1,999"], capture_output=True, text=True)
    assert r.returncode != 0 and r.stderr.startswith("error: ") and "[0, 512)" in r.stderr
