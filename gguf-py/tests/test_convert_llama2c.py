import os
import subprocess
import sys

import numpy as np
import pytest

from gguf import GGMLQuantizationType as QT
from gguf import GGUFReader
from convert_llama2c_to_gguf import convert

SCRIPT = os.path.join(os.path.dirname(__file__), "..", "scripts", "convert_llama2c_to_gguf.py")


def test_stories260k_matches_reference_gguf(tmp_path, models):
    out = str(tmp_path / "s.gguf")
    convert(os.path.join(models, "stories260K.bin"), os.path.join(models, "tok512.bin"), out)
    ours, ref = GGUFReader(out), GGUFReader(os.path.join(models, "stories260K.gguf"))
    assert [t.name for t in ours.tensors] == [t.name for t in ref.tensors]
    for t in ref.tensors:
        o = ours.tensor(t.name)
        assert o.type == QT.F32 and o.ne == t.ne, t.name
        assert o.data.tobytes() == t.data.tobytes(), t.name
    for k in ("tokenizer.ggml.tokens",):
        assert ours.get(k) == ref.get(k)
    assert ours.get("tokenizer.ggml.scores").tobytes() == ref.get("tokenizer.ggml.scores").tobytes()
    assert np.array_equal(ours.get("tokenizer.ggml.token_type"), ref.get("tokenizer.ggml.token_type"))
    for k in ("llama.embedding_length", "llama.feed_forward_length", "llama.block_count", "llama.attention.head_count",
              "llama.attention.head_count_kv", "llama.rope.dimension_count", "tokenizer.ggml.bos_token_id",
              "tokenizer.ggml.eos_token_id", "tokenizer.ggml.unknown_token_id", "general.architecture"):
        assert ours.get(k) == ref.get(k), k
    assert ours.get("llama.attention.layer_norm_rms_epsilon") == ref.get("llama.attention.layer_norm_rms_epsilon")
    assert ours.get("llama.context_length") == 512  # the checkpoint's seq_len (reference file says 2048)


def test_q8_0_and_cli(tmp_path, models):
    out = str(tmp_path / "s.gguf")
    r = subprocess.run([sys.executable, SCRIPT, os.path.join(models, "stories260K.bin"), "--tokenizer",
                        os.path.join(models, "tok512.bin"), "--out", out, "--outtype", "q8_0"],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    g, ref = GGUFReader(out), GGUFReader(os.path.join(models, "stories260K.gguf"))
    assert g.get("general.file_type") == 7
    assert g.tensor("blk.0.attn_q.weight").type == QT.Q8_0
    assert g.tensor("blk.0.ffn_down.weight").type == QT.F16        # 172 columns: not a multiple of 32
    assert g.tensor("blk.0.attn_norm.weight").type == QT.F32
    d = g.tensor_f32("blk.0.attn_q.weight") - ref.tensor("blk.0.attn_q.weight").data
    assert np.abs(d).max() < 0.02


def test_bad_inputs(tmp_path, models):
    bad = tmp_path / "bad.bin"
    bad.write_bytes(np.array([64, 172, 5, 8, 3, 512, 512], np.int32).tobytes())
    with pytest.raises(ValueError, match="bad header"):
        convert(str(bad), os.path.join(models, "tok512.bin"), str(tmp_path / "o.gguf"))
    src = open(os.path.join(models, "stories260K.bin"), "rb").read()
    bad.write_bytes(src[:100000])
    with pytest.raises(ValueError, match="truncated checkpoint"):
        convert(str(bad), os.path.join(models, "tok512.bin"), str(tmp_path / "o.gguf"))
    r = subprocess.run([sys.executable, SCRIPT, str(bad), "--tokenizer", os.path.join(models, "tok512.bin"),
                        "--out", str(tmp_path / "o.gguf")], capture_output=True, text=True)
    assert r.returncode != 0 and r.stderr.startswith("error: ") and "truncated" in r.stderr
    with pytest.raises(ValueError, match="32000 tokens, checkpoint vocab_size is 512"):
        convert(os.path.join(models, "stories260K.bin"),
                os.path.join(models, "llama2-tokenizer", "tokenizer.model"), str(tmp_path / "o.gguf"))
    assert not os.path.exists(tmp_path / "o.gguf")
