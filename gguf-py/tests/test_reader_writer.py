import os
import struct

import numpy as np
import pytest

from gguf import GGMLQuantizationType as QT
from gguf import GGUFReader, GGUFValueType as VT, GGUFWriter
from gguf.quants import quantize_q8_0, dequantize_q8_0

ALL_KVS = [
    ("k.u8", 200, VT.UINT8), ("k.i8", -100, VT.INT8), ("k.u16", 60000, VT.UINT16), ("k.i16", -30000, VT.INT16),
    ("k.u32", 4000000000, VT.UINT32), ("k.i32", -2000000000, VT.INT32), ("k.f32", 1.5, VT.FLOAT32),
    ("k.bool", True, VT.BOOL), ("k.str", "héllo ▁world", VT.STRING), ("k.u64", 2**63 + 5, VT.UINT64),
    ("k.i64", -2**62, VT.INT64), ("k.f64", 3.141592653589793, VT.FLOAT64),
]


def _write_all(path, alignment=None):
    rng = np.random.default_rng(0)
    w = GGUFWriter(path, arch="llama", alignment=alignment)
    for k, v, t in ALL_KVS:
        w.add_kv(k, v, t)
    w.add_array("a.str", ["", "a", "ü b", "x" * 300])
    w.add_array("a.i32", np.array([1, -2, 3], np.int32))
    w.add_array("a.f32", [0.5, -1.25])
    w.add_array("a.bool", [True, False, True])
    w.add_array("a.u64", np.array([1, 2**64 - 1], np.uint64))
    w.add_array("a.empty", [], VT.INT8)
    tensors = {
        "t.f32": rng.standard_normal((3, 5, 7)).astype(np.float32),
        "t.f16": rng.standard_normal((7, 9)).astype(np.float16),
        "t.i32": rng.integers(-1000, 1000, 11).astype(np.int32),
    }
    for n, a in tensors.items():
        w.add_tensor(n, a)
    q_src = rng.standard_normal((3, 64)).astype(np.float32)
    w.add_tensor("t.q8", quantize_q8_0(q_src), QT.Q8_0, shape=(3, 64))
    w.write()
    return tensors, q_src


@pytest.mark.parametrize("alignment", [None, 64, 32, 256])
def test_round_trip_all_types(tmp_path, alignment):
    p = str(tmp_path / "x.gguf")
    tensors, q_src = _write_all(p, alignment)
    assert not os.path.exists(p + ".tmp")
    r = GGUFReader(p)
    assert r.version == 3
    assert r.alignment == (alignment or 32)
    assert r.get("general.architecture") == "llama"
    for k, v, t in ALL_KVS:
        f = r.fields[k]
        assert f.type == t, k
        assert f.value == (np.float32(v) if t == VT.FLOAT32 else v), k
    assert r.get("a.str") == ["", "a", "ü b", "x" * 300]
    assert r.fields["a.str"].array_type == VT.STRING
    assert r.get("a.i32").tolist() == [1, -2, 3] and r.fields["a.i32"].array_type == VT.INT32
    assert r.get("a.f32").tolist() == [0.5, -1.25] and r.fields["a.f32"].array_type == VT.FLOAT32
    assert r.get("a.bool").tolist() == [True, False, True] and r.fields["a.bool"].array_type == VT.BOOL
    assert r.get("a.u64").tolist() == [1, 2**64 - 1]
    assert len(r.get("a.empty")) == 0 and r.fields["a.empty"].array_type == VT.INT8
    for n, a in tensors.items():
        t = r.tensor(n)
        assert t.ne == list(reversed(a.shape))
        assert t.data.dtype == a.dtype and np.array_equal(t.data, a)
        assert (r.data_offset + t.offset) % r.alignment == 0
    tq = r.tensor("t.q8")
    assert tq.type == QT.Q8_0 and tq.ne == [64, 3] and tq.data.shape == (3, 68)
    assert np.array_equal(r.tensor_f32("t.q8"), dequantize_q8_0(quantize_q8_0(q_src)))
    assert np.abs(r.tensor_f32("t.q8") - q_src).max() < 0.03


def test_tensor_layout_is_ne_order(tmp_path):
    p = str(tmp_path / "x.gguf")
    w = GGUFWriter(p)
    a = np.arange(6, dtype=np.float32).reshape(2, 3)  # 2 rows of 3
    w.add_tensor("m", a)
    w.write()
    r = GGUFReader(p)
    t = r.tensor("m")
    assert t.ne == [3, 2]
    raw = np.fromfile(p, dtype=np.uint8)[r.data_offset:r.data_offset + 24].view(np.float32)
    assert raw.tolist() == [0, 1, 2, 3, 4, 5]  # row-major, ne0 fastest


def test_writer_rejects_bad_input(tmp_path):
    w = GGUFWriter(str(tmp_path / "x.gguf"))
    with pytest.raises(ValueError, match="needs an explicit qtype"):
        w.add_tensor("a", np.zeros(3, np.float64))
    w.add_tensor("a", np.zeros(3, np.float32))
    with pytest.raises(ValueError, match="duplicate"):
        w.add_tensor("a", np.zeros(3, np.float32))
    with pytest.raises(ValueError, match="block size"):
        w.add_tensor("q", np.zeros(34, np.uint8), QT.Q8_0, shape=(33,))
    with pytest.raises(ValueError, match="power of two"):
        w.add_uint32("general.alignment", 48)
    w.add_uint8("k", 300)
    with pytest.raises(ValueError, match="out of UINT8 range"):
        w.write()
    assert not os.path.exists(str(tmp_path / "x.gguf")) and not os.path.exists(str(tmp_path / "x.gguf.tmp"))


def test_lazy_wrong_size_leaves_nothing(tmp_path):
    p = str(tmp_path / "x.gguf")
    w = GGUFWriter(p)
    w.add_tensor_lazy("a", [4, 2], QT.F32, lambda: [np.zeros(4, np.float32)])
    with pytest.raises(ValueError, match="wrote 16 bytes, expected 32"):
        w.write()
    assert not os.listdir(tmp_path)


def test_lazy_chunks(tmp_path):
    p = str(tmp_path / "x.gguf")
    w = GGUFWriter(p)
    w.add_tensor_lazy("a", [4, 3], QT.F16, lambda: (np.full(4, i, np.float16) for i in range(3)))
    w.add_tensor_lazy("b", [5], QT.F32, lambda: np.ones(5, np.float32))
    w.write()
    r = GGUFReader(p)
    assert r.tensor("a").data.tolist() == [[0] * 4, [1] * 4, [2] * 4]
    assert r.tensor("b").data.tolist() == [1] * 5 and r.tensor("b").offset == 32


# ---- corrupt files: every error is a ValueError naming the problem -------------------------------------
def _header(n_tensors, n_kv, magic=b"GGUF", version=3):
    return magic + struct.pack("<IQQ", version, n_tensors, n_kv)


def _s(s):
    b = s.encode()
    return struct.pack("<Q", len(b)) + b


def _tinfo(name, ne, t, off):
    return _s(name) + struct.pack("<I", len(ne)) + struct.pack(f"<{len(ne)}Q", *ne) + struct.pack("<IQ", t, off)


def _pad(b, a=32):
    return b + b"\0" * ((-len(b)) % a)


CORRUPT = {
    "empty": (b"", "truncated"),
    "bad_magic": (_header(0, 0, magic=b"GGML"), "bad magic"),
    "bad_version": (_header(0, 0, version=7), "unsupported GGUF version 7"),
    "huge_kv_count": (_header(0, 1 << 40), "KV count"),
    "huge_tensor_count": (_header(1 << 40, 0), "tensor count"),
    "truncated_kv": (_header(0, 1) + _s("key"), "truncated"),
    "huge_string": (_header(0, 1) + struct.pack("<Q", 1 << 50), "string length"),
    "bad_value_type": (_header(0, 1) + _s("k") + struct.pack("<I", 99), "unknown value type 99"),
    "huge_array": (_header(0, 1) + _s("k") + struct.pack("<IIQ", 9, 5, 1 << 40), "array length"),
    "nested_array": (_header(0, 1) + _s("k") + struct.pack("<IIQ", 9, 9, 1), "nested arrays"),
    "truncated_array": (_header(0, 1) + _s("k") + struct.pack("<IIQ", 9, 5, 100) + b"\0" * 8, "truncated"),
    "dup_key": (_header(0, 2) + (_s("k") + struct.pack("<IB", 0, 1)) * 2, "duplicate key 'k'"),
    "bad_bool": (_header(0, 1) + _s("k") + struct.pack("<IB", 7, 2), "bool value 2"),
    "bad_alignment": (_header(0, 1) + _s("general.alignment") + struct.pack("<II", 4, 48), "power of two"),
    "alignment_type": (_header(0, 1) + _s("general.alignment") + struct.pack("<Ii", 5, 32), "expected UINT32"),
    "bad_ndims": (_header(1, 0) + _s("t") + struct.pack("<I", 5), "n_dims 5"),
    "bad_ggml_type": (_header(1, 0) + _tinfo("t", [4], 4, 0), "unsupported ggml type 4"),
    "bad_block": (_header(1, 0) + _tinfo("t", [33], 8, 0), "not a multiple of the Q8_0 block size"),
    "misaligned": (_header(1, 0) + _tinfo("t", [4], 0, 4), "not a multiple of the alignment"),
    "overflow_ne": (_header(1, 0) + _tinfo("t", [1 << 40, 1 << 40], 0, 0), "overflows"),
    "data_past_end": (_pad(_header(1, 0) + _tinfo("t", [64], 0, 0)) + b"\0" * 16, "past the end"),
    "dup_tensor": (_pad(_header(2, 0) + _tinfo("t", [4], 0, 0) + _tinfo("t", [4], 0, 32)) + b"\0" * 64,
                   "duplicate tensor name 't'"),
    "overlap": (_pad(_header(2, 0) + _tinfo("a", [16], 0, 0) + _tinfo("b", [4], 0, 32)) + b"\0" * 64, "overlap"),
}


@pytest.mark.parametrize("case", sorted(CORRUPT))
def test_corrupt_files(tmp_path, case):
    data, msg = CORRUPT[case]
    p = tmp_path / f"{case}.gguf"
    p.write_bytes(data)
    with pytest.raises(ValueError, match=msg) as e:
        GGUFReader(str(p))
    assert str(p) in str(e.value)


def test_truncated_real_file(tmp_path, models):
    src = open(os.path.join(models, "stories260K.gguf"), "rb").read()
    for cut in (3, 24, 100, 5000, len(src) - 100):
        p = tmp_path / "cut.gguf"
        p.write_bytes(src[:cut])
        with pytest.raises(ValueError):
            GGUFReader(str(p))


def test_reads_real_files(models):
    r = GGUFReader(os.path.join(models, "stories260K.gguf"))
    assert r.get("llama.block_count") == 5 and len(r.tensors) == 48
    assert r.tensor("blk.0.attn_k.weight").ne == [64, 32]
    r = GGUFReader(os.path.join(models, "llama-2-tiny-random.gguf"))
    assert r.tensor("token_embd.weight").type == QT.F16 and r.tensor("token_embd.weight").data.shape == (32000, 8)
