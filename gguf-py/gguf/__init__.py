"""gguf: numpy-only GGUF v3 reader/writer, q8_0/q8_1 quantization, and a Llama reference forward pass."""
from .constants import *  # noqa: F401,F403
from .quants import dequantize, quantize  # noqa: F401
from .reader import GGUFReader, ReaderField, ReaderTensor  # noqa: F401
from .writer import GGUFWriter  # noqa: F401
