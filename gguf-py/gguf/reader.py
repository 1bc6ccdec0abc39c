"""GGUF v3 reader: memory-maps a file, parses and validates every KV and tensor info.

    r = GGUFReader("model.gguf")
    r.get("general.architecture")          # -> "llama"
    t = r.tensor("token_embd.weight")      # ReaderTensor; t.data is a numpy view into the mapping
    t.ne                                   # dims innermost first, e.g. [4096, 32000]
    t.data.shape                           # numpy order, e.g. (32000, 4096); block types (q4_0 .. q8_K):
                                           # uint8 (rows..., row_bytes)
    r.tensor_f32("token_embd.weight")      # any supported type dequantized to float32 (gguf.quants)

Tensor types: those of constants.GGMLQuantizationType (F32, F16, I32, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q8_1,
Q2_K .. Q8_K); any other type is rejected. Every malformed input raises ValueError("<file>: <what> at offset N").
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

import numpy as np

from .constants import (GGML_PLAIN_DTYPES, GGML_QUANT_SIZES, GGUF_DEFAULT_ALIGNMENT, GGUF_MAGIC, KEY_GENERAL_ALIGNMENT,
                        VALUE_DTYPES, GGMLQuantizationType, GGUFValueType)

MAX_STRING_LENGTH = 64 * 1024 * 1024
MAX_ARRAY_LENGTH = 1 << 28
MAX_COUNT = 1 << 20
MAX_DIMS = 4


@dataclass
class ReaderField:
    name: str
    type: GGUFValueType
    value: Any                            # python scalar, str, list[str] or numpy array
    array_type: GGUFValueType | None = None  # element type when type == ARRAY


@dataclass
class ReaderTensor:
    name: str
    type: GGMLQuantizationType
    ne: list[int]        # innermost first
    offset: int          # relative to the data section
    n_bytes: int
    data: np.ndarray     # numpy view: plain types in numpy order (reversed ne); blocked types uint8 (rows..., row_bytes)

    @property
    def shape(self) -> tuple[int, ...]:
        """numpy-order logical shape (reversed ne)."""
        return tuple(reversed(self.ne))


class GGUFReader:
    def __init__(self, path: str | os.PathLike):
        self.path = os.fspath(path)
        self._buf = np.memmap(self.path, dtype=np.uint8, mode="r") if os.path.getsize(self.path) > 0 \
            else np.zeros(0, dtype=np.uint8)
        self._pos = 0
        self.fields: dict[str, ReaderField] = {}
        self.tensors: list[ReaderTensor] = []
        self._tensor_index: dict[str, int] = {}
        self._parse()

    # ---- public API --------------------------------------------------------------------------------
    def get(self, key: str, default: Any = None) -> Any:
        f = self.fields.get(key)
        return default if f is None else f.value

    def tensor(self, name: str) -> ReaderTensor:
        if name not in self._tensor_index:
            raise KeyError(f"{self.path}: no tensor named '{name}'")
        return self.tensors[self._tensor_index[name]]

    def has_tensor(self, name: str) -> bool:
        return name in self._tensor_index

    def tensor_f32(self, name: str) -> np.ndarray:
        """Tensor dequantized to float32 in numpy order (reversed ne)."""
        from .quants import dequantize
        t = self.tensor(name)
        return dequantize(t.data, t.type).reshape(t.shape)

    # ---- low-level cursor reads ----------------------------------------------------------------------
    def _fail(self, what: str, at: int | None = None) -> None:
        raise ValueError(f"{self.path}: {what} at offset {self._pos if at is None else at}")

    def _need(self, n: int, what: str) -> None:
        if n < 0 or self._pos + n > len(self._buf):
            self._fail(f"truncated file: {what} needs {n} bytes, {len(self._buf) - self._pos} left")

    def _scalar(self, dtype: np.dtype, what: str):
        dtype = np.dtype(dtype)
        self._need(dtype.itemsize, what)
        v = self._buf[self._pos:self._pos + dtype.itemsize].view(dtype)[0]
        self._pos += dtype.itemsize
        return v

    def _u32(self, what: str) -> int:
        return int(self._scalar("<u4", what))

    def _u64(self, what: str) -> int:
        return int(self._scalar("<u8", what))

    def _string(self, what: str) -> str:
        start = self._pos
        n = self._u64(f"length of {what}")
        if n > MAX_STRING_LENGTH:
            self._fail(f"{what}: string length {n} exceeds limit {MAX_STRING_LENGTH}", start)
        self._need(n, what)
        raw = bytes(self._buf[self._pos:self._pos + n])
        self._pos += n
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError:
            return raw.decode("utf-8", errors="surrogateescape")

    def _value_type(self, what: str) -> GGUFValueType:
        at = self._pos
        t = self._u32(what)
        try:
            return GGUFValueType(t)
        except ValueError:
            self._fail(f"{what}: unknown value type {t}", at)

    def _value(self, vtype: GGUFValueType, key: str) -> tuple[Any, GGUFValueType | None]:
        if vtype == GGUFValueType.STRING:
            return self._string(f"value of key '{key}'"), None
        if vtype == GGUFValueType.ARRAY:
            at = self._pos
            etype = self._value_type(f"array element type of key '{key}'")
            n = self._u64(f"array length of key '{key}'")
            if n > MAX_ARRAY_LENGTH:
                self._fail(f"key '{key}': array length {n} exceeds limit {MAX_ARRAY_LENGTH}", at)
            if etype == GGUFValueType.ARRAY:
                self._fail(f"key '{key}': nested arrays are not supported", at)
            if etype == GGUFValueType.STRING:
                return [self._string(f"element {i} of key '{key}'") for i in range(n)], etype
            dt = VALUE_DTYPES[etype]
            self._need(n * dt.itemsize, f"array data of key '{key}'")
            arr = self._buf[self._pos:self._pos + n * dt.itemsize].view(dt)
            self._pos += n * dt.itemsize
            if etype == GGUFValueType.BOOL:
                arr = arr.astype(bool)
            return arr, etype
        dt = VALUE_DTYPES[vtype]
        v = self._scalar(dt, f"value of key '{key}'")
        if vtype == GGUFValueType.BOOL:
            if int(v) > 1:
                self._fail(f"key '{key}': bool value {int(v)} is not 0 or 1", self._pos - 1)
            return bool(v), None
        if vtype in (GGUFValueType.FLOAT32, GGUFValueType.FLOAT64):
            return float(v), None
        return int(v), None

    # ---- parse -------------------------------------------------------------------------------------
    def _parse(self) -> None:
        magic = self._u32("magic")
        if magic != GGUF_MAGIC:
            self._fail(f"bad magic 0x{magic:08x} (not a GGUF file)", 0)
        self.version = self._u32("version")
        if self.version not in (2, 3):
            self._fail(f"unsupported GGUF version {self.version} (expected 3)", 4)
        n_tensors = self._u64("tensor count")
        n_kv = self._u64("KV count")
        if n_tensors > MAX_COUNT:
            self._fail(f"tensor count {n_tensors} exceeds limit {MAX_COUNT}", 8)
        if n_kv > MAX_COUNT:
            self._fail(f"KV count {n_kv} exceeds limit {MAX_COUNT}", 16)

        for i in range(n_kv):
            at = self._pos
            key = self._string(f"key of KV {i}")
            if key in self.fields:
                self._fail(f"duplicate key '{key}'", at)
            vtype = self._value_type(f"type of key '{key}'")
            value, etype = self._value(vtype, key)
            self.fields[key] = ReaderField(key, vtype, value, etype)

        self.alignment = GGUF_DEFAULT_ALIGNMENT
        af = self.fields.get(KEY_GENERAL_ALIGNMENT)
        if af is not None:
            if af.type != GGUFValueType.UINT32:
                self._fail(f"'{KEY_GENERAL_ALIGNMENT}' has type {af.type.name}, expected UINT32")
            if af.value == 0 or (af.value & (af.value - 1)) != 0:
                self._fail(f"'{KEY_GENERAL_ALIGNMENT}' = {af.value} is not a power of two")
            self.alignment = af.value

        infos = []
        for i in range(n_tensors):
            at = self._pos
            name = self._string(f"name of tensor {i}")
            if name in self._tensor_index:
                self._fail(f"duplicate tensor name '{name}'", at)
            n_dims = self._u32(f"n_dims of tensor '{name}'")
            if n_dims < 1 or n_dims > MAX_DIMS:
                self._fail(f"tensor '{name}': n_dims {n_dims} not in [1, {MAX_DIMS}]")
            ne = [self._u64(f"ne[{d}] of tensor '{name}'") for d in range(n_dims)]
            n_el = 1
            for d in ne:
                n_el *= d
            if n_el >= (1 << 62):
                self._fail(f"tensor '{name}': element count {n_el} overflows")
            tat = self._pos
            t = self._u32(f"type of tensor '{name}'")
            try:
                qtype = GGMLQuantizationType(t)
            except ValueError:
                self._fail(f"tensor '{name}': unsupported ggml type {t}", tat)
            block, type_size = GGML_QUANT_SIZES[qtype]
            if ne[0] % block != 0:
                self._fail(f"tensor '{name}': ne[0]={ne[0]} is not a multiple of the {qtype.name} block size {block}")
            off = self._u64(f"offset of tensor '{name}'")
            if off % self.alignment != 0:
                self._fail(f"tensor '{name}': data offset {off} is not a multiple of the alignment {self.alignment}")
            self._tensor_index[name] = i
            infos.append((name, qtype, ne, off, n_el // block * type_size))

        pad = (-self._pos) % self.alignment
        self.data_offset = self._pos + pad
        if self.data_offset > len(self._buf) and n_tensors > 0:
            self._fail("truncated file: data section starts past the end of the file")

        for name, qtype, ne, off, nbytes in infos:
            start = self.data_offset + off
            if start + nbytes > len(self._buf):
                raise ValueError(f"{self.path}: tensor '{name}' data [{start}, {start + nbytes}) "
                                 f"is past the end of the file ({len(self._buf)} bytes)")
            raw = self._buf[start:start + nbytes]
            self.tensors.append(ReaderTensor(name, qtype, ne, off, nbytes, self._view(raw, qtype, ne)))
        # overlapping tensors are a corrupt file
        spans = sorted((t.offset, t.offset + t.n_bytes, t.name) for t in self.tensors)
        for (a0, a1, an), (b0, b1, bn) in zip(spans, spans[1:]):
            if b0 < a1:
                raise ValueError(f"{self.path}: tensors '{an}' and '{bn}' overlap in the data section")

    @staticmethod
    def _view(raw: np.ndarray, qtype: GGMLQuantizationType, ne: list[int]) -> np.ndarray:
        shape = tuple(reversed(ne))
        if qtype in GGML_PLAIN_DTYPES:
            return raw.view(GGML_PLAIN_DTYPES[qtype]).reshape(shape)
        block, type_size = GGML_QUANT_SIZES[qtype]
        return raw.reshape(*shape[:-1], ne[0] // block * type_size)
