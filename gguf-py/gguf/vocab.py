"""Tokenizer vocab loaders: SentencePiece tokenizer.model (tiny protobuf parser), llama2.c tokenizer.bin,
Hugging Face tokenizer.json (byte-level BPE -> gpt2, SPM-style BPE -> llama). Each returns a Vocab that
add_to_writer() stores under the tokenizer.ggml.* keys.

    v = load_vocab_dir("/path/to/hf_model")     # tokenizer.model preferred, then tokenizer.json
    v.add_to_writer(w)
"""
from __future__ import annotations

import json
import os
import struct
from dataclasses import dataclass, field

import numpy as np

from .constants import GGUFValueType, TokenType


@dataclass
class Vocab:
    model: str                       # "llama" (SPM) or "gpt2" (byte-level BPE)
    tokens: list[str]
    token_types: list[int]
    scores: list[float] | None = None
    merges: list[str] | None = None
    pre: str | None = None
    special_ids: dict[str, int] = field(default_factory=dict)   # bos/eos/unk/padding -> id
    add_bos: bool | None = True
    add_eos: bool | None = None
    add_space_prefix: bool | None = None
    chat_template: str | None = None

    def add_to_writer(self, w) -> None:
        w.add_string("tokenizer.ggml.model", self.model)
        if self.pre is not None:
            w.add_string("tokenizer.ggml.pre", self.pre)
        w.add_array("tokenizer.ggml.tokens", self.tokens, GGUFValueType.STRING)
        if self.scores is not None:
            w.add_array("tokenizer.ggml.scores", np.asarray(self.scores, dtype=np.float32))
        w.add_array("tokenizer.ggml.token_type", np.asarray(self.token_types, dtype=np.int32))
        if self.merges is not None:
            w.add_array("tokenizer.ggml.merges", self.merges, GGUFValueType.STRING)
        for name in ("bos", "eos", "unknown", "padding"):
            if name in self.special_ids:
                w.add_uint32(f"tokenizer.ggml.{name}_token_id", self.special_ids[name])
        if self.add_bos is not None:
            w.add_bool("tokenizer.ggml.add_bos_token", self.add_bos)
        if self.add_eos is not None:
            w.add_bool("tokenizer.ggml.add_eos_token", self.add_eos)
        if self.add_space_prefix is not None:
            w.add_bool("tokenizer.ggml.add_space_prefix", self.add_space_prefix)
        if self.chat_template:
            w.add_string("tokenizer.chat_template", self.chat_template)


# ---- SentencePiece ModelProto ---------------------------------------------------------------------------
def _varint(b: bytes, p: int, where: str) -> tuple[int, int]:
    v = shift = 0
    while True:
        if p >= len(b):
            raise ValueError(f"{where}: truncated varint at offset {p}")
        c = b[p]
        p += 1
        v |= (c & 0x7F) << shift
        if c < 0x80:
            return v, p
        shift += 7
        if shift > 63:
            raise ValueError(f"{where}: varint too long at offset {p}")


def _fields(b: bytes, where: str):
    """Yield (field number, wire type, value) of a protobuf message; value is int or bytes."""
    p = 0
    while p < len(b):
        start = p
        key, p = _varint(b, p, where)
        fno, wt = key >> 3, key & 7
        if wt == 0:
            v, p = _varint(b, p, where)
        elif wt == 1:
            v, p = b[p:p + 8], p + 8
        elif wt == 2:
            n, p = _varint(b, p, where)
            v, p = b[p:p + n], p + n
        elif wt == 5:
            v, p = b[p:p + 4], p + 4
        else:
            raise ValueError(f"{where}: unsupported protobuf wire type {wt} at offset {start}")
        if p > len(b):
            raise ValueError(f"{where}: truncated protobuf field {fno} at offset {start}")
        yield fno, wt, v


def load_spm_model(path: str) -> Vocab:
    """SentencePiece tokenizer.model: ModelProto{1: repeated SentencePiece{1: piece, 2: score f32, 3: type}}."""
    data = open(path, "rb").read()
    tokens, scores, types = [], [], []
    add_dummy_prefix = True
    for fno, wt, v in _fields(data, path):
        if fno == 1 and wt == 2:
            piece, score, ptype = "", 0.0, int(TokenType.NORMAL)
            for f2, w2, v2 in _fields(v, path):
                if f2 == 1 and w2 == 2:
                    piece = v2.decode("utf-8")
                elif f2 == 2 and w2 == 5:
                    score = struct.unpack("<f", v2)[0]
                elif f2 == 3 and w2 == 0:
                    ptype = v2
            tokens.append(piece)
            scores.append(score)
            types.append(ptype)
        elif fno == 3 and wt == 2:   # NormalizerSpec: 3 = add_dummy_prefix
            for f2, w2, v2 in _fields(v, path):
                if f2 == 3 and w2 == 0:
                    add_dummy_prefix = bool(v2)
    if not tokens:
        raise ValueError(f"{path}: no SentencePiece pieces found (not a tokenizer.model?)")
    return _spm_vocab(tokens, scores, types, add_dummy_prefix)


def _spm_vocab(tokens, scores, types, add_space_prefix=True) -> Vocab:
    special = {"unknown": 0, "bos": 1, "eos": 2}
    for name, tok in (("unknown", "<unk>"), ("bos", "<s>"), ("eos", "</s>")):
        if tok in tokens[:16]:
            special[name] = tokens.index(tok)
    return Vocab("llama", tokens, types, scores=scores, special_ids=special, add_bos=True, add_eos=False,
                 add_space_prefix=add_space_prefix, pre="default")


# ---- llama2.c tokenizer.bin ----------------------------------------------------------------------------
def load_llama2c_tokenizer(path: str, n_vocab: int) -> Vocab:
    """int32 max_token_length, then n_vocab x (f32 score, int32 len, bytes). Types as llama.cpp's converter."""
    data = open(path, "rb").read()
    p = 4
    tokens, scores, types = [], [], []
    for i in range(n_vocab):
        if p + 8 > len(data):
            raise ValueError(f"{path}: truncated at token {i} (offset {p}), expected {n_vocab} tokens")
        score, n = struct.unpack_from("<fi", data, p)
        p += 8
        if n < 0 or p + n > len(data):
            raise ValueError(f"{path}: token {i} has bad length {n} at offset {p - 4}")
        text = data[p:p + n].decode("utf-8", errors="replace")
        p += n
        if i == 0:
            text, t = "<unk>", TokenType.UNKNOWN
        elif i in (1, 2):
            text, t = ("<s>", "</s>")[i - 1], TokenType.CONTROL
        elif len(text) == 6 and text.startswith("<0x") and text.endswith(">"):
            t = TokenType.BYTE
        else:
            t = TokenType.NORMAL
        tokens.append(text.replace(" ", "\u2581"))
        scores.append(score)
        types.append(int(t))
    v = _spm_vocab(tokens, scores, types)
    v.pre = None
    v.add_eos = None
    v.add_space_prefix = None
    return v


# ---- Hugging Face tokenizer.json -----------------------------------------------------------------------
def _token_content(x) -> str | None:
    if isinstance(x, dict):
        return x.get("content")
    return x


def load_hf_tokenizer(dir_path: str) -> Vocab:
    tj_path = os.path.join(dir_path, "tokenizer.json")
    tj = json.load(open(tj_path, encoding="utf-8"))
    cfg_path = os.path.join(dir_path, "tokenizer_config.json")
    cfg = json.load(open(cfg_path, encoding="utf-8")) if os.path.exists(cfg_path) else {}
    model = tj.get("model", {})
    if model.get("type") != "BPE":
        raise ValueError(f"{tj_path}: tokenizer model type '{model.get('type')}' is not supported (need BPE)")
    vocab: dict[str, int] = model["vocab"]
    added = {a["id"]: a for a in tj.get("added_tokens", [])}
    n = max(list(vocab.values()) + list(added.keys())) + 1
    tokens: list[str | None] = [None] * n
    for t, i in vocab.items():
        tokens[i] = t
    for i, a in added.items():
        tokens[i] = a["content"]
    missing = [i for i, t in enumerate(tokens) if t is None]
    if missing:
        raise ValueError(f"{tj_path}: token ids {missing[:5]} have no token (vocab is not dense)")
    merges = [m if isinstance(m, str) else " ".join(m) for m in model.get("merges", [])]
    by_text = {t: i for i, t in enumerate(tokens)}

    def special_id(key: str) -> int | None:
        c = _token_content(cfg.get(key))
        return by_text.get(c) if c is not None else None

    if model.get("byte_fallback"):
        # SentencePiece-style BPE (Llama 2). Scores: the real SPM scores are -(piece order); merged pieces
        # get -(rank of the merge producing them), others 0 (specials/bytes) or -(id) (single chars).
        rank: dict[str, int] = {}
        for r, m in enumerate(merges):
            rank.setdefault(m.replace(" ", "", 1), r)     # several merges can make one piece: keep the first
        types, scores = [], []
        for i, t in enumerate(tokens):
            if i in added and added[i].get("special"):
                types.append(int(TokenType.UNKNOWN if t == model.get("unk_token") else TokenType.CONTROL))
                scores.append(0.0)
            elif i in added:
                types.append(int(TokenType.USER_DEFINED))
                scores.append(0.0)
            elif len(t) == 6 and t.startswith("<0x") and t.endswith(">"):
                types.append(int(TokenType.BYTE))
                scores.append(0.0)
            else:
                types.append(int(TokenType.NORMAL))
                scores.append(float(-rank[t]) if t in rank else float(-i))
        v = _spm_vocab(tokens, scores, types)
        for key, name in (("bos_token", "bos"), ("eos_token", "eos"), ("unk_token", "unknown")):
            sid = special_id(key)
            if sid is not None:
                v.special_ids[name] = sid
        if "add_bos_token" in cfg:
            v.add_bos = bool(cfg["add_bos_token"])
        if "add_eos_token" in cfg:
            v.add_eos = bool(cfg["add_eos_token"])
        v.chat_template = cfg.get("chat_template")
        return v

    # byte-level BPE (Llama 3)
    types = []
    for i in range(n):
        if i in added:
            types.append(int(TokenType.CONTROL if added[i].get("special") else TokenType.USER_DEFINED))
        else:
            types.append(int(TokenType.NORMAL))
    special = {}
    for key, name in (("bos_token", "bos"), ("eos_token", "eos"), ("pad_token", "padding")):
        sid = special_id(key)
        if sid is not None:
            special[name] = sid
    return Vocab("gpt2", tokens, types, merges=merges, pre="llama-bpe", special_ids=special,
                 add_bos=bool(cfg.get("add_bos_token", True)), chat_template=cfg.get("chat_template"))


def load_vocab_dir(dir_path: str) -> Vocab:
    """tokenizer.model (SentencePiece) if present, else tokenizer.json; chat template from tokenizer_config."""
    spm = os.path.join(dir_path, "tokenizer.model")
    if os.path.exists(spm):
        v = load_spm_model(spm)
        cfg_path = os.path.join(dir_path, "tokenizer_config.json")
        if os.path.exists(cfg_path):
            cfg = json.load(open(cfg_path, encoding="utf-8"))
            v.chat_template = cfg.get("chat_template")
            if "add_bos_token" in cfg:
                v.add_bos = bool(cfg["add_bos_token"])
            if "add_eos_token" in cfg:
                v.add_eos = bool(cfg["add_eos_token"])
        return v
    if os.path.exists(os.path.join(dir_path, "tokenizer.json")):
        return load_hf_tokenizer(dir_path)
    raise ValueError(f"{dir_path}: no tokenizer.model or tokenizer.json")
