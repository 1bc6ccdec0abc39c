// test_regressions.cpp - hostile inputs: one hand-made GGUF (or argv) per bug class that llama.cpp has
// shipped (n_kv / tensor-count overflows, tensor size overflow, out-of-range offsets, huge string
// lengths, array type confusion, vocab ids out of range, divide by zero in hparams), and every crash the
// fuzzers (tests/fuzz) found, minimized. Each must give a clean one-line error naming what is wrong,
// never a crash, an abort or an over-read (run under ASan+UBSan by scripts/sanitize.sh).
#include "args.h"
#include "gguf.h"
#include "llm.h"
#include "test_util.h"
#include "vocab.h"

#include "doctest_cstr.h"
#include <unistd.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

namespace {

// ---- GGUF bytes -------------------------------------------------------------------------------

// Little-endian byte writer for hand-made files.
struct bytes {
    std::vector<uint8_t> b;
    template <typename T> bytes & put(T v) {
        const size_t o = b.size();
        b.resize(o + sizeof(T));
        std::memcpy(b.data() + o, &v, sizeof(T));
        return *this;
    }
    bytes & u32(uint32_t v) { return put(v); }
    bytes & i32(int32_t v) { return put(v); }
    bytes & u64(uint64_t v) { return put(v); }
    bytes & i64(int64_t v) { return put(v); }
    bytes & raw(const std::string & s) {
        b.insert(b.end(), s.begin(), s.end());
        return *this;
    }
    bytes & str(const std::string & s) { return u64(s.size()).raw(s); }
    bytes & header(uint64_t n_tensors, uint64_t n_kv) { return raw("GGUF").u32(3).u64(n_tensors).u64(n_kv); }
    bytes & kv_u32(const std::string & key, uint32_t v) { return str(key).i32(GGUF_TYPE_UINT32).u32(v); }
    bytes & tensor(const std::string & name, std::vector<int64_t> ne, int32_t type, uint64_t off) {
        str(name).u32((uint32_t) ne.size());
        for (int64_t n : ne) i64(n);
        return i32(type).u64(off);
    }
    bytes & pad(size_t a) {
        while (b.size() % a) b.push_back(0);
        return *this;
    }
};

// Parse from an exactly-sized heap copy (ASan sees any over-read); "" if it parsed.
std::string gguf_err(const std::vector<uint8_t> & in) {
    std::vector<uint8_t> exact(in);
    ggml_context * meta = nullptr;
    std::string err;
    gguf_context * g = gguf_init_from_buffer(exact.data(), exact.size(), "bad.gguf", {false, &meta}, &err);
    if (g) {
        ggml_free(meta);
        gguf_free(g);
        return "";
    }
    return err;
}

// A clean error: non-empty, one line, names the file and contains `what`.
void check_one_line(const std::string & err, const char * what, const char * file = nullptr) {
    INFO("error: ", err);
    CHECK(!err.empty());
    CHECK(err.find('\n') == std::string::npos);
    CHECK(err.find(what) != std::string::npos);
    if (file) CHECK(err.find(file) != std::string::npos);
}

void check_gguf(const bytes & w, const char * what) {
    const std::string err = gguf_err(w.b);
    check_one_line(err, what, "bad.gguf");
    CHECK(err.find("offset ") != std::string::npos);
}

// ---- tiny valid Llama model, with hooks to break it -------------------------------------------

struct tiny_model {
    int n_embd = 8, n_ff = 16, n_head = 2, n_head_kv = 1, n_layer = 1;
    std::vector<std::string> tokens = {"<unk>", "<s>", "</s>", "\xe2\x96\x81" "a", "\xe2\x96\x81" "b", "a", "b", "c"};
    std::function<void(gguf_context *)> edit_kv;                                      // after the good KVs
    std::function<void(const std::string &, ggml_type &, std::vector<int64_t> &)> edit_tensor;  // per tensor
};

void set_good_vocab(gguf_context * g, const std::vector<std::string> & tokens) {
    std::vector<const char *> ptrs;
    std::vector<float> scores;
    std::vector<int32_t> types;
    for (size_t i = 0; i < tokens.size(); ++i) {
        ptrs.push_back(tokens[i].c_str());
        scores.push_back(-(float) i);
        types.push_back(i == 0 ? LLM_TOKEN_TYPE_UNKNOWN : i < 3 ? LLM_TOKEN_TYPE_CONTROL : LLM_TOKEN_TYPE_NORMAL);
    }
    gguf_set_val_str(g, "tokenizer.ggml.model", "llama");
    gguf_set_arr_str(g, "tokenizer.ggml.tokens", ptrs.data(), ptrs.size());
    gguf_set_arr_data(g, "tokenizer.ggml.scores", GGUF_TYPE_FLOAT32, scores.data(), scores.size());
    gguf_set_arr_data(g, "tokenizer.ggml.token_type", GGUF_TYPE_INT32, types.data(), types.size());
    gguf_set_val_u32(g, "tokenizer.ggml.unknown_token_id", 0);
    gguf_set_val_u32(g, "tokenizer.ggml.bos_token_id", 1);
    gguf_set_val_u32(g, "tokenizer.ggml.eos_token_id", 2);
}

struct tmp_file {
    std::string path;
    explicit tmp_file(const char * name) {
        char tmpl[] = "/tmp/test_regressions_XXXXXX";
        const char * d = mkdtemp(tmpl);
        path = std::string(d ? d : "/tmp") + "/" + name;
    }
    ~tmp_file() {
        std::error_code ec;
        std::filesystem::remove_all(std::filesystem::path(path).parent_path(), ec);
    }
};

// Writes the model to path; returns llm_model_load's error ("" if it loaded).
std::string load_model_err(const tiny_model & s, const tmp_file & f) {
    const int n_kv = s.n_embd / s.n_head * s.n_head_kv;
    const int64_t n_vocab = (int64_t) s.tokens.size();
    gguf_context * g = gguf_init_empty();
    gguf_set_val_str(g, "general.architecture", "llama");
    gguf_set_val_str(g, "general.name", "tiny");
    gguf_set_val_u32(g, "llama.context_length", 64);
    gguf_set_val_u32(g, "llama.embedding_length", (uint32_t) s.n_embd);
    gguf_set_val_u32(g, "llama.block_count", (uint32_t) s.n_layer);
    gguf_set_val_u32(g, "llama.feed_forward_length", (uint32_t) s.n_ff);
    gguf_set_val_u32(g, "llama.attention.head_count", (uint32_t) s.n_head);
    gguf_set_val_u32(g, "llama.attention.head_count_kv", (uint32_t) s.n_head_kv);
    gguf_set_val_f32(g, "llama.attention.layer_norm_rms_epsilon", 1e-5f);
    gguf_set_val_u32(g, "llama.rope.dimension_count", (uint32_t) (s.n_embd / s.n_head));
    set_good_vocab(g, s.tokens);
    if (s.edit_kv) s.edit_kv(g);

    struct spec {
        std::string name;
        std::vector<int64_t> ne;
    };
    std::vector<spec> specs = {{"token_embd.weight", {s.n_embd, n_vocab}},
                               {"output_norm.weight", {s.n_embd}},
                               {"output.weight", {s.n_embd, n_vocab}}};
    for (int il = 0; il < s.n_layer; ++il) {
        const std::string p = "blk." + std::to_string(il) + ".";
        for (const spec & t : std::vector<spec>{{"attn_norm", {s.n_embd}},
                                                {"attn_q", {s.n_embd, s.n_embd}},
                                                {"attn_k", {s.n_embd, n_kv}},
                                                {"attn_v", {s.n_embd, n_kv}},
                                                {"attn_output", {s.n_embd, s.n_embd}},
                                                {"ffn_norm", {s.n_embd}},
                                                {"ffn_gate", {s.n_embd, s.n_ff}},
                                                {"ffn_up", {s.n_embd, s.n_ff}},
                                                {"ffn_down", {s.n_ff, s.n_embd}}}) {
            specs.push_back({p + t.name + ".weight", t.ne});
        }
    }
    ggml_context * ctx = ggml_init({64 * 1024 * 1024, nullptr, false});
    for (spec & t : specs) {
        ggml_type type = GGML_TYPE_F32;
        if (s.edit_tensor) s.edit_tensor(t.name, type, t.ne);
        ggml_tensor * x = ggml_new_tensor(ctx, type, (int) t.ne.size(), t.ne.data());
        ggml_set_name(x, t.name.c_str());
        std::memset(x->data, 0, ggml_nbytes(x));
        if (type == GGML_TYPE_F32) {
            float * d = (float *) x->data;
            for (int64_t i = 0; i < ggml_nelements(x); ++i) d[i] = 0.01f * (float) ((i * 7) % 13) + 0.5f;
        }
        gguf_add_tensor(g, x);
    }
    std::string err;
    REQUIRE(gguf_write_to_file(g, f.path.c_str(), false, &err));
    gguf_free(g);
    ggml_free(ctx);

    llm_model_params mp;
    err.clear();
    llm_model * m = llm_model_load(f.path.c_str(), mp, &err);
    if (m) {
        llm_model_free(m);
        return "";
    }
    return err.empty() ? "<empty error>" : err;
}

// The model must fail to load with a one-line error naming the file and containing `what`.
void check_model(const tiny_model & s, const char * what) {
    tmp_file f("model.gguf");
    check_one_line(load_model_err(s, f), what, f.path.c_str());
}

tiny_model with_kv(std::function<void(gguf_context *)> edit) {
    tiny_model s;
    s.edit_kv = std::move(edit);
    return s;
}

// ---- vocab only --------------------------------------------------------------------------------

std::string vocab_err(const std::function<void(gguf_context *)> & edit) {
    gguf_context * g = gguf_init_empty();
    set_good_vocab(g, {"<unk>", "<s>", "</s>", "a", "b", "ab"});
    edit(g);
    llm_vocab v;
    std::string err;
    const bool ok = llm_vocab_load(v, g, &err);
    gguf_free(g);
    return ok ? "" : (err.empty() ? "<empty error>" : err);
}

void check_vocab(const std::function<void(gguf_context *)> & edit, const char * what) {
    check_one_line(vocab_err(edit), what);
}

}  // namespace

// =================================================================================================
// GGUF container (gguf_init_*)
// =================================================================================================

TEST_CASE("gguf: n_kv = 2^63 and n_kv at the limit with no data") {
    check_gguf(bytes().header(0, 1ull << 63), "kv count 9223372036854775808 exceeds");
    check_gguf(bytes().header(0, UINT64_MAX), "kv count");
    check_gguf(bytes().header(0, GGUF_MAX_KV_COUNT), "unexpected end of file");  // no reservation trusts n_kv
}

TEST_CASE("gguf: tensor count * sizeof(info) overflow") {
    check_gguf(bytes().header(1ull << 63, 0), "tensor count 9223372036854775808 exceeds");
    check_gguf(bytes().header(UINT64_MAX / 8 + 1, 0), "tensor count");
    check_gguf(bytes().header(GGUF_MAX_TENSOR_COUNT, 0), "unexpected end of file");
}

TEST_CASE("gguf: tensor element count and byte size overflow") {
    // ne = [2^62, 4]: 2^64 elements
    check_gguf(bytes().header(1, 0).tensor("t", {1ll << 62, 4}, GGML_TYPE_F32, 0), "element count overflows");
    // 2^62 f32 elements fit int64 but 2^64 bytes do not fit size_t
    check_gguf(bytes().header(1, 0).tensor("t", {1ll << 62}, GGML_TYPE_F32, 0), "byte size overflows");
    check_gguf(bytes().header(1, 0).tensor("t", {1ll << 31, 1ll << 30, 2}, GGML_TYPE_F32, 0), "byte size overflows");
    // q8_0: 2^62 elements -> 2^57 blocks of 34 bytes, fits; but not in the file
    check_gguf(bytes().header(1, 0).tensor("t", {1ll << 62}, GGML_TYPE_Q8_0, 0), "extends past end of file");
    check_gguf(bytes().header(1, 0).tensor("t", {INT64_MAX}, GGML_TYPE_F32, 0), "byte size overflows");
    check_gguf(bytes().header(1, 0).tensor("t", {-1}, GGML_TYPE_F32, 0), "must be positive");
    check_gguf(bytes().header(1, 0).tensor("t", {INT64_MIN, -1}, GGML_TYPE_F32, 0), "must be positive");
}

TEST_CASE("gguf: tensor offset past EOF and offset + size wrap-around") {
    auto file = [](uint64_t off, int64_t n) {
        bytes w;
        w.header(1, 0).tensor("t", {n}, GGML_TYPE_F32, off).pad(32);
        w.b.resize(w.b.size() + 64);  // 64 bytes of data
        return w;
    };
    CHECK(gguf_err(file(0, 16).b) == "");                       // 64 bytes at 0: fits exactly
    check_gguf(file(0, 17), "extends past end of file");         // one float too many
    check_gguf(file(32, 16), "extends past end of file");        // shifted past the end
    check_gguf(file(UINT64_MAX - 31, 16), "extends past end of file");  // offset + data offset wraps
    check_gguf(file(UINT64_MAX - 95, 16), "extends past end of file");  // data offset 64 + offset ok, + size wraps
    check_gguf(file(1ull << 63, 1), "extends past end of file");
    check_gguf(file(UINT64_MAX, 1), "not a multiple of the alignment");
}

TEST_CASE("gguf: string length 2^64-1 and lengths past EOF") {
    check_gguf(bytes().header(0, 1).u64(UINT64_MAX), "key length 18446744073709551615 exceeds");
    check_gguf(bytes().header(0, 1).str("k").i32(GGUF_TYPE_STRING).u64(UINT64_MAX), "string value length");
    check_gguf(bytes().header(0, 1).str("k").i32(GGUF_TYPE_STRING).u64(GGUF_MAX_STRING_LENGTH).raw("abc"),
               "extends past end of file");
    check_gguf(bytes().header(1, 0).u64(UINT64_MAX - 7), "tensor name length");
}

TEST_CASE("gguf: key of length 0") {
    check_gguf(bytes().header(0, 1).kv_u32("", 7), "empty key");
}

TEST_CASE("gguf: arrays with huge counts, nested and invalid element types") {
    auto arr = [](int32_t type, uint64_t n) { return bytes().header(0, 1).str("a").i32(GGUF_TYPE_ARRAY).i32(type).u64(n); };
    check_gguf(arr(GGUF_TYPE_STRING, UINT64_MAX), "array length 18446744073709551615 exceeds");
    check_gguf(arr(GGUF_TYPE_STRING, 1ull << 40), "exceeds GGUF_MAX_ARRAY_LENGTH");
    check_gguf(arr(GGUF_TYPE_STRING, GGUF_MAX_ARRAY_LENGTH), "extends past end of file");  // 8 bytes each, not there
    check_gguf(arr(GGUF_TYPE_UINT64, GGUF_MAX_ARRAY_LENGTH), "extends past end of file");
    // count fits, then one string's length is absurd
    check_gguf(arr(GGUF_TYPE_STRING, 2).str("x").u64(UINT64_MAX), "string length");
    check_gguf(arr(GGUF_TYPE_ARRAY, 1).i32(GGUF_TYPE_UINT8).u64(1).put<uint8_t>(1), "nested array");
    check_gguf(arr(GGUF_TYPE_COUNT, 1), "unknown array element type 13");
    check_gguf(arr(-1, 1), "unknown array element type -1");
    check_gguf(arr(1000, 1), "unknown array element type 1000");
    check_gguf(bytes().header(0, 1).str("k").i32(1000), "unknown value type 1000");
    check_gguf(bytes().header(0, 1).str("k").i32(INT32_MIN), "unknown value type");
}

TEST_CASE("gguf: tensor type id 1000, n_dims 2^31") {
    check_gguf(bytes().header(1, 0).tensor("t", {32}, 1000, 0), "unknown tensor type 1000");
    check_gguf(bytes().header(1, 0).tensor("t", {32}, -1, 0), "unknown tensor type -1");
    check_gguf(bytes().header(1, 0).str("t").u32(1u << 31), "n_dims = 2147483648 out of range");
    check_gguf(bytes().header(1, 0).str("t").u32(0), "n_dims = 0 out of range");
    check_gguf(bytes().header(1, 0).tensor("t", {33}, GGML_TYPE_Q8_0, 0), "not a multiple of the block size");
}

TEST_CASE("gguf: every single-byte corruption of a valid file fails cleanly or parses") {
    bytes w;
    w.header(2, 3).kv_u32("general.alignment", 32);
    w.str("s").i32(GGUF_TYPE_STRING).str("hello");
    w.str("a").i32(GGUF_TYPE_ARRAY).i32(GGUF_TYPE_STRING).u64(2).str("x").str("yz");
    w.tensor("w", {4, 2}, GGML_TYPE_F32, 0).tensor("q", {32}, GGML_TYPE_Q8_0, 32).pad(32);
    w.b.resize(w.b.size() + 32 + 34);
    REQUIRE(gguf_err(w.b) == "");
    int n_fail = 0;
    for (size_t i = 0; i < w.b.size(); ++i) {
        for (uint8_t v : {0x00, 0x01, 0x7f, 0x80, 0xff}) {
            std::vector<uint8_t> c = w.b;
            if (c[i] == v) continue;
            c[i] = v;
            const std::string err = gguf_err(c);  // under ASan: any over-read aborts the test
            if (!err.empty()) {
                ++n_fail;
                CHECK(err.find('\n') == std::string::npos);
            }
        }
        std::vector<uint8_t> cut(w.b.begin(), w.b.begin() + (ptrdiff_t) i);
        CHECK(!gguf_err(cut).empty());  // every truncation fails
    }
    CHECK(n_fail > 100);
}

// =================================================================================================
// vocab (llm_vocab_load)
// =================================================================================================

TEST_CASE("vocab: the good vocab loads") {
    CHECK(vocab_err([](gguf_context *) {}) == "");
}

TEST_CASE("vocab: token_type / scores arrays shorter than tokens") {
    check_vocab([](gguf_context * g) {
        const int32_t t[2] = {1, 1};
        gguf_set_arr_data(g, "tokenizer.ggml.token_type", GGUF_TYPE_INT32, t, 2);
    }, "tokenizer.ggml.token_type has 2 elements, expected 6");
    check_vocab([](gguf_context * g) { gguf_set_arr_data(g, "tokenizer.ggml.scores", GGUF_TYPE_FLOAT32, nullptr, 0); },
                "tokenizer.ggml.scores has 0 elements");
}

TEST_CASE("vocab: special token ids out of range") {
    check_vocab([](gguf_context * g) { gguf_set_val_u32(g, "tokenizer.ggml.bos_token_id", 999999); },
                "tokenizer.ggml.bos_token_id = 999999 is out of range");
    check_vocab([](gguf_context * g) { gguf_set_val_i32(g, "tokenizer.ggml.eos_token_id", -2); },
                "tokenizer.ggml.eos_token_id = -2 is out of range");
    check_vocab([](gguf_context * g) { gguf_set_val_u64(g, "tokenizer.ggml.bos_token_id", UINT64_MAX); },
                "tokenizer.ggml.bos_token_id");
    check_vocab([](gguf_context * g) { gguf_set_val_str(g, "tokenizer.ggml.bos_token_id", "1"); },
                "tokenizer.ggml.bos_token_id has type str, expected an integer");
}

TEST_CASE("vocab: out-of-range optional ids and token types are ignored; tokens stay valid") {
    gguf_context * g = gguf_init_empty();
    set_good_vocab(g, {"<unk>", "<s>", "</s>", "a"});  // no byte tokens at all
    gguf_set_val_u32(g, "tokenizer.ggml.unknown_token_id", 123456);
    gguf_set_val_u32(g, "tokenizer.ggml.eot_token_id", 77777);
    const int32_t types[4] = {1000, -5, 3, 1};
    gguf_set_arr_data(g, "tokenizer.ggml.token_type", GGUF_TYPE_INT32, types, 4);
    llm_vocab v;
    std::string err;
    REQUIRE(llm_vocab_load(v, g, &err));
    gguf_free(g);
    for (const char * text : {"a \xc3\xa9 \xff\xfe z", "<s></s><unk>", ""}) {
        for (bool special : {false, true}) {
            for (int32_t id : llm_tokenize(v, text, true, special)) CHECK(v.valid_id(id));
        }
    }
    CHECK(llm_detokenize(v, {-1, 4, 1 << 30, INT32_MIN, 3}) == "a");
    CHECK(llm_token_to_piece(v, 99, true) == "");
}

TEST_CASE("vocab: merges referring to unknown tokens, malformed merges") {
    auto bpe = [](std::vector<const char *> merges) {
        return [merges](gguf_context * g) {
            gguf_set_val_str(g, "tokenizer.ggml.model", "gpt2");
            gguf_set_arr_str(g, "tokenizer.ggml.merges", const_cast<const char **>(merges.data()), merges.size());
        };
    };
    CHECK(vocab_err(bpe({"a b"})) == "");
    check_vocab(bpe({"a b", "a zz"}), "tokenizer.ggml.merges[1] 'a zz' refers to unknown token 'zz'");
    check_vocab(bpe({"ab"}), "is not two tokens separated by a space");
    check_vocab(bpe({""}), "is not two tokens");
    check_vocab(bpe({" "}), "is not two tokens");
    check_vocab([](gguf_context * g) { gguf_set_val_str(g, "tokenizer.ggml.model", "gpt2"); },
                "tokenizer.ggml.merges is missing");
}

TEST_CASE("vocab: arrays of the wrong type") {
    check_vocab([](gguf_context * g) {
        const char * s[6] = {"1", "2", "3", "4", "5", "6"};
        gguf_set_arr_str(g, "tokenizer.ggml.scores", s, 6);
    }, "tokenizer.ggml.scores is an array of str, expected f32");
    check_vocab([](gguf_context * g) {
        const int32_t ids[6] = {0, 1, 2, 3, 4, 5};
        gguf_set_arr_data(g, "tokenizer.ggml.tokens", GGUF_TYPE_INT32, ids, 6);
    }, "tokenizer.ggml.tokens is an array of i32, expected str");
    check_vocab([](gguf_context * g) { gguf_set_val_str(g, "tokenizer.ggml.tokens", "abc"); },
                "tokenizer.ggml.tokens has type str, expected an array");
    check_vocab([](gguf_context * g) {
        const float t[6] = {1, 1, 1, 1, 1, 1};
        gguf_set_arr_data(g, "tokenizer.ggml.token_type", GGUF_TYPE_FLOAT32, t, 6);
    }, "tokenizer.ggml.token_type is an array of f32, expected i32");
    check_vocab([](gguf_context * g) { gguf_set_val_u32(g, "tokenizer.ggml.model", 1); },
                "tokenizer.ggml.model has type u32, expected string");
}

TEST_CASE("vocab: empty or missing tokens, duplicates, unknown models") {
    check_vocab([](gguf_context * g) {
        gguf_set_arr_str(g, "tokenizer.ggml.tokens", nullptr, 0);
        gguf_remove_key(g, "tokenizer.ggml.scores");
        gguf_remove_key(g, "tokenizer.ggml.token_type");
    }, "tokenizer.ggml.tokens has 0 entries");
    check_vocab([](gguf_context * g) { gguf_remove_key(g, "tokenizer.ggml.tokens"); },
                "tokenizer.ggml.tokens is missing");
    check_vocab([](gguf_context * g) {
        const char * s[6] = {"<unk>", "<s>", "</s>", "a", "a", "b"};
        gguf_set_arr_str(g, "tokenizer.ggml.tokens", s, 6);
    }, "duplicates token 3");
    check_vocab([](gguf_context * g) { gguf_set_val_str(g, "tokenizer.ggml.model", "bert"); },
                "unknown tokenizer model 'bert'");
    check_vocab([](gguf_context * g) {
        gguf_set_val_str(g, "tokenizer.ggml.model", "gpt2");
        gguf_set_val_str(g, "tokenizer.ggml.pre", "qwen9");
    }, "unknown pre-tokenizer 'qwen9'");
}

// =================================================================================================
// model (llm_model_load): hparams that would divide by zero, overflow or index out of range
// =================================================================================================

TEST_CASE("model: the tiny model loads (baseline for the cases below)") {
    tmp_file f("model.gguf");
    CHECK(load_model_err(tiny_model(), f) == "");
}

TEST_CASE("model: head_count 0, negative, not dividing embedding_length; head_count_kv not dividing") {
    check_model(with_kv([](gguf_context * g) { gguf_set_val_u32(g, "llama.attention.head_count", 0); }),
                "llama.attention.head_count' = 0 is out of range");
    check_model(with_kv([](gguf_context * g) { gguf_set_val_i32(g, "llama.attention.head_count", -2); }),
                "llama.attention.head_count' = -2 is out of range");
    check_model(with_kv([](gguf_context * g) { gguf_set_val_u32(g, "llama.attention.head_count", 3); }),
                "embedding_length 8 is not a multiple of head_count 3");
    check_model(with_kv([](gguf_context * g) { gguf_set_val_u32(g, "llama.attention.head_count_kv", 0); }),
                "head_count_kv' = 0 is out of range");
    check_model(with_kv([](gguf_context * g) {
        gguf_set_val_u32(g, "llama.attention.head_count", 4);
        gguf_set_val_u32(g, "llama.attention.head_count_kv", 3);
    }), "head_count 4 is not a multiple of head_count_kv 3");
    check_model(with_kv([](gguf_context * g) { gguf_set_val_u32(g, "llama.attention.head_count_kv", 4); }),
                "head_count 2 is not a multiple of head_count_kv 4");
}

TEST_CASE("model: block_count huge, context_length 0, feed_forward_length 0, embedding_length absurd") {
    check_model(with_kv([](gguf_context * g) { gguf_set_val_u32(g, "llama.block_count", 1000000000); }),
                "llama.block_count' = 1000000000 is out of range");
    check_model(with_kv([](gguf_context * g) { gguf_set_val_u32(g, "llama.block_count", 0); }),
                "llama.block_count' = 0 is out of range");
    check_model(with_kv([](gguf_context * g) { gguf_set_val_u32(g, "llama.context_length", 0); }),
                "llama.context_length' = 0 is out of range");
    check_model(with_kv([](gguf_context * g) { gguf_set_val_u32(g, "llama.feed_forward_length", 0); }),
                "llama.feed_forward_length' = 0 is out of range");
    check_model(with_kv([](gguf_context * g) { gguf_set_val_u64(g, "llama.embedding_length", UINT64_MAX); }),
                "llama.embedding_length");
    check_model(with_kv([](gguf_context * g) { gguf_set_val_i64(g, "llama.embedding_length", INT64_MIN); }),
                "llama.embedding_length");
    check_model(with_kv([](gguf_context * g) { gguf_set_val_str(g, "llama.embedding_length", "8"); }),
                "'llama.embedding_length' has type str, expected an integer");
    check_model(with_kv([](gguf_context * g) { gguf_remove_key(g, "llama.block_count"); }),
                "missing key 'llama.block_count'");
}

TEST_CASE("model: rope.dimension_count odd, larger than head_dim, zero") {
    check_model(with_kv([](gguf_context * g) { gguf_set_val_u32(g, "llama.rope.dimension_count", 3); }),
                "llama.rope.dimension_count 3 is odd");
    check_model(with_kv([](gguf_context * g) { gguf_set_val_u32(g, "llama.rope.dimension_count", 6); }),
                "llama.rope.dimension_count' = 6 is out of range [2, 4]");
    check_model(with_kv([](gguf_context * g) { gguf_set_val_u32(g, "llama.rope.dimension_count", 0); }),
                "llama.rope.dimension_count' = 0 is out of range");
}

TEST_CASE("model: float hparams NaN / zero / negative, bad rope scaling") {
    check_model(with_kv([](gguf_context * g) {
        gguf_set_val_f32(g, "llama.attention.layer_norm_rms_epsilon", std::nanf(""));
    }), "layer_norm_rms_epsilon' is not finite");
    check_model(with_kv([](gguf_context * g) { gguf_set_val_f32(g, "llama.attention.layer_norm_rms_epsilon", -1); }),
                "layer_norm_rms_epsilon must be > 0");
    check_model(with_kv([](gguf_context * g) { gguf_set_val_f32(g, "llama.rope.freq_base", 0); }),
                "llama.rope.freq_base must be > 0");
    check_model(with_kv([](gguf_context * g) {
        gguf_set_val_str(g, "llama.rope.scaling.type", "linear");
        gguf_set_val_f32(g, "llama.rope.scaling.factor", 0);
    }), "llama.rope.scaling.factor 0 must be > 0");
    check_model(with_kv([](gguf_context * g) { gguf_set_val_str(g, "llama.rope.scaling.type", "yarn"); }),
                "llama.rope.scaling.type 'yarn' is not supported");
}

TEST_CASE("model: architecture unknown or of the wrong type") {
    check_model(with_kv([](gguf_context * g) { gguf_set_val_str(g, "general.architecture", "gpt-neox"); }),
                "unknown architecture 'gpt-neox'");
    check_model(with_kv([](gguf_context * g) { gguf_set_val_u32(g, "general.architecture", 1); }),
                "'general.architecture' has type u32, expected a string");
    check_model(with_kv([](gguf_context * g) { gguf_remove_key(g, "general.architecture"); }),
                "missing key 'general.architecture'");
}

TEST_CASE("model: vocab errors in a model file (bos 999999, int tokens) name the file") {
    check_model(with_kv([](gguf_context * g) { gguf_set_val_u32(g, "tokenizer.ggml.bos_token_id", 999999); }),
                "tokenizer.ggml.bos_token_id = 999999 is out of range (n_vocab = 8)");
    check_model(with_kv([](gguf_context * g) {
        const int32_t ids[8] = {0, 1, 2, 3, 4, 5, 6, 7};
        gguf_set_arr_data(g, "tokenizer.ggml.tokens", GGUF_TYPE_INT32, ids, 8);
    }), "tokenizer.ggml.tokens is an array of i32, expected str");
}

TEST_CASE("model: tensor shapes and types that disagree with the hparams") {
    tiny_model s;
    s.edit_tensor = [](const std::string & n, ggml_type &, std::vector<int64_t> & ne) {
        if (n == "blk.0.attn_k.weight") ne = {8, 8};  // n_head_kv = 1 needs [8, 4]
    };
    check_model(s, "tensor 'blk.0.attn_k.weight' has shape [8, 8], expected [8, 4]");
    s.edit_tensor = [](const std::string & n, ggml_type &, std::vector<int64_t> & ne) {
        if (n == "token_embd.weight") ne = {8, 9};  // one row more than the vocab
    };
    check_model(s, "tensor 'token_embd.weight' has shape [8, 9], expected [8, 8]");
    s.edit_tensor = [](const std::string & n, ggml_type & t, std::vector<int64_t> &) {
        if (n == "blk.0.ffn_norm.weight") t = GGML_TYPE_F16;
    };
    check_model(s, "tensor 'blk.0.ffn_norm.weight' has unsupported type f16");
    s.edit_tensor = [](const std::string & n, ggml_type &, std::vector<int64_t> & ne) {
        if (n == "output_norm.weight") ne = {8, 1, 1, 2};
    };
    check_model(s, "tensor 'output_norm.weight' has shape");
    tiny_model two;
    two.edit_kv = [](gguf_context * g) { gguf_set_val_u32(g, "llama.block_count", 2); };  // blk.1.* absent
    check_model(two, "missing tensor 'blk.1.attn_norm.weight'");
}

TEST_CASE("model: files that are not models") {
    tmp_file f("x.gguf");
    std::string err;
    llm_model_params mp;
    CHECK(llm_model_load(f.path.c_str(), mp, &err) == nullptr);
    check_one_line(err, "cannot open", f.path.c_str());
    std::filesystem::create_directories(f.path);  // a directory
    CHECK(llm_model_load(f.path.c_str(), mp, &err) == nullptr);
    check_one_line(err, "not a regular file", f.path.c_str());
    std::filesystem::remove(f.path);
    FILE * fp = fopen(f.path.c_str(), "wb");
    REQUIRE(fp);
    fputs("#!/bin/sh\necho not a model\n", fp);
    fclose(fp);
    CHECK(llm_model_load(f.path.c_str(), mp, &err) == nullptr);
    check_one_line(err, "not a GGUF file", f.path.c_str());
}

// =================================================================================================
// command line (llm_cli_parse): fuzz_args findings
// =================================================================================================

// fuzz_args crash-a062b291 (minimized): an argument holding a newline made a two-line error message
// ("unknown argument 'x.llo#\n...'"). Control bytes from argv are now shown as \xNN.
TEST_CASE("args: control bytes in arguments do not break the one-line error") {
    static const uint8_t crash[] = {0x2d, 0x6d, 0x00, 0x1f, 0x00, 0x78, 0x2e, 0x6c, 0x6c, 0x6f, 0x23, 0x0a,
                                    0xd3, 0x91, 0xff, 0xce, 0xcb, 0xc6, 0xff, 0xad, 0x63, 0xff, 0x00, 0x00,
                                    0x00, 0x1f, 0x00, 0x78, 0x2e, 0x04, 0x67, 0x32, 0x32, 0x67, 0x45};
    std::vector<std::string> parts = {"main"};
    std::string cur;
    for (uint8_t c : crash) {
        if (c == 0) {
            parts.push_back(cur);
            cur.clear();
        } else {
            cur.push_back((char) c);
        }
    }
    parts.push_back(cur);
    std::vector<const char *> argv;
    for (const auto & p : parts) argv.push_back(p.c_str());
    llm_cli_params p;
    std::string err;
    CHECK_FALSE(llm_cli_parse((int) argv.size(), argv.data(), p, &err));
    check_one_line(err, "unknown argument: x.llo#\\x0a");

    const char * argv2[] = {"main", "-n", "1\n2", "--temp", "\x1b[31m"};
    CHECK_FALSE(llm_cli_parse(3, argv2, p, &err));
    check_one_line(err, "invalid integer '1\\x0a2' for -n");
    const char * argv3[] = {"main", "--temp", "\x1b[31m"};
    CHECK_FALSE(llm_cli_parse(3, argv3, p, &err));
    check_one_line(err, "invalid number '\\x1b[31m' for --temp");
}
