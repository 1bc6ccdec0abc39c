// test_quantize_tool.cpp - the quantize tool end to end: its files equal llama.cpp's llama-quantize output
// (the shared quant vectors: kq-f16.gguf quantized to ten types by llama.cpp), the per-tensor mixes of
// the _S/_M/_L types on a synthetic 16-layer model, the fallback for rows that do not divide into
// blocks, requantizing, dequantizing to f32 (against llama.cpp's f32 hashes), --dry-run, --pure, and
// the one-line error for an unknown type.
//
// The shared vectors come from LLM_SHARED/models/quant-vectors; those cases are SKIPPED without them, and
// every case is SKIPPED when the tool is not built.
#include "gguf.h"
#include "llm_test_util.h"
#include "sha256.h"
#include "test_util.h"

#include "doctest_cstr.h"
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstring>
#include <fstream>
#include <random>
#include <string>
#include <sys/stat.h>
#include <sys/wait.h>
#include <vector>

namespace {

const std::string k_tool = std::string(LLM_BINARY_DIR) + "/bin/quantize";

struct tool_result {
    int         rc;
    std::string out;  // stdout and stderr
};

tool_result quantize(const std::string & args) {
    int status = 0;
    tool_result r;
    r.out = run_cmd("'" + k_tool + "' " + args, &status);
    r.rc = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    return r;
}

bool exists(const std::string & path) {
    struct stat st;
    return stat(path.c_str(), &st) == 0;
}

std::string vectors_dir() { return llm_shared_path("models/quant-vectors"); }

// the tool is built with the examples (cmake --build BUILD --target quantize)
bool have_tool() {
    if (access(k_tool.c_str(), X_OK) == 0) return true;
    MESSAGE("SKIP: " << k_tool << " not built (cmake --build <build dir> --target quantize)");
    return false;
}

bool have_vectors() {
    if (!have_tool()) return false;
    if (exists(vectors_dir() + "/kq-f16.gguf")) return true;
    MESSAGE("SKIP: " << vectors_dir() << " not found (set LLM_SHARED)");
    return false;
}

std::string read_file(const std::string & path) {
    std::ifstream f(path, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
}

// A GGUF opened for reading; tensors looked up by name.
struct gguf_file {
    gguf_context * g = nullptr;
    std::string    err;
    explicit gguf_file(const std::string & path) { g = gguf_init_from_file(path.c_str(), {true, nullptr}, &err); }
    ~gguf_file() { gguf_free(g); }
    int64_t id(const std::string & name) const { return gguf_find_tensor(g, name.c_str()); }
    ggml_type type(const std::string & name) const { return gguf_get_tensor_type(g, id(name)); }
    std::string data(const std::string & name) const {
        const int64_t i = id(name);
        return std::string((const char *) gguf_get_tensor_data(g, i), gguf_get_tensor_size(g, i));
    }
    int64_t file_type() const {
        const int64_t k = gguf_find_key(g, "general.file_type");
        return k < 0 ? -1 : (int64_t) gguf_get_val_u32(g, k);
    }
};

// rows of f32 values, fresh random data per seed
std::vector<float> random_rows(int64_t n, uint32_t seed) {
    std::mt19937 rng(seed);
    std::normal_distribution<float> dist(0.0f, 0.5f);
    std::vector<float> v(n);
    for (float & x : v) x = dist(rng);
    return v;
}

// A small llama-arch GGUF with f32 tensors of the given shapes ([ne0, ne1]) and hyperparameters.
struct synth_tensor {
    std::string name;
    int64_t     ne0, ne1;  // ne1 == 0: 1-D
};

void write_synthetic(const std::string & path, const std::vector<synth_tensor> & ts, int n_layer, int n_head,
                     int n_head_kv, uint32_t seed) {
    size_t bytes = 0;
    for (const auto & t : ts) bytes += (size_t) (t.ne0 * std::max<int64_t>(1, t.ne1)) * sizeof(float) + 256;
    ggml_context * ctx = ggml_init({bytes + (ts.size() + 1) * ggml_tensor_overhead(), nullptr, false});
    gguf_context * g = gguf_init_empty();
    gguf_set_val_str(g, "general.architecture", "llama");
    gguf_set_val_u32(g, "llama.block_count", (uint32_t) n_layer);
    gguf_set_val_u32(g, "llama.attention.head_count", (uint32_t) n_head);
    gguf_set_val_u32(g, "llama.attention.head_count_kv", (uint32_t) n_head_kv);
    uint32_t s = seed;
    for (const auto & t : ts) {
        ggml_tensor * x = t.ne1 ? ggml_new_tensor_2d(ctx, GGML_TYPE_F32, t.ne0, t.ne1)
                                : ggml_new_tensor_1d(ctx, GGML_TYPE_F32, t.ne0);
        ggml_set_name(x, t.name.c_str());
        const std::vector<float> v = random_rows(ggml_nelements(x), s++);
        memcpy(x->data, v.data(), v.size() * sizeof(float));
        gguf_add_tensor(g, x);
    }
    std::string err;
    REQUIRE_MESSAGE(gguf_write_to_file(g, path.c_str(), false, &err), err);
    gguf_free(g);
    ggml_free(ctx);
}

// the tensors of an n-layer llama, each matrix [256, 4] (one row block of every K-quant, tiny)
std::vector<synth_tensor> llama_layers(int n_layer) {
    std::vector<synth_tensor> ts = {{"token_embd.weight", 256, 8}, {"output_norm.weight", 256, 0},
                                    {"output.weight", 256, 8}};
    for (int il = 0; il < n_layer; ++il) {
        const std::string p = "blk." + std::to_string(il) + ".";
        for (const char * n : {"attn_q", "attn_k", "attn_v", "attn_output", "ffn_gate", "ffn_up", "ffn_down"}) {
            ts.push_back({p + n + ".weight", 256, 4});
        }
        ts.push_back({p + "attn_norm.weight", 256, 0});
        ts.push_back({p + "ffn_norm.weight", 256, 0});
    }
    return ts;
}

std::string blk(int il, const char * name) { return "blk." + std::to_string(il) + "." + name + ".weight"; }

bool use_more_bits(int i, int n) { return i < n / 8 || i >= 7 * n / 8 || (i - n / 8) % 3 == 2; }

const char * const k_types[] = {"Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q8_0", "Q2_K", "Q3_K_M", "Q4_K_M", "Q5_K_M", "Q6_K"};

}  // namespace

TEST_CASE("quantize kq-f16 to every type: the tensor types, bytes and whole file equal llama-quantize's") {
    if (!have_vectors()) return;
    const std::string dir = vectors_dir();
    for (const char * type : k_types) {
        CAPTURE(type);
        const std::string out = tmp().path + "/kq-" + type + ".gguf";
        const tool_result r = quantize("'" + dir + "/kq-f16.gguf' '" + out + "' " + type + " 2");
        INFO(r.out);
        REQUIRE(r.rc == 0);
        gguf_file ours(out), ref(dir + "/kq-" + type + ".gguf");
        REQUIRE_MESSAGE(ours.g, ours.err);
        REQUIRE_MESSAGE(ref.g, ref.err);
        REQUIRE(gguf_get_n_tensors(ours.g) == gguf_get_n_tensors(ref.g));
        CHECK(ours.file_type() == ref.file_type());
        int n_same = 0;
        for (int64_t i = 0; i < gguf_get_n_tensors(ref.g); ++i) {
            const std::string name = gguf_get_tensor_name(ref.g, i);
            CAPTURE(name);
            REQUIRE(ours.id(name) >= 0);
            CHECK(ggml_type_name(ours.type(name)) == std::string(ggml_type_name(ref.type(name))));  // the mix
            const bool same = ours.data(name) == ref.data(name);
            CHECK(same);
            n_same += same;
        }
        CHECK(n_same == 12);
        CHECK(read_file(out) == read_file(dir + "/kq-" + type + ".gguf"));  // metadata and order too
    }
}

TEST_CASE("dequantize every kq file to f32: each tensor hashes to llama.cpp's f32 data") {
    if (!have_vectors()) return;
    std::ifstream jf(vectors_dir() + "/reference.json");
    REQUIRE(jf.good());
    const nlohmann::json ref = nlohmann::json::parse(jf);
    int n_checked = 0;
    for (const auto & [name, m] : ref.at("model").items()) {
        if (!m.contains("f32_sha256")) continue;
        CAPTURE(name);
        const std::string out = tmp().path + "/deq-" + name + ".gguf";
        const tool_result r = quantize("'" + vectors_dir() + "/" + m.at("file").get<std::string>() + "' '" + out + "' f32");
        INFO(r.out);
        REQUIRE(r.rc == 0);
        gguf_file f(out);
        REQUIRE_MESSAGE(f.g, f.err);
        CHECK(f.file_type() == 0);
        for (const auto & [tname, hash] : m.at("f32_sha256").items()) {
            CAPTURE(tname);
            REQUIRE(f.id(tname) >= 0);
            CHECK(f.type(tname) == GGML_TYPE_F32);
            const std::string d = f.data(tname);
            sha256 h;
            h.update(d.data(), d.size());
            CHECK(h.hex().substr(0, 16) == hash.get<std::string>());
            ++n_checked;
        }
    }
    CHECK(n_checked == 90);
}

TEST_CASE("requantize q8_0 -> q4_0: works, warns, and equals q4_0 of the dequantized q8_0 data") {
    if (!have_vectors()) return;
    const std::string in = vectors_dir() + "/kq-Q8_0.gguf", out = tmp().path + "/req-q4_0.gguf";
    const tool_result r = quantize("'" + in + "' '" + out + "' q4_0");
    INFO(r.out);
    REQUIRE(r.rc == 0);
    CHECK(r.out.find("warning: the input is already quantized (q8_0)") != std::string::npos);
    CHECK(r.out.find("requantized through f32") != std::string::npos);
    CHECK(r.out.find("error") == std::string::npos);
    gguf_file src(in), dst(out);
    REQUIRE(dst.g);
    CHECK(dst.type("blk.0.ffn_up.weight") == GGML_TYPE_Q4_0);
    CHECK(dst.type("output.weight") == GGML_TYPE_Q6_K);
    CHECK(dst.type("output_norm.weight") == GGML_TYPE_F32);
    // the bytes: q8_0 -> f32 -> q4_0 through the reference code
    const std::string q8 = src.data("blk.0.ffn_up.weight");
    const int64_t n = (int64_t) (q8.size() / sizeof(block_q8_0)) * QK8_0;
    std::vector<float> f(n);
    dequantize_row_q8_0((const block_q8_0 *) q8.data(), f.data(), n);
    std::vector<block_q4_0> q4(n / QK4_0);
    quantize_row_q4_0_ref(f.data(), q4.data(), n);
    CHECK(dst.data("blk.0.ffn_up.weight") == std::string((const char *) q4.data(), q4.size() * sizeof(block_q4_0)));
    // the same file again with --allow-requantize (accepted as in llama-quantize): the same bytes
    const std::string out2 = tmp().path + "/req-q4_0-allow.gguf";
    REQUIRE(quantize("--allow-requantize '" + in + "' '" + out2 + "' Q4_0").rc == 0);
    CHECK(read_file(out2) == read_file(out));
}

TEST_CASE("rows that are not a multiple of the block fall back to a smaller block, and say so") {
    if (!have_tool()) return;
    const std::string in = tmp().path + "/ne96.gguf";
    write_synthetic(in,
                    {{"token_embd.weight", 256, 8},
                     {"blk.0.attn_q.weight", 96, 16},     // q4_K -> q5_0 (96 = 3 x 32)
                     {"blk.0.attn_k.weight", 48, 16},     // q4_K -> q5_0 does not divide either -> f16
                     {"blk.0.attn_v.weight", 96, 16},     // Q4_K_M, 1 layer: q6_K -> q8_0
                     {"blk.0.attn_norm.weight", 96, 0},   // 1-D: stays f32
                     {"blk.0.ffn_down.weight", 256, 16},  // q6_K (use_more_bits)
                     {"output.weight", 96, 8}},           // q6_K -> q8_0
                    1, 4, 4, 7);
    const std::string out = tmp().path + "/ne96-q4_k_m.gguf";
    const tool_result r = quantize("'" + in + "' '" + out + "' q4_k_m 2");
    INFO(r.out);
    REQUIRE(r.rc == 0);
    CHECK(r.out.find("warning: tensor 'blk.0.attn_q.weight': ne[0] = 96 is not a multiple of 256 (the q4_K "
                     "block): using q5_0 instead of q4_K") != std::string::npos);
    CHECK(r.out.find("tensor 'blk.0.attn_k.weight': ne[0] = 48 is not a multiple of 256 (the q4_K block): using f16")
          != std::string::npos);
    CHECK(r.out.find("tensor 'output.weight': ne[0] = 96 is not a multiple of 256 (the q6_K block): using q8_0")
          != std::string::npos);
    CHECK(r.out.find("token_embd.weight': ne[0]") == std::string::npos);  // 256 divides: no warning
    gguf_file f(out), src(in);
    REQUIRE_MESSAGE(f.g, f.err);
    CHECK(f.type("token_embd.weight") == GGML_TYPE_Q4_K);
    CHECK(f.type("blk.0.attn_q.weight") == GGML_TYPE_Q5_0);
    CHECK(f.type("blk.0.attn_k.weight") == GGML_TYPE_F16);
    CHECK(f.type("blk.0.attn_v.weight") == GGML_TYPE_Q8_0);
    CHECK(f.type("blk.0.attn_norm.weight") == GGML_TYPE_F32);
    CHECK(f.type("blk.0.ffn_down.weight") == GGML_TYPE_Q6_K);
    CHECK(f.type("output.weight") == GGML_TYPE_Q8_0);
    // the fallback's bytes are the reference q5_0 of the f32 rows
    const std::string x = src.data("blk.0.attn_q.weight");
    const int64_t n = (int64_t) (x.size() / sizeof(float));
    std::vector<block_q5_0> q(n / QK5_0);
    quantize_row_q5_0_ref((const float *) x.data(), q.data(), n);
    CHECK(f.data("blk.0.attn_q.weight") == std::string((const char *) q.data(), q.size() * sizeof(block_q5_0)));

    // Q2_K: q2_K/q3_K rows fall back to q4_0 (llama.cpp's iq4_nl has the same block; this library lacks it)
    const std::string out2 = tmp().path + "/ne96-q2_k.gguf";
    const tool_result r2 = quantize("'" + in + "' '" + out2 + "' Q2_K");
    INFO(r2.out);
    REQUIRE(r2.rc == 0);
    gguf_file f2(out2);
    REQUIRE(f2.g);
    CHECK(f2.type("blk.0.attn_q.weight") == GGML_TYPE_Q4_0);
    CHECK(f2.type("blk.0.attn_v.weight") == GGML_TYPE_Q4_0);  // q3_K (gqa 1) -> q4_0
    CHECK(f2.type("blk.0.ffn_down.weight") == GGML_TYPE_Q3_K);
    CHECK(r2.out.find("using q4_0 instead of q3_K") != std::string::npos);
}

TEST_CASE("the _S/_M/_L mixes on a 16-layer model follow llama.cpp's rules") {
    if (!have_tool()) return;
    const int n = 16;
    const std::string in = tmp().path + "/l16.gguf";
    write_synthetic(in, llama_layers(n), n, 8, 2, 11);  // gqa 4
    auto run = [&](const std::string & type, const std::string & flags = "") {
        const std::string out = tmp().path + "/l16-" + type + (flags.empty() ? "" : "-pure") + ".gguf";
        const tool_result r = quantize(flags + " '" + in + "' '" + out + "' " + type + " 2");
        INFO(r.out);
        REQUIRE(r.rc == 0);
        return out;
    };
    {
        gguf_file f(run("Q3_K_S"));
        CHECK(f.file_type() == 11);
        CHECK(f.type("output.weight") == GGML_TYPE_Q6_K);
        CHECK(f.type("token_embd.weight") == GGML_TYPE_Q3_K);
        for (int il = 0; il < n; ++il) {
            for (const char * t : {"attn_v", "ffn_down", "attn_output", "attn_q"}) CHECK(f.type(blk(il, t)) == GGML_TYPE_Q3_K);
        }
    }
    {
        gguf_file f(run("q3_k"));  // = Q3_K_M
        CHECK(f.file_type() == 12);
        for (int il = 0; il < n; ++il) {
            CAPTURE(il);
            CHECK(f.type(blk(il, "attn_v")) == (il < 2 ? GGML_TYPE_Q5_K : GGML_TYPE_Q4_K));
            CHECK(f.type(blk(il, "ffn_down")) == (il < n / 16 ? GGML_TYPE_Q5_K : GGML_TYPE_Q4_K));
            CHECK(f.type(blk(il, "attn_output")) == GGML_TYPE_Q4_K);
            CHECK(f.type(blk(il, "ffn_up")) == GGML_TYPE_Q3_K);
        }
    }
    {
        gguf_file f(run("Q3_K_L"));
        CHECK(f.file_type() == 13);
        for (int il = 0; il < n; ++il) {
            for (const char * t : {"attn_v", "ffn_down", "attn_output"}) CHECK(f.type(blk(il, t)) == GGML_TYPE_Q5_K);
            CHECK(f.type(blk(il, "attn_k")) == GGML_TYPE_Q3_K);
        }
    }
    {
        gguf_file f(run("Q4_K_S"));
        CHECK(f.file_type() == 14);
        for (int il = 0; il < n; ++il) {
            CAPTURE(il);
            CHECK(f.type(blk(il, "attn_v")) == (il < 4 ? GGML_TYPE_Q5_K : GGML_TYPE_Q4_K));
            CHECK(f.type(blk(il, "ffn_down")) == (il < n / 8 ? GGML_TYPE_Q5_K : GGML_TYPE_Q4_K));
        }
    }
    {
        gguf_file f(run("q4_K"));  // = Q4_K_M
        CHECK(f.file_type() == 15);
        int n_q6 = 0;
        for (int il = 0; il < n; ++il) {
            CAPTURE(il);
            // use_more_bits(i, 16): 0, 1, 4, 7, 10, 13, 14, 15
            const ggml_type want = use_more_bits(il, n) ? GGML_TYPE_Q6_K : GGML_TYPE_Q4_K;
            CHECK(f.type(blk(il, "attn_v")) == want);
            CHECK(f.type(blk(il, "ffn_down")) == want);
            n_q6 += want == GGML_TYPE_Q6_K;
        }
        CHECK(n_q6 == 8);
    }
    {
        gguf_file f(run("Q5_K_S"));
        CHECK(f.file_type() == 16);
        for (int il = 0; il < n; ++il) CHECK(f.type(blk(il, "ffn_down")) == GGML_TYPE_Q5_K);
        CHECK(f.type("output.weight") == GGML_TYPE_Q6_K);
    }
    {
        gguf_file f(run("Q5_K"));  // = Q5_K_M
        CHECK(f.file_type() == 17);
        CHECK(f.type(blk(7, "attn_v")) == GGML_TYPE_Q6_K);
        CHECK(f.type(blk(8, "ffn_down")) == GGML_TYPE_Q5_K);
    }
    {
        gguf_file f(run("Q2_K"));  // gqa 4: attn_v in q4_K
        CHECK(f.file_type() == 10);
        CHECK(f.type(blk(3, "attn_v")) == GGML_TYPE_Q4_K);
        CHECK(f.type(blk(3, "ffn_down")) == GGML_TYPE_Q3_K);
        CHECK(f.type(blk(3, "attn_output")) == GGML_TYPE_Q3_K);
        CHECK(f.type(blk(3, "ffn_gate")) == GGML_TYPE_Q2_K);
    }
    {
        gguf_file f(run("Q4_K_M", "--pure"));  // --pure: every matrix q4_K, output too
        for (int64_t i = 0; i < gguf_get_n_tensors(f.g); ++i) {
            const bool matrix = gguf_get_tensor_n_dims(f.g, i) == 2;
            CHECK(gguf_get_tensor_type(f.g, i) == (matrix ? GGML_TYPE_Q4_K : GGML_TYPE_F32));
        }
    }
    {
        gguf_file f(run("F16"));  // f16 / f32: no mix, output too
        CHECK(f.file_type() == 1);
        CHECK(f.type("output.weight") == GGML_TYPE_F16);
        CHECK(f.type(blk(0, "attn_v")) == GGML_TYPE_F16);
        CHECK(f.type(blk(0, "attn_norm")) == GGML_TYPE_F32);
    }
}

TEST_CASE("a 70B-shaped model (80 layers, GQA 8) gets attn_v in q5_K instead of q3_K/q4_K") {
    if (!have_tool()) return;
    const int n = 80;
    const std::string in = tmp().path + "/l80.gguf";
    std::vector<synth_tensor> ts = {{"token_embd.weight", 256, 4}, {"output.weight", 256, 4}};
    for (int il = 0; il < n; ++il) {
        ts.push_back({blk(il, "attn_v"), 256, 2});
        ts.push_back({blk(il, "ffn_down"), 256, 2});
    }
    write_synthetic(in, ts, n, 64, 8, 3);
    const std::string out = tmp().path + "/l80-q3_k_s.gguf";
    const tool_result r = quantize("'" + in + "' '" + out + "' Q3_K_S");
    INFO(r.out);
    REQUIRE(r.rc == 0);
    gguf_file f(out);
    REQUIRE(f.g);
    for (int il = 0; il < n; il += 13) {
        CHECK(f.type(blk(il, "attn_v")) == GGML_TYPE_Q5_K);
        CHECK(f.type(blk(il, "ffn_down")) == GGML_TYPE_Q3_K);
    }
}

TEST_CASE("--dry-run prints the plan and writes nothing") {
    if (!have_vectors()) return;
    const std::string out = tmp().path + "/dry.gguf";
    const tool_result r = quantize("--dry-run '" + vectors_dir() + "/kq-f16.gguf' '" + out + "' Q4_K_M");
    INFO(r.out);
    REQUIRE(r.rc == 0);
    CHECK(!exists(out));
    CHECK(!exists(out + ".tmp"));
    CHECK(r.out.find("blk.0.attn_v.weight") != std::string::npos);
    CHECK(r.out.find("converting to q6_K") != std::string::npos);
    CHECK(r.out.find("- type q4_K:    6 tensors") != std::string::npos);
    CHECK(r.out.find("- type q6_K:    3 tensors") != std::string::npos);
    CHECK(r.out.find("file type   = Q4_K - Medium") != std::string::npos);
    CHECK(r.out.find("nothing written") != std::string::npos);
    // the output path may be left out
    const tool_result r2 = quantize("--dry-run '" + vectors_dir() + "/kq-f16.gguf' q8_0");
    CHECK(r2.rc == 0);
    CHECK(r2.out.find("- type q8_0:    9 tensors") != std::string::npos);
}

TEST_CASE("an unknown type is one error line listing the valid types, exit 1, no file") {
    if (!have_tool()) return;
    const std::string in = tmp().path + "/tiny.gguf";
    write_synthetic(in, {{"blk.0.attn_q.weight", 256, 2}}, 1, 1, 1, 5);
    for (const char * bad : {"q7_0", "iq2_xxs", "Q4_K_X", "q8"}) {
        CAPTURE(bad);
        const std::string out = tmp().path + "/bad.gguf";
        const tool_result r = quantize("'" + in + "' '" + out + "' " + bad);
        CHECK(r.rc == 1);
        CHECK(r.out.find("error: unknown type '" + std::string(bad) + "'; valid types: Q4_0, Q4_1, Q5_0, Q5_1, Q2_K, "
                         "Q3_K_S, Q3_K_M, Q3_K_L, Q4_K_S, Q4_K_M, Q5_K_S, Q5_K_M, Q6_K, Q8_0, F16, F32\n") == 0);
        CHECK(std::count(r.out.begin(), r.out.end(), '\n') == 1);
        CHECK(!exists(out));
    }
    // the type names are case-insensitive
    const tool_result ok = quantize("--dry-run '" + in + "' q4_k_s");
    CHECK(ok.rc == 0);
}
