"""GGUF v3 constants: magic, value types, ggml tensor types and their block layouts."""
from __future__ import annotations

from enum import IntEnum

import numpy as np

GGUF_MAGIC = 0x46554747  # b"GGUF" read as little-endian uint32
GGUF_VERSION = 3
GGUF_DEFAULT_ALIGNMENT = 32
KEY_GENERAL_ALIGNMENT = "general.alignment"

QK8_0 = 32
QK8_1 = 32
QK4_0 = QK4_1 = QK5_0 = QK5_1 = 32
QK_K = 256          # K-quant super-block
K_SCALE_SIZE = 12


class GGUFValueType(IntEnum):
    UINT8 = 0
    INT8 = 1
    UINT16 = 2
    INT16 = 3
    UINT32 = 4
    INT32 = 5
    FLOAT32 = 6
    BOOL = 7
    STRING = 8
    ARRAY = 9
    UINT64 = 10
    INT64 = 11
    FLOAT64 = 12


# numpy dtype (little-endian) of each scalar value type
VALUE_DTYPES: dict[GGUFValueType, np.dtype] = {
    GGUFValueType.UINT8: np.dtype("<u1"),
    GGUFValueType.INT8: np.dtype("<i1"),
    GGUFValueType.UINT16: np.dtype("<u2"),
    GGUFValueType.INT16: np.dtype("<i2"),
    GGUFValueType.UINT32: np.dtype("<u4"),
    GGUFValueType.INT32: np.dtype("<i4"),
    GGUFValueType.FLOAT32: np.dtype("<f4"),
    GGUFValueType.BOOL: np.dtype("<u1"),
    GGUFValueType.UINT64: np.dtype("<u8"),
    GGUFValueType.INT64: np.dtype("<i8"),
    GGUFValueType.FLOAT64: np.dtype("<f8"),
}


class GGMLQuantizationType(IntEnum):
    F32 = 0
    F16 = 1
    Q4_0 = 2
    Q4_1 = 3
    Q5_0 = 6
    Q5_1 = 7
    Q8_0 = 8
    Q8_1 = 9
    Q2_K = 10
    Q3_K = 11
    Q4_K = 12
    Q5_K = 13
    Q6_K = 14
    Q8_K = 15
    I32 = 26


# (block size in elements, bytes per block)
GGML_QUANT_SIZES: dict[GGMLQuantizationType, tuple[int, int]] = {
    GGMLQuantizationType.F32: (1, 4),
    GGMLQuantizationType.F16: (1, 2),
    GGMLQuantizationType.Q4_0: (QK4_0, 2 + QK4_0 // 2),
    GGMLQuantizationType.Q4_1: (QK4_1, 4 + QK4_1 // 2),
    GGMLQuantizationType.Q5_0: (QK5_0, 2 + 4 + QK5_0 // 2),
    GGMLQuantizationType.Q5_1: (QK5_1, 4 + 4 + QK5_1 // 2),
    GGMLQuantizationType.Q8_0: (QK8_0, 2 + QK8_0),
    GGMLQuantizationType.Q8_1: (QK8_1, 4 + QK8_1),
    GGMLQuantizationType.Q2_K: (QK_K, QK_K // 16 + QK_K // 4 + 2 + 2),                # 84
    GGMLQuantizationType.Q3_K: (QK_K, QK_K // 8 + QK_K // 4 + 12 + 2),                # 110
    GGMLQuantizationType.Q4_K: (QK_K, 2 + 2 + K_SCALE_SIZE + QK_K // 2),              # 144
    GGMLQuantizationType.Q5_K: (QK_K, 2 + 2 + K_SCALE_SIZE + QK_K // 8 + QK_K // 2),  # 176
    GGMLQuantizationType.Q6_K: (QK_K, QK_K // 2 + QK_K // 4 + QK_K // 16 + 2),        # 210
    GGMLQuantizationType.Q8_K: (QK_K, 4 + QK_K + 2 * (QK_K // 16)),                   # 292
    GGMLQuantizationType.I32: (1, 4),
}

# numpy dtype of element types stored unblocked
GGML_PLAIN_DTYPES: dict[GGMLQuantizationType, np.dtype] = {
    GGMLQuantizationType.F32: np.dtype("<f4"),
    GGMLQuantizationType.F16: np.dtype("<f2"),
    GGMLQuantizationType.I32: np.dtype("<i4"),
}


class LlamaFileType(IntEnum):
    """general.file_type as llama.cpp writes it."""
    ALL_F32 = 0
    MOSTLY_F16 = 1
    MOSTLY_Q4_0 = 2
    MOSTLY_Q4_1 = 3
    MOSTLY_Q8_0 = 7
    MOSTLY_Q5_0 = 8
    MOSTLY_Q5_1 = 9
    MOSTLY_Q2_K = 10
    MOSTLY_Q3_K_S = 11
    MOSTLY_Q3_K_M = 12
    MOSTLY_Q3_K_L = 13
    MOSTLY_Q4_K_S = 14
    MOSTLY_Q4_K_M = 15
    MOSTLY_Q5_K_S = 16
    MOSTLY_Q5_K_M = 17
    MOSTLY_Q6_K = 18


class TokenType(IntEnum):
    NORMAL = 1
    UNKNOWN = 2
    CONTROL = 3
    USER_DEFINED = 4
    UNUSED = 5
    BYTE = 6


def tensor_nbytes(qtype: GGMLQuantizationType, ne: list[int] | tuple[int, ...]) -> int:
    """Bytes of a tensor with dims ne (innermost first); ne[0] must be a multiple of the block size."""
    block, type_size = GGML_QUANT_SIZES[GGMLQuantizationType(qtype)]
    n = 1
    for d in ne:
        n *= int(d)
    if ne and int(ne[0]) % block != 0:
        raise ValueError(f"tensor row of {ne[0]} elements is not a multiple of the {qtype.name} block size {block}")
    return n // block * type_size
