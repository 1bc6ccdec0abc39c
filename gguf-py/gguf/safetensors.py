"""Minimal safetensors reader/writer with numpy (no safetensors library).

File: uint64 LE header length N, N bytes of JSON {name: {dtype, shape, data_offsets: [begin, end]}, optional
"__metadata__"}, then the raw little-endian data. BF16 is widened to float32 by a 16-bit shift.

    st = SafetensorsFile("model.safetensors"); a = st.get_f32("model.norm.weight")
    write_safetensors("x.safetensors", {"w": np.zeros((2, 3), np.float32)})
"""
from __future__ import annotations

import json
import os
import struct

import numpy as np

_DTYPES = {"F32": np.dtype("<f4"), "F16": np.dtype("<f2"), "BF16": np.dtype("<u2"), "F64": np.dtype("<f8"),
           "I32": np.dtype("<i4"), "I64": np.dtype("<i8"), "I8": np.dtype("i1"), "U8": np.dtype("u1")}


def bf16_to_f32(u16: np.ndarray) -> np.ndarray:
    return (np.asarray(u16, dtype=np.uint32) << 16).view(np.float32)


def f32_to_bf16(x: np.ndarray) -> np.ndarray:
    """Round to nearest even (as torch does); for tests."""
    u = np.asarray(x, dtype=np.float32).view(np.uint32).astype(np.uint64)
    return ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)


class SafetensorsFile:
    def __init__(self, path: str):
        self.path = path
        size = os.path.getsize(path)
        with open(path, "rb") as f:
            head = f.read(8)
            if len(head) < 8:
                raise ValueError(f"{path}: too small for a safetensors header")
            (n,) = struct.unpack("<Q", head)
            if n > size - 8 or n > 100 * 1024 * 1024:
                raise ValueError(f"{path}: header length {n} exceeds the file size {size}")
            try:
                meta = json.loads(f.read(n))
            except (json.JSONDecodeError, UnicodeDecodeError) as e:
                raise ValueError(f"{path}: bad JSON header: {e}") from None
        self._data_start = 8 + n
        self._mm = np.memmap(path, dtype=np.uint8, mode="r") if size > self._data_start else np.zeros(0, np.uint8)
        self.metadata = meta.pop("__metadata__", {})
        self.infos = meta
        data_len = size - self._data_start
        for name, info in meta.items():
            if info.get("dtype") not in _DTYPES:
                raise ValueError(f"{path}: tensor '{name}' has unsupported dtype {info.get('dtype')}")
            b, e = info["data_offsets"]
            n_el = int(np.prod(info["shape"], dtype=np.int64))
            if not (0 <= b <= e <= data_len) or e - b != n_el * _DTYPES[info["dtype"]].itemsize:
                raise ValueError(f"{path}: tensor '{name}' has bad data_offsets {info['data_offsets']} "
                                 f"for {info['dtype']} {info['shape']} (data section {data_len} bytes)")

    def keys(self) -> list[str]:
        return list(self.infos.keys())

    def get(self, name: str) -> np.ndarray:
        """Raw view (BF16 as uint16)."""
        info = self.infos[name]
        b, e = info["data_offsets"]
        return self._mm[self._data_start + b:self._data_start + e].view(_DTYPES[info["dtype"]]).reshape(info["shape"])

    def get_f32(self, name: str) -> np.ndarray:
        a = self.get(name)
        if self.infos[name]["dtype"] == "BF16":
            return bf16_to_f32(a)
        return a.astype(np.float32)


def write_safetensors(path: str, tensors: dict[str, np.ndarray], dtypes: dict[str, str] | None = None) -> None:
    """Write tensors; dtypes[name] = "BF16" stores a float32 array as bf16."""
    dtypes = dtypes or {}
    header, blobs, off = {}, [], 0
    for name, a in tensors.items():
        dt = dtypes.get(name)
        if dt == "BF16":
            raw = f32_to_bf16(a).tobytes()
        else:
            dt = next(k for k, v in _DTYPES.items() if k != "BF16" and v == a.dtype)
            raw = np.ascontiguousarray(a).tobytes()
        header[name] = {"dtype": dt, "shape": list(a.shape), "data_offsets": [off, off + len(raw)]}
        blobs.append(raw)
        off += len(raw)
    h = json.dumps(header).encode()
    h += b" " * ((-len(h)) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h)
        for b in blobs:
            f.write(b)
