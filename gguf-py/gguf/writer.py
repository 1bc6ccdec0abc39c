"""GGUF v3 writer: KVs of every type, tensors f32/f16/i32 and every block type (q4_0 .. q8_K), streamed to
"<path>.tmp" then renamed.

    w = GGUFWriter("out.gguf")
    w.add_string("general.architecture", "llama")
    w.add_uint32("llama.block_count", 2)
    w.add_array("tokenizer.ggml.tokens", ["a", "b"])          # element type inferred (or pass etype)
    w.add_tensor("token_embd.weight", np.zeros((32000, 64), np.float32))   # stored ne = [64, 32000]
    w.add_tensor_lazy("big", ne=[4096, 32000], qtype=GGMLQuantizationType.F16, produce=lambda: arr)
    w.write()                                                   # streams each tensor, one at a time

Tensor data handed in must already be in the stored type: float32 / float16 / int32 arrays (numpy order),
or uint8 arrays of quant blocks (see quants.quantize). `produce` may also return an iterable of chunks.
"""
from __future__ import annotations

import os
import struct
from dataclasses import dataclass
from typing import Any, Callable, Iterable

import numpy as np

from .constants import (GGML_PLAIN_DTYPES, GGUF_DEFAULT_ALIGNMENT, GGUF_MAGIC, GGUF_VERSION, KEY_GENERAL_ALIGNMENT,
                        VALUE_DTYPES, GGMLQuantizationType, GGUFValueType, tensor_nbytes)


@dataclass
class _TensorInfo:
    name: str
    ne: list[int]
    qtype: GGMLQuantizationType
    n_bytes: int
    produce: Callable[[], Any]
    offset: int = 0


def _infer_type(v: Any) -> GGUFValueType:
    if isinstance(v, (bool, np.bool_)):
        return GGUFValueType.BOOL
    if isinstance(v, str):
        return GGUFValueType.STRING
    if isinstance(v, (int, np.integer)):
        return GGUFValueType.INT32 if -(1 << 31) <= int(v) < (1 << 31) else GGUFValueType.INT64
    if isinstance(v, (float, np.floating)):
        return GGUFValueType.FLOAT32
    raise ValueError(f"cannot infer a GGUF value type for {type(v).__name__}")


_NP_TO_VTYPE = {np.dtype(v).newbyteorder("<") if np.dtype(v).itemsize > 1 else np.dtype(v): k
                for k, v in VALUE_DTYPES.items() if k != GGUFValueType.BOOL}
_NP_TO_VTYPE[np.dtype(bool)] = GGUFValueType.BOOL


class GGUFWriter:
    def __init__(self, path: str | os.PathLike, arch: str | None = None, alignment: int | None = None):
        self.path = os.fspath(path)
        self.kv: dict[str, tuple[GGUFValueType, Any, GGUFValueType | None]] = {}
        self.tensors: list[_TensorInfo] = []
        self._names: set[str] = set()
        if alignment is not None:
            self.add_uint32(KEY_GENERAL_ALIGNMENT, alignment)
        if arch is not None:
            self.add_string("general.architecture", arch)

    # ---- KVs -------------------------------------------------------------------------------------
    def add_kv(self, key: str, value: Any, vtype: GGUFValueType | None = None,
               etype: GGUFValueType | None = None) -> None:
        """Set (or replace) a key. vtype/etype are inferred when not given."""
        if vtype is None:
            vtype = GGUFValueType.ARRAY if isinstance(value, (list, tuple, np.ndarray)) else _infer_type(value)
        vtype = GGUFValueType(vtype)
        if vtype == GGUFValueType.ARRAY:
            if etype is None:
                if isinstance(value, np.ndarray):
                    etype = _NP_TO_VTYPE.get(value.dtype.newbyteorder("<") if value.dtype.itemsize > 1 else value.dtype)
                    if etype is None:
                        raise ValueError(f"key '{key}': no GGUF array type for numpy dtype {value.dtype}")
                elif len(value) == 0:
                    raise ValueError(f"key '{key}': empty array needs an explicit element type")
                else:
                    etype = _infer_type(value[0])
            etype = GGUFValueType(etype)
            if etype == GGUFValueType.ARRAY:
                raise ValueError(f"key '{key}': nested arrays are not supported")
        if key == KEY_GENERAL_ALIGNMENT:
            if vtype != GGUFValueType.UINT32 or value <= 0 or (value & (value - 1)) != 0:
                raise ValueError(f"'{KEY_GENERAL_ALIGNMENT}' must be a UINT32 power of two, got {value!r}")
        self.kv[key] = (vtype, value, etype)

    def add_uint8(self, k, v): self.add_kv(k, v, GGUFValueType.UINT8)
    def add_int8(self, k, v): self.add_kv(k, v, GGUFValueType.INT8)
    def add_uint16(self, k, v): self.add_kv(k, v, GGUFValueType.UINT16)
    def add_int16(self, k, v): self.add_kv(k, v, GGUFValueType.INT16)
    def add_uint32(self, k, v): self.add_kv(k, v, GGUFValueType.UINT32)
    def add_int32(self, k, v): self.add_kv(k, v, GGUFValueType.INT32)
    def add_float32(self, k, v): self.add_kv(k, v, GGUFValueType.FLOAT32)
    def add_uint64(self, k, v): self.add_kv(k, v, GGUFValueType.UINT64)
    def add_int64(self, k, v): self.add_kv(k, v, GGUFValueType.INT64)
    def add_float64(self, k, v): self.add_kv(k, v, GGUFValueType.FLOAT64)
    def add_bool(self, k, v): self.add_kv(k, bool(v), GGUFValueType.BOOL)
    def add_string(self, k, v): self.add_kv(k, v, GGUFValueType.STRING)

    def add_array(self, k, values, etype: GGUFValueType | None = None):
        self.add_kv(k, values, GGUFValueType.ARRAY, etype)

    @property
    def alignment(self) -> int:
        kv = self.kv.get(KEY_GENERAL_ALIGNMENT)
        return GGUF_DEFAULT_ALIGNMENT if kv is None else int(kv[1])

    # ---- tensors ---------------------------------------------------------------------------------
    def add_tensor_lazy(self, name: str, ne: list[int], qtype: GGMLQuantizationType,
                        produce: Callable[[], Any]) -> None:
        """Register a tensor whose bytes are produced at write time (array or iterable of arrays)."""
        if name in self._names:
            raise ValueError(f"duplicate tensor name '{name}'")
        if not 1 <= len(ne) <= 4:
            raise ValueError(f"tensor '{name}': {len(ne)} dims, expected 1..4")
        qtype = GGMLQuantizationType(qtype)
        self._names.add(name)
        self.tensors.append(_TensorInfo(name, [int(d) for d in ne], qtype, tensor_nbytes(qtype, ne), produce))

    def add_tensor(self, name: str, data: np.ndarray, qtype: GGMLQuantizationType | None = None,
                   shape: tuple[int, ...] | None = None) -> None:
        """Add an in-memory tensor. For quantized data pass qtype and the logical numpy-order shape."""
        if qtype is None:
            for qt, dt in GGML_PLAIN_DTYPES.items():
                if data.dtype == dt:
                    qtype = qt
                    break
            else:
                raise ValueError(f"tensor '{name}': dtype {data.dtype} needs an explicit qtype")
        qtype = GGMLQuantizationType(qtype)
        if shape is None:
            if qtype not in GGML_PLAIN_DTYPES:
                raise ValueError(f"tensor '{name}': quantized data needs its logical shape")
            shape = data.shape
        if len(shape) == 0:
            shape = (1,)
        ne = list(reversed([int(s) for s in shape]))
        nbytes = tensor_nbytes(qtype, ne)
        if data.nbytes != nbytes:
            raise ValueError(f"tensor '{name}': {data.nbytes} bytes given, {qtype.name} {ne} needs {nbytes}")
        self.add_tensor_lazy(name, ne, qtype, lambda d=data: d)

    # ---- serialization -----------------------------------------------------------------------------
    @staticmethod
    def _pack_string(s: str | bytes) -> bytes:
        b = s.encode("utf-8", errors="surrogateescape") if isinstance(s, str) else bytes(s)
        return struct.pack("<Q", len(b)) + b

    def _pack_value(self, key: str, vtype: GGUFValueType, value: Any, etype: GGUFValueType | None) -> bytes:
        if vtype == GGUFValueType.STRING:
            return self._pack_string(value)
        if vtype == GGUFValueType.ARRAY:
            out = [struct.pack("<IQ", int(etype), len(value))]
            if etype == GGUFValueType.STRING:
                out.extend(self._pack_string(s) for s in value)
            else:
                arr = np.asarray(value)
                if etype == GGUFValueType.BOOL:
                    arr = arr.astype(bool)
                out.append(self._checked_cast(key, arr, etype).tobytes())
            return b"".join(out)
        return self._checked_cast(key, np.asarray(value), vtype).tobytes()

    @staticmethod
    def _checked_cast(key: str, arr: np.ndarray, vtype: GGUFValueType) -> np.ndarray:
        dt = VALUE_DTYPES[vtype]
        if dt.kind in "iu" and arr.size:
            if arr.dtype.kind not in "iub":
                raise ValueError(f"key '{key}': {vtype.name} value must be an integer, got {arr.dtype}")
            info = np.iinfo(dt)
            lo, hi = int(arr.min()), int(arr.max())
            if lo < info.min or hi > info.max:
                raise ValueError(f"key '{key}': value out of {vtype.name} range [{info.min}, {info.max}]")
        return arr.astype(dt)

    def _layout(self) -> int:
        off = 0
        for t in self.tensors:
            t.offset = off
            off += t.n_bytes + (-t.n_bytes) % self.alignment
        return off

    def meta_bytes(self) -> bytes:
        """Header + KVs + tensor infos + padding to the data section."""
        self._layout()
        parts = [struct.pack("<IIQQ", GGUF_MAGIC, GGUF_VERSION, len(self.tensors), len(self.kv))]
        for key, (vtype, value, etype) in self.kv.items():
            parts.append(self._pack_string(key))
            parts.append(struct.pack("<I", int(vtype)))
            parts.append(self._pack_value(key, vtype, value, etype))
        for t in self.tensors:
            parts.append(self._pack_string(t.name))
            parts.append(struct.pack("<I", len(t.ne)) + struct.pack(f"<{len(t.ne)}Q", *t.ne))
            parts.append(struct.pack("<IQ", int(t.qtype), t.offset))
        meta = b"".join(parts)
        return meta + b"\0" * ((-len(meta)) % self.alignment)

    def write(self, only_meta: bool = False) -> None:
        """Write everything to <path>.tmp, then rename; on failure the temp file is removed."""
        tmp = self.path + ".tmp"
        try:
            with open(tmp, "wb") as f:
                f.write(self.meta_bytes())
                if not only_meta:
                    for t in self.tensors:
                        self._write_tensor(f, t)
            os.replace(tmp, self.path)
        except BaseException:
            if os.path.exists(tmp):
                os.remove(tmp)
            raise

    def _write_tensor(self, f, t: _TensorInfo) -> None:
        data = t.produce()
        chunks: Iterable = [data] if isinstance(data, (np.ndarray, bytes, bytearray, memoryview)) else data
        written = 0
        for c in chunks:
            if isinstance(c, np.ndarray):
                if t.qtype in GGML_PLAIN_DTYPES and c.dtype != GGML_PLAIN_DTYPES[t.qtype]:
                    raise ValueError(f"tensor '{t.name}': got dtype {c.dtype}, expected {t.qtype.name}")
                c = np.ascontiguousarray(c)
                f.write(memoryview(c).cast("B"))
                written += c.nbytes
            else:
                f.write(c)
                written += len(c)
        if written != t.n_bytes:
            raise ValueError(f"tensor '{t.name}': wrote {written} bytes, expected {t.n_bytes}")
        f.write(b"\0" * ((-written) % self.alignment))
