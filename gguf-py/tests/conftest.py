import os
import sys

import pytest

GGUF_PY = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, GGUF_PY)
sys.path.insert(0, os.path.join(GGUF_PY, "scripts"))

SHARED = os.environ.get("LLM_SHARED", os.path.join(GGUF_PY, "..", "..", "shared"))


def shared_path(rel: str) -> str:
    return os.path.join(SHARED, rel)


@pytest.fixture
def models():
    d = shared_path("models")
    if not os.path.isdir(d):
        pytest.skip(f"shared models not found at {d} (set LLM_SHARED)")
    return d
