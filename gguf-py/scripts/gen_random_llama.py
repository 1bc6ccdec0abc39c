#!/usr/bin/env python3
"""Write a random-weight Llama GGUF with real shapes and a real vocab (for loader/speed/memory tests).

    gen_random_llama.py --preset llama2-7b --outtype f16 --out /tmp/l2.gguf
    gen_random_llama.py --preset tinyllama-1.1b --outtype q8_0 --out /tmp/tl.gguf --seed 1
    gen_random_llama.py --preset llama2-7b --outtype q8_0 --fast --out /tmp/l2q.gguf   # ~write speed
    gen_random_llama.py --custom --n-embd 256 --n-ff 688 --n-layer 2 --n-head 8 --n-head-kv 2 --n-vocab 512 \
        --vocab none --rope-freqs --tied --out /tmp/small.gguf

Weights: matrices N(0, 1) * 0.02, norms 1 + N(0, 1) * 0.02, so activations stay O(1). Each tensor has its own
generator seeded with (seed, tensor index), and is generated, converted and written in row chunks: nothing
but the current chunk is held in memory.
--fast: the RNG is run once per (tensor kind, stored type) for a pool of POOL_ELEMENTS values (same
distribution), converted (f16) or quantized (q8_0, whole 34-byte blocks) once; each tensor is then written as
segments of SEGMENT_ELEMENTS copied straight from the pool at offsets drawn from the (seed, tensor index)
generator, so the cost is the file write. Deterministic per seed; not the same bytes as without --fast.
Vocab: spm = ggml-vocab-llama-spm.gguf, bpe = ggml-vocab-llama-bpe.gguf
(from $LLM_SHARED/models, default ../shared/models next to the repo), none = synthetic SPM-style byte vocab.
"""
import argparse
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from gguf import QK8_0, GGMLQuantizationType, GGUFReader, GGUFValueType, GGUFWriter, TokenType  # noqa: E402
from gguf.llama import (FILE_TYPES, LlamaHParams, add_llama_hparams, llama3_rope_freqs,  # noqa: E402
                        llama_tensor_shapes, pick_qtype)
from gguf.quants import quantize  # noqa: E402

PRESETS = {
    "llama2-7b": (LlamaHParams(32000, 4096, 11008, 32, 32, 32, n_ctx=4096, rope_theta=10000.0), "spm"),
    "llama3-8b": (LlamaHParams(128256, 4096, 14336, 32, 32, 8, n_ctx=8192, rope_theta=500000.0), "bpe"),
    # GQA 64/8, 80 layers: ~69e9 parameters (q8_0 73 GB, f16 138 GB: more than one H200 holds)
    "llama2-70b": (LlamaHParams(32000, 8192, 28672, 80, 64, 8, n_ctx=4096, rope_theta=10000.0), "spm"),
    "tinyllama-1.1b": (LlamaHParams(32000, 2048, 5632, 22, 32, 4, n_ctx=2048, rope_theta=10000.0), "spm"),
}
VOCAB_FILES = {"spm": "ggml-vocab-llama-spm.gguf", "bpe": "ggml-vocab-llama-bpe.gguf"}
CHUNK_ELEMENTS = 1 << 24
POOL_ELEMENTS = 1 << 22       # --fast: values drawn per pool (16 MiB as f32)
SEGMENT_ELEMENTS = 1 << 18    # --fast: values per pool slice written (a multiple of 32: whole q8_0 blocks)
POOL_SEED_TAG = 0x706F6F6C    # --fast: pool generator = default_rng([seed, POOL_SEED_TAG, is_norm])


def shared_models_dir() -> str:
    env = os.environ.get("LLM_SHARED")
    if env:
        return os.path.join(env, "models")
    repo = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    return os.path.join(repo, "..", "shared", "models")


def copy_vocab(w: GGUFWriter, path: str) -> int:
    """Copy every tokenizer.* KV of a vocab GGUF; returns its token count."""
    r = GGUFReader(path)
    for key, f in r.fields.items():
        if key.startswith("tokenizer."):
            w.add_kv(key, f.value, f.type, f.array_type)
    return len(r.get("tokenizer.ggml.tokens"))


def synthetic_vocab(w: GGUFWriter, n_vocab: int) -> None:
    """SPM-style: <unk> <s> </s>, byte tokens <0x00>.. (as many as fit), then '▁t<i>' pieces."""
    if n_vocab < 3:
        raise ValueError(f"--n-vocab {n_vocab} is too small for a vocab (need >= 3)")
    tokens = ["<unk>", "<s>", "</s>"]
    types = [TokenType.UNKNOWN, TokenType.CONTROL, TokenType.CONTROL]
    for b in range(min(256, n_vocab - 3)):
        tokens.append(f"<0x{b:02X}>")
        types.append(TokenType.BYTE)
    for i in range(len(tokens), n_vocab):
        tokens.append(f"\u2581t{i}")
        types.append(TokenType.NORMAL)
    w.add_string("tokenizer.ggml.model", "llama")
    w.add_array("tokenizer.ggml.tokens", tokens, GGUFValueType.STRING)
    w.add_array("tokenizer.ggml.scores", -np.arange(n_vocab, dtype=np.float32))
    w.add_array("tokenizer.ggml.token_type", np.array(types, np.int32))
    w.add_uint32("tokenizer.ggml.unknown_token_id", 0)
    w.add_uint32("tokenizer.ggml.bos_token_id", 1)
    w.add_uint32("tokenizer.ggml.eos_token_id", 2)
    w.add_bool("tokenizer.ggml.add_bos_token", True)


def tensor_chunks(shape: tuple[int, ...], qtype: GGMLQuantizationType, seed: int, idx: int, is_norm: bool):
    rng = np.random.default_rng([seed, idx])
    row = shape[-1]
    rows = int(np.prod(shape[:-1], dtype=np.int64)) if len(shape) > 1 else 1
    step = max(1, CHUNK_ELEMENTS // row)
    for r0 in range(0, rows, step):
        n = min(step, rows - r0)
        x = rng.standard_normal((n, row), dtype=np.float32)
        x *= np.float32(0.02)
        if is_norm:
            x += np.float32(1.0)
        yield quantize(x, qtype)


def random_pool(qtype: GGMLQuantizationType, seed: int, is_norm: bool) -> np.ndarray:
    """--fast pool: POOL_ELEMENTS values of the same distribution as tensor_chunks, stored as qtype.

    Plain types: 1-D array of that dtype [POOL_ELEMENTS]; q8_0: uint8 blocks [POOL_ELEMENTS / 32, 34].
    """
    x = np.random.default_rng([seed, POOL_SEED_TAG, int(is_norm)]).standard_normal(POOL_ELEMENTS, dtype=np.float32)
    x *= np.float32(0.02)
    if is_norm:
        x += np.float32(1.0)
    if qtype == GGMLQuantizationType.Q8_0:
        return quantize(x.reshape(-1, QK8_0), qtype)          # [n_blocks, 34]: one block per row
    return quantize(x, qtype)


def fast_tensor_chunks(shape: tuple[int, ...], qtype: GGMLQuantizationType, seed: int, idx: int,
                       pool: np.ndarray):
    """Yield the tensor as pool slices (views, no copy) at offsets drawn from default_rng([seed, idx]).

    The unit is one element for plain types and one 34-byte block for q8_0; a q8_0 row of K elements is K/32
    whole blocks, so slicing whole blocks keeps every row on a block boundary.
    """
    n = int(np.prod(shape, dtype=np.int64))
    per_unit = QK8_0 if qtype == GGMLQuantizationType.Q8_0 else 1
    if n % per_unit:
        raise ValueError(f"{qtype.name}: {n} elements is not a whole number of blocks")
    units, seg = n // per_unit, SEGMENT_ELEMENTS // per_unit
    rng = np.random.default_rng([seed, idx])
    for u0 in range(0, units, seg):
        k = min(seg, units - u0)
        off = int(rng.integers(0, len(pool) - k + 1))
        yield pool[off:off + k]


def generate(out: str, hp: LlamaHParams, vocab: str, outtype: str, seed: int, name: str,
             fast: bool = False) -> None:
    w = GGUFWriter(out)
    add_llama_hparams(w, hp, name, FILE_TYPES[outtype])
    if vocab in VOCAB_FILES:
        path = os.path.join(shared_models_dir(), VOCAB_FILES[vocab])
        n = copy_vocab(w, path)
        if n != hp.n_vocab:
            raise ValueError(f"{path}: vocab has {n} tokens, model n_vocab is {hp.n_vocab}")
    elif vocab == "none":
        synthetic_vocab(w, hp.n_vocab)
    else:
        raise ValueError(f"unknown --vocab '{vocab}' (spm, bpe or none)")
    pools: dict[tuple[GGMLQuantizationType, bool], np.ndarray] = {}   # --fast: made on first use
    for idx, (tname, shape) in enumerate(llama_tensor_shapes(hp)):
        qt = pick_qtype(tname, shape, outtype)
        if tname == "rope_freqs.weight":
            w.add_tensor(tname, llama3_rope_freqs(hp.n_rot, hp.rope_theta))
            continue
        norm = tname.endswith("_norm.weight")
        if fast:
            if (qt, norm) not in pools:
                pools[qt, norm] = random_pool(qt, seed, norm)
            w.add_tensor_lazy(tname, list(reversed(shape)), qt,
                              lambda s=shape, q=qt, i=idx, p=pools[qt, norm]: fast_tensor_chunks(s, q, seed, i, p))
            continue
        w.add_tensor_lazy(tname, list(reversed(shape)), qt,
                          lambda s=shape, q=qt, i=idx, nm=norm: tensor_chunks(s, q, seed, i, nm))
    w.write()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True)
    g = ap.add_mutually_exclusive_group(required=True)
    g.add_argument("--preset", choices=sorted(PRESETS))
    g.add_argument("--custom", action="store_true", help="shapes from the flags below")
    ap.add_argument("--outtype", default="f16", choices=["f32", "f16", "q8_0"])
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--name", help="general.name (default: the preset or 'custom')")
    ap.add_argument("--fast", action="store_true",
                    help="fill tensors from a pre-drawn random pool (write-speed bound; other bytes than without)")
    c = ap.add_argument_group("--custom")
    c.add_argument("--n-embd", type=int, default=256)
    c.add_argument("--n-ff", type=int, default=688)
    c.add_argument("--n-layer", type=int, default=2)
    c.add_argument("--n-head", type=int, default=8)
    c.add_argument("--n-head-kv", type=int)
    c.add_argument("--n-vocab", type=int, help="default: the vocab's size (spm 32000, bpe 128256), or 512 for none")
    c.add_argument("--ctx", type=int, default=2048)
    c.add_argument("--theta", type=float, default=10000.0)
    c.add_argument("--eps", type=float, default=1e-5)
    c.add_argument("--tied", action="store_true", help="no output.weight (output = token_embd)")
    c.add_argument("--rope-freqs", action="store_true", help="add a llama-3.1-style rope_freqs.weight")
    c.add_argument("--vocab", default="none", choices=["spm", "bpe", "none"])
    args = ap.parse_args()
    try:
        if args.preset:
            hp, vocab = PRESETS[args.preset]
            name = args.name or args.preset
        else:
            vocab = args.vocab
            n_vocab = args.n_vocab or {"spm": 32000, "bpe": 128256, "none": 512}[vocab]
            n_kv = args.n_head_kv or args.n_head
            for flag, v in (("--n-embd", args.n_embd), ("--n-ff", args.n_ff), ("--n-layer", args.n_layer),
                            ("--n-head", args.n_head), ("--n-head-kv", n_kv), ("--n-vocab", n_vocab),
                            ("--ctx", args.ctx)):
                if v <= 0:
                    raise ValueError(f"{flag} must be positive, got {v}")
            if args.n_embd % args.n_head or args.n_head % n_kv or (args.n_embd // args.n_head) % 2:
                raise ValueError(f"--n-embd {args.n_embd} / --n-head {args.n_head} / --n-head-kv {n_kv}: need "
                                 "n_embd % n_head == 0, n_head % n_head_kv == 0 and an even head dim")
            hp = LlamaHParams(n_vocab, args.n_embd, args.n_ff, args.n_layer, args.n_head, n_kv, n_ctx=args.ctx,
                              rope_theta=args.theta, rms_eps=args.eps, tied=args.tied, rope_freqs=args.rope_freqs)
            name = args.name or "custom"
        t0 = time.time()
        generate(args.out, hp, vocab, args.outtype, args.seed, name, args.fast)
    except (ValueError, OSError) as e:
        sys.exit(f"error: {e}")
    dt, size = time.time() - t0, os.path.getsize(args.out)
    print(f"wrote {args.out} ({size / 2**30:.2f} GiB) in {dt:.1f} s ({size / 2**20 / max(dt, 1e-9):.0f} MiB/s)")


if __name__ == "__main__":
    main()
