// test_quant_vectors.cpp - the reference quantizers and dequantizers of q4_0 .. q5_1, q8_0 and
// the K-quants against llama.cpp: (1) dequantized tensors hash to llama.cpp's f32 sha256 for
// every tensor of the shared quant vectors; (2) quantizing kq-f16 with our reference code gives
// llama.cpp's bytes; (3) round trips on random data stay within per-type error bounds and
// requantizing is stable; (4) corrupt blocks decode without crashing.
//
// Parts 1-2 read LLM_SHARED/models/quant-vectors (README.md there) and are SKIPPED without it.
#include "ggml-impl.h"
#include "gguf.h"
#include "sha256.h"
#include "test_util.h"

#include <cmath>
#include <cstring>
#include "doctest_cstr.h"
#include <fstream>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>
#include <random>
#include <set>
#include <string>
#include <vector>

namespace {

const char * k_vectors_dir = "models/quant-vectors";

// The types whose reference code this test covers (q8_K only in the round trips: no file holds it).
const ggml_type k_file_types[] = {GGML_TYPE_Q4_0, GGML_TYPE_Q4_1, GGML_TYPE_Q5_0, GGML_TYPE_Q5_1, GGML_TYPE_Q8_0,
                                  GGML_TYPE_Q2_K, GGML_TYPE_Q3_K, GGML_TYPE_Q4_K, GGML_TYPE_Q5_K, GGML_TYPE_Q6_K};

// The parsed reference.json, or null when the vectors are missing.
nlohmann::json load_reference() {
    const std::string path = llm_shared_path(std::string(k_vectors_dir) + "/reference.json");
    std::ifstream f(path);
    if (!f.good()) return nullptr;
    return nlohmann::json::parse(f);
}

// A read GGUF (tensor data in the read-only mapping).
struct gguf_file {
    gguf_context * g = nullptr;
    std::string err;
    explicit gguf_file(const std::string & name) {
        const std::string path = llm_shared_path(std::string(k_vectors_dir) + "/" + name);
        g = gguf_init_from_file(path.c_str(), {/*no_alloc=*/true, nullptr}, &err);
    }
    ~gguf_file() { gguf_free(g); }
    gguf_file(const gguf_file &) = delete;
    gguf_file & operator=(const gguf_file &) = delete;

    int64_t ne(int64_t id, int d) const { return gguf_get_tensor_ne(g, id, d); }
    int64_t n_elements(int64_t id) const { return ne(id, 0) * ne(id, 1); }
};

// A 2-D tensor of any type with a to_float, as f32 (row-major).
std::vector<float> tensor_f32(const gguf_file & f, int64_t id) {
    const ggml_type type = gguf_get_tensor_type(f.g, id);
    const ggml_type_traits * tt = ggml_get_type_traits(type);
    REQUIRE_MESSAGE((tt->to_float != nullptr), ggml_type_name(type) << " has no to_float");
    std::vector<float> out((size_t)f.n_elements(id));
    tt->to_float(gguf_get_tensor_data(f.g, id), out.data(), (int64_t)out.size());
    return out;
}

double rmse(const float * a, const float * b, size_t n) {
    double s = 0;
    for (size_t i = 0; i < n; ++i) {
        const double d = (double)a[i] - (double)b[i];
        s += d * d;
    }
    return n ? std::sqrt(s / (double)n) : 0.0;
}

double rms(const float * a, size_t n) {
    double s = 0;
    for (size_t i = 0; i < n; ++i)
        s += (double)a[i] * a[i];
    return n ? std::sqrt(s / (double)n) : 0.0;
}

// quantize n values with the type's reference quantizer, then dequantize
std::vector<uint8_t> quantize(ggml_type type, const float * x, int64_t n) {
    std::vector<uint8_t> q(ggml_row_size(type, n), 0xAB); // poisoned
    ggml_get_type_traits(type)->from_float_ref(x, q.data(), n);
    return q;
}

std::vector<float> dequantize(ggml_type type, const std::vector<uint8_t> & q, int64_t n) {
    std::vector<float> y((size_t)n, std::numeric_limits<float>::quiet_NaN()); // poisoned
    ggml_get_type_traits(type)->to_float(q.data(), y.data(), n);
    return y;
}

} // namespace

TEST_CASE("sha256: FIPS 180-4 examples") {
    CHECK(sha256::of("", 0) == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
    CHECK(sha256::of("abc", 3) == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    const std::string two_blocks = "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq";
    CHECK(sha256::of(two_blocks.data(), two_blocks.size()) ==
          "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
    // a million 'a', fed in odd-sized pieces (exercises the buffering)
    sha256 h;
    const std::string a(997, 'a');
    size_t left = 1000000;
    while (left > 0) {
        const size_t n = left < a.size() ? left : a.size();
        h.update(a.data(), n);
        left -= n;
    }
    CHECK(h.hex() == "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

TEST_CASE("type traits: every quant type has a reference quantizer and dequantizer") {
    struct geometry {
        ggml_type type;
        const char * name;
        int64_t blck;
        size_t size;
    };
    const geometry g[] = {
        {GGML_TYPE_Q4_0, "q4_0", 32, 18},   {GGML_TYPE_Q4_1, "q4_1", 32, 20},   {GGML_TYPE_Q5_0, "q5_0", 32, 22},
        {GGML_TYPE_Q5_1, "q5_1", 32, 24},   {GGML_TYPE_Q8_0, "q8_0", 32, 34},   {GGML_TYPE_Q2_K, "q2_K", 256, 84},
        {GGML_TYPE_Q3_K, "q3_K", 256, 110}, {GGML_TYPE_Q4_K, "q4_K", 256, 144}, {GGML_TYPE_Q5_K, "q5_K", 256, 176},
        {GGML_TYPE_Q6_K, "q6_K", 256, 210}, {GGML_TYPE_Q8_K, "q8_K", 256, 292},
    };
    for (const geometry & e : g) {
        CAPTURE(e.name);
        const ggml_type_traits * tt = ggml_get_type_traits(e.type);
        CHECK(std::string(ggml_type_name(e.type)) == e.name);
        CHECK(tt->blck_size == e.blck);
        CHECK(tt->type_size == e.size);
        CHECK(tt->is_quantized);
        CHECK(tt->supported);
        CHECK(ggml_type_is_valid(e.type));
        CHECK((tt->to_float != nullptr));
        CHECK((tt->from_float_ref != nullptr));
    }
}

// ---- 1. dequantization against llama.cpp's hashes ------------------------------------------------

TEST_CASE("dequantization: every tensor of the quant vectors hashes to llama.cpp's f32") {
    const nlohmann::json ref = load_reference();
    if (ref.is_null()) {
        MESSAGE("SKIPPED: " << llm_shared_path(k_vectors_dir) << "/reference.json not found");
        return;
    }
    std::set<ggml_type> types_seen;
    int n_checked = 0;
    for (const auto & model : ref.at("model").items()) {
        const nlohmann::json & entry = model.value();
        if (!entry.contains("f32_sha256")) continue;
        const std::string file = entry.at("file");
        gguf_file f(file);
        REQUIRE_MESSAGE(f.g != nullptr, f.err);
        std::string table;
        for (const auto & item : entry.at("f32_sha256").items()) {
            const std::string name = item.key();
            const std::string want = item.value().get<std::string>();
            CAPTURE(file);
            CAPTURE(name);
            const int64_t id = gguf_find_tensor(f.g, name.c_str());
            REQUIRE(id >= 0);
            REQUIRE(gguf_get_tensor_n_dims(f.g, id) == 2);
            const ggml_type type = gguf_get_tensor_type(f.g, id);
            types_seen.insert(type);
            const std::vector<float> y = tensor_f32(f, id);
            const std::string got = sha256::of(y.data(), y.size() * sizeof(float)).substr(0, 16);
            CHECK_MESSAGE(got == want, ggml_type_name(type) << ": sha256 " << got << ", llama.cpp " << want);
            table += " " + name + ":" + ggml_type_name(type) + (got == want ? "" : "(MISMATCH)");
            ++n_checked;
        }
        MESSAGE(file << table);
    }
    CHECK(n_checked >= 80);
    for (ggml_type t : k_file_types) {
        CHECK_MESSAGE(types_seen.count(t) == 1, "no tensor of type " << ggml_type_name(t) << " in the vectors");
    }
}

// ---- 2. quantization against llama.cpp's bytes ---------------------------------------------------

TEST_CASE("quantization: the reference quantizers reproduce llama.cpp's bytes from kq-f16") {
    const nlohmann::json ref = load_reference();
    if (ref.is_null()) {
        MESSAGE("SKIPPED: " << llm_shared_path(k_vectors_dir) << "/reference.json not found");
        return;
    }
    gguf_file src(ref.at("model").at("f16").at("file").get<std::string>());
    REQUIRE_MESSAGE(src.g != nullptr, src.err);
    std::set<ggml_type> types_seen;
    std::map<ggml_type, double> worst_ratio;
    int n_compared = 0;
    for (const auto & model : ref.at("model").items()) {
        const nlohmann::json & entry = model.value();
        if (!entry.contains("f32_sha256")) continue;
        const std::string file = entry.at("file");
        gguf_file f(file);
        REQUIRE_MESSAGE(f.g != nullptr, f.err);
        for (int64_t id = 0; id < gguf_get_n_tensors(f.g); ++id) {
            const ggml_type type = gguf_get_tensor_type(f.g, id);
            if (gguf_get_tensor_n_dims(f.g, id) != 2 || !ggml_is_quantized(type)) continue;
            const std::string name = gguf_get_tensor_name(f.g, id);
            CAPTURE(file);
            CAPTURE(name);
            const std::string type_name = ggml_type_name(type);
            CAPTURE(type_name);
            const int64_t sid = gguf_find_tensor(src.g, name.c_str());
            REQUIRE(sid >= 0);
            REQUIRE(src.ne(sid, 0) == f.ne(id, 0));
            REQUIRE(src.ne(sid, 1) == f.ne(id, 1));
            const std::vector<float> x = tensor_f32(src, sid);
            const int64_t n = (int64_t)x.size();

            const std::vector<uint8_t> ours = quantize(type, x.data(), n);
            const size_t nbytes = gguf_get_tensor_size(f.g, id);
            REQUIRE(ours.size() == nbytes);
            const uint8_t * theirs = (const uint8_t *)gguf_get_tensor_data(f.g, id);
            const size_t bsize = ggml_type_size(type);
            int64_t n_diff_blocks = 0, first_diff = -1;
            for (size_t b = 0; b < nbytes / bsize; ++b) {
                if (std::memcmp(ours.data() + b * bsize, theirs + b * bsize, bsize) != 0) {
                    if (first_diff < 0) first_diff = (int64_t)b;
                    ++n_diff_blocks;
                }
            }
            CHECK_MESSAGE(n_diff_blocks == 0, n_diff_blocks << " of " << nbytes / bsize
                                                            << " blocks differ, the first is block " << first_diff);

            const std::vector<float> y_ours = dequantize(type, ours, n);
            std::vector<float> y_theirs((size_t)n);
            ggml_get_type_traits(type)->to_float(theirs, y_theirs.data(), n);
            const double e_ours = rmse(y_ours.data(), x.data(), x.size());
            const double e_theirs = rmse(y_theirs.data(), x.data(), x.size());
            const double ratio = e_theirs > 0 ? e_ours / e_theirs : (e_ours > 0 ? INFINITY : 1.0);
            CHECK(ratio <= 1.02);
            worst_ratio[type] = std::max(worst_ratio[type], ratio);
            types_seen.insert(type);
            ++n_compared;
        }
    }
    CHECK(n_compared >= 80);
    std::string summary;
    for (const auto & [type, r] : worst_ratio) {
        summary += std::string(" ") + ggml_type_name(type) + ":" + std::to_string(r);
    }
    MESSAGE("worst RMSE(ours)/RMSE(llama.cpp) per type:" << summary);
    for (ggml_type t : k_file_types) {
        CHECK_MESSAGE(types_seen.count(t) == 1, "no tensor of type " << ggml_type_name(t) << " in the vectors");
    }
}

// ---- 3. round trips on random data ---------------------------------------------------------------

namespace {

struct type_bound {
    ggml_type type;
    double gauss;  // bound on RMSE(dequant(quant(x)) - x) / RMS(x): N(0, 1), also U(-1, 1), 2 + U(-1, 1) and
                   // the blocks away from an outlier
    double sparse; // the same for 90% zeros (q2_K/q4_1/q5_1 fit the few nonzero values less well)
};

// Measured with the seeds below, worst of 1, 3 and 7 rows of 1024 (gauss / sparse): q8_0 0.0055 / 0.0025,
// q8_K 0.0069 / 0.0045, q6_K 0.0178 / 0.0059, q5_0 0.0432 / 0.0192, q5_1 0.0382 / 0.0656, q5_K 0.0365 / 0.0358,
// q4_0 0.0861 / 0.0429, q4_1 0.0794 / 0.1134, q4_K 0.0719 / 0.0516, q3_K 0.1529 / 0.0498, q2_K 0.2999 / 0.4257;
// the bounds are ~15% above.
const type_bound k_bounds[] = {
    {GGML_TYPE_Q8_0, 0.0063, 0.0030}, {GGML_TYPE_Q8_K, 0.0080, 0.0052}, {GGML_TYPE_Q6_K, 0.0205, 0.0068},
    {GGML_TYPE_Q5_0, 0.050, 0.022},   {GGML_TYPE_Q5_1, 0.044, 0.075},   {GGML_TYPE_Q5_K, 0.042, 0.041},
    {GGML_TYPE_Q4_0, 0.099, 0.049},   {GGML_TYPE_Q4_1, 0.091, 0.130},   {GGML_TYPE_Q4_K, 0.083, 0.059},
    {GGML_TYPE_Q3_K, 0.176, 0.057},   {GGML_TYPE_Q2_K, 0.345, 0.490},
};

// rows x n_per_row values of a distribution
std::vector<float> make_data(const std::string & dist, int64_t rows, int64_t n_per_row, std::mt19937 & rng) {
    std::vector<float> x((size_t)(rows * n_per_row));
    std::normal_distribution<float> nd(0.0f, 1.0f);
    std::uniform_real_distribution<float> ud(-1.0f, 1.0f);
    if (dist == "gauss") {
        for (float & v : x)
            v = nd(rng);
    } else if (dist == "uniform") {
        for (float & v : x)
            v = ud(rng);
    } else if (dist == "positive") { // all > 0: the mins of q4_1/q5_1/K-quants are used
        for (float & v : x)
            v = 2.0f + ud(rng);
    } else if (dist == "equal") {
        for (float & v : x)
            v = 0.7f;
    } else if (dist == "equal-negative") {
        for (float & v : x)
            v = -1.3f;
    } else if (dist == "zeros") {
        for (float & v : x)
            v = 0.0f;
    } else if (dist == "sparse") { // mostly zeros: whole sub-blocks are zero
        for (float & v : x)
            v = ud(rng) > 0.9f ? nd(rng) : 0.0f;
    } else if (dist == "outlier") { // N(0, 1) with one huge value per row
        for (float & v : x)
            v = nd(rng);
        for (int64_t r = 0; r < rows; ++r)
            x[(size_t)(r * n_per_row + (37 * r + 101) % n_per_row)] = 1000.0f;
    } else {
        FAIL("unknown distribution " << dist);
    }
    return x;
}

} // namespace

TEST_CASE("round trip: dequant(quant(x)) within per-type bounds, odd row counts, row-wise = whole") {
    const int64_t n_per_row = 1024;
    const char * dists[] = {"gauss", "uniform", "positive", "equal", "equal-negative", "zeros", "sparse", "outlier"};
    for (const type_bound & tb : k_bounds) {
        const ggml_type type = tb.type;
        const int64_t blck = ggml_blck_size(type);
        for (const char * dist : dists) {
            for (int64_t rows : {1, 3, 7}) {
                const std::string type_name = ggml_type_name(type);
                CAPTURE(type_name);
                const std::string dist_name = dist;
                CAPTURE(dist_name);
                CAPTURE(rows);
                std::mt19937 rng(1234 + (uint32_t)rows);
                const std::vector<float> x = make_data(dist, rows, n_per_row, rng);
                const int64_t n = (int64_t)x.size();
                const std::vector<uint8_t> q = quantize(type, x.data(), n);
                const std::vector<float> y = dequantize(type, q, n);

                // row by row gives the same bytes as the whole matrix
                const size_t row_bytes = ggml_row_size(type, n_per_row);
                for (int64_t r = 0; r < rows; ++r) {
                    const std::vector<uint8_t> qr = quantize(type, x.data() + r * n_per_row, n_per_row);
                    CHECK(std::memcmp(qr.data(), q.data() + r * row_bytes, row_bytes) == 0);
                }

                bool finite = true;
                for (float v : y)
                    finite = finite && std::isfinite(v);
                REQUIRE(finite);

                const std::string d = dist;
                const double rel = rmse(y.data(), x.data(), x.size()) / std::max(rms(x.data(), x.size()), 1e-30);
                if (d == "gauss" || d == "uniform" || d == "positive") {
                    CHECK(rel <= tb.gauss);
                    if (d == "gauss" && rows == 7) MESSAGE(type_name << " gauss relative RMSE " << rel);
                } else if (d == "sparse") {
                    CHECK(rel <= tb.sparse);
                } else if (d == "equal" || d == "equal-negative") {
                    CHECK(rel <= 1e-3); // a constant is kept up to the rounding of the f16 scales
                } else if (d == "zeros") {
                    for (float v : y)
                        REQUIRE(v == 0.0f);
                } else if (d == "outlier") {
                    // the outlier itself is kept; blocks without it (super-blocks for the K-quants,
                    // whose sub-block scales are relative to the largest one) keep the Gaussian bound
                    for (int64_t r = 0; r < rows; ++r) {
                        const int64_t j = r * n_per_row + (37 * r + 101) % n_per_row;
                        CHECK(std::fabs(y[(size_t)j] - 1000.0f) <= 1000.0f * 1e-3f);
                        std::vector<float> xs, ys;
                        for (int64_t i = r * n_per_row; i < (r + 1) * n_per_row; ++i) {
                            if (i / blck != j / blck) {
                                xs.push_back(x[(size_t)i]);
                                ys.push_back(y[(size_t)i]);
                            }
                        }
                        CHECK(rmse(ys.data(), xs.data(), xs.size()) / rms(xs.data(), xs.size()) <= tb.gauss);
                    }
                }
            }
        }
    }
}

TEST_CASE("round trip: requantizing a dequantized row is stable") {
    // y2 = dequant(quant(y1)) with y1 = dequant(quant(x)): the legacy types give y1 back exactly,
    // the K-quants (whose scale searches see new data) add far less error than the first pass.
    // Measured: q8_K 3e-6, q5_K 0.09, q3_K 0.22, the other K-quants 0.
    const int64_t n = 7 * 1024;
    for (const type_bound & tb : k_bounds) {
        const ggml_type type = tb.type;
        const std::string type_name = ggml_type_name(type);
        CAPTURE(type_name);
        std::mt19937 rng(99);
        const std::vector<float> x = make_data("gauss", 7, 1024, rng);
        const std::vector<uint8_t> q1 = quantize(type, x.data(), n);
        const std::vector<float> y1 = dequantize(type, q1, n);
        const std::vector<uint8_t> q2 = quantize(type, y1.data(), n);
        const std::vector<float> y2 = dequantize(type, q2, n);
        const double e1 = rmse(y1.data(), x.data(), x.size());
        const double e2 = rmse(y2.data(), y1.data(), y1.size());
        size_t same = 0;
        for (size_t i = 0; i < q1.size(); ++i)
            same += q1[i] == q2[i];
        MESSAGE(type_name << ": second pass RMSE / first " << e2 / e1 << ", bytes equal " << 100.0 * same / q1.size()
                          << "%");
        CHECK(e2 <= 0.3 * e1);
        if (ggml_blck_size(type) == 32) CHECK(y1 == y2);
    }
}

TEST_CASE("q8_K: signed max maps to -127, d = -max/127, bsums are the group sums") {
    std::mt19937 rng(7);
    for (float big : {5.0f, -5.0f}) {
        std::vector<float> x = make_data("gauss", 1, 2 * QK_K, rng);
        x[17] = big; // the absmax of super-block 0 (positive or negative)
        block_q8_K q[2];
        quantize_row_q8_K_ref(x.data(), q, 2 * QK_K);
        CHECK(q[0].qs[17] == -127);
        CHECK(q[0].d == 1.0f / (-127.f / big));
        for (const block_q8_K & b : q) {
            for (int g = 0; g < QK_K / 16; ++g) {
                int s = 0;
                for (int i = 0; i < 16; ++i) {
                    s += b.qs[16 * g + i];
                    CHECK(b.qs[16 * g + i] >= -127);
                }
                CHECK(b.bsums[g] == s);
            }
        }
    }
    // all zero: d = 0, quants and sums 0
    std::vector<float> z(QK_K, 0.0f);
    block_q8_K b;
    std::memset(&b, 0x5A, sizeof(b));
    quantize_row_q8_K_ref(z.data(), &b, QK_K);
    CHECK(b.d == 0.0f);
    for (int i = 0; i < QK_K; ++i)
        CHECK(b.qs[i] == 0);
    for (int g = 0; g < QK_K / 16; ++g)
        CHECK(b.bsums[g] == 0);
}

// ---- 4. corrupt blocks ---------------------------------------------------------------------------

TEST_CASE("corrupt blocks (NaN/Inf f16 scales, all-0xFF bytes) dequantize without crashing") {
    const ggml_fp16_t k_nan = 0x7E00, k_inf = 0x7C00, k_ninf = 0xFC00;
    for (const type_bound & tb : k_bounds) {
        const ggml_type type = tb.type;
        const std::string type_name = ggml_type_name(type);
        CAPTURE(type_name);
        const int64_t blck = ggml_blck_size(type);
        const size_t bsize = ggml_type_size(type);

        // all 0xFF: every f16 (and q8_K's f32) scale is a NaN, so every output is NaN
        std::vector<uint8_t> ff(2 * bsize, 0xFF);
        std::vector<float> y = dequantize(type, ff, 2 * blck);
        for (float v : y)
            REQUIRE(std::isnan(v));

        // a valid block whose first f16 scale is NaN / +Inf / -Inf: some output is not finite
        std::mt19937 rng(5);
        const std::vector<float> x = make_data("gauss", 1, blck, rng);
        for (ggml_fp16_t bad : {k_nan, k_inf, k_ninf}) {
            std::vector<uint8_t> q = quantize(type, x.data(), blck);
            size_t off = 0; // offset of the (first) f16 scale
            switch (type) {
                case GGML_TYPE_Q2_K:
                    off = offsetof(block_q2_K, d);
                    break;
                case GGML_TYPE_Q3_K:
                    off = offsetof(block_q3_K, d);
                    break;
                case GGML_TYPE_Q4_K:
                    off = offsetof(block_q4_K, d);
                    break;
                case GGML_TYPE_Q5_K:
                    off = offsetof(block_q5_K, d);
                    break;
                case GGML_TYPE_Q6_K:
                    off = offsetof(block_q6_K, d);
                    break;
                default:
                    off = 0;
                    break; // q4_0 .. q8_0: d first
            }
            if (type == GGML_TYPE_Q8_K) {
                const float f = bad == k_nan ? NAN : bad == k_inf ? INFINITY : -INFINITY;
                std::memcpy(q.data(), &f, sizeof(f));
            } else {
                std::memcpy(q.data() + off, &bad, sizeof(bad));
            }
            y = dequantize(type, q, blck);
            bool any_nonfinite = false;
            for (float v : y)
                any_nonfinite = any_nonfinite || !std::isfinite(v);
            CHECK(any_nonfinite);
        }

        // random bytes never crash and, with finite scales, give finite values
        std::vector<uint8_t> rnd(4 * bsize);
        for (uint8_t & b : rnd)
            b = (uint8_t)rng();
        y = dequantize(type, rnd, 4 * blck);
        CHECK(y.size() == (size_t)(4 * blck));
    }
}
