// test_gguf.cpp - GGUF read/write: round trips of every KV type and of tensors (file and buffer),
// the real shared model files, and one hand-made corrupt file per validation rule (each must fail
// with its own one-line message, never crash; run under ASan with -DGGML_SANITIZE=ON).
#include "gguf.h"
#include "test_util.h"

#include "doctest_cstr.h"
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <initializer_list>
#include <iterator>
#include <string>
#include <vector>

namespace {

// ---- helpers --------------------------------------------------------------------------------

// Little-endian byte writer for hand-made files.
struct byte_writer {
    std::vector<uint8_t> b;
    template <typename T> byte_writer & put(T v) { return raw(&v, sizeof(T)); }
    byte_writer & u32(uint32_t v) { return put(v); }
    byte_writer & i32(int32_t v) { return put(v); }
    byte_writer & u64(uint64_t v) { return put(v); }
    byte_writer & i64(int64_t v) { return put(v); }
    byte_writer & raw(const void * p, size_t n) {
        const size_t o = b.size();
        b.resize(o + n);
        if (n > 0) {
            std::memcpy(b.data() + o, p, n);
        }
        return *this;
    }
    byte_writer & str(const std::string & s) { return u64(s.size()).raw(s.data(), s.size()); }
    byte_writer & header(uint32_t version, uint64_t n_tensors, uint64_t n_kv) {
        return raw("GGUF", 4).u32(version).u64(n_tensors).u64(n_kv);
    }
    byte_writer & kv_u32(const std::string & key, uint32_t v) { return str(key).i32(GGUF_TYPE_UINT32).u32(v); }
    byte_writer & kv_str(const std::string & key, const std::string & v) {
        return str(key).i32(GGUF_TYPE_STRING).str(v);
    }
    byte_writer & tensor(const std::string & name, std::initializer_list<int64_t> ne, int32_t type, uint64_t off) {
        str(name).u32((uint32_t) ne.size());
        for (int64_t n : ne) {
            i64(n);
        }
        return i32(type).u64(off);
    }
    byte_writer & pad(size_t a) {
        while (b.size() % a) {
            b.push_back(0);
        }
        return *this;
    }
    byte_writer & zeros(size_t n) {
        b.insert(b.end(), n, 0);
        return *this;
    }
};

const gguf_init_params k_no_alloc = {true, nullptr};

// Parse bytes (copied into an exactly-sized heap block, so ASan sees any over-read); "" if it parsed.
std::string parse_err(const std::vector<uint8_t> & bytes, size_t len = SIZE_MAX) {
    len = std::min(len, bytes.size());
    std::vector<uint8_t> exact(bytes.begin(), bytes.begin() + (ptrdiff_t) len);
    ggml_context * meta = (ggml_context *) 0x1;  // must be reset to nullptr on failure
    std::string err;
    gguf_context * g = gguf_init_from_buffer(exact.data(), exact.size(), "corrupt.gguf", {false, &meta}, &err);
    if (g) {
        ggml_free(meta);
        gguf_free(g);
        return "";
    }
    CHECK(meta == nullptr);
    return err;
}

// The error names the file, is one line, says where (an offset) and contains `what`.
void check_err(const std::vector<uint8_t> & bytes, const char * what) {
    const std::string err = parse_err(bytes);
    INFO("error: ", err);
    CHECK(err.find(what) != std::string::npos);
    CHECK(err.rfind("corrupt.gguf: ", 0) == 0);
    CHECK(err.find("offset ") != std::string::npos);
    CHECK(err.find('\n') == std::string::npos);
}

std::vector<uint8_t> read_bytes(const std::string & path) {
    std::ifstream f(path, std::ios::binary);
    return std::vector<uint8_t>(std::istreambuf_iterator<char>(f), {});
}

bool file_exists(const std::string & path) {
    struct stat st;
    return stat(path.c_str(), &st) == 0;
}

// a file under LLM_SHARED, read without its data; nullptr (the case SKIPs) when it is missing
gguf_context * open_shared(const std::string & rel) {
    const std::string path = llm_shared_path(rel);
    if (!file_exists(path)) {
        MESSAGE("SKIPPED: " << path << " not found");
        return nullptr;
    }
    std::string err;
    gguf_context * g = gguf_init_from_file(path.c_str(), k_no_alloc, &err);
    REQUIRE_MESSAGE(g != nullptr, err);
    return g;
}

// A private temp directory for this process, removed at exit.
struct tmp_dir {
    std::string path;
    tmp_dir() {
        char tmpl[] = "/tmp/test_gguf_XXXXXX";
        const char * d = mkdtemp(tmpl);
        path = d ? d : "";
    }
    ~tmp_dir() {
        std::error_code ec;
        if (!path.empty()) {
            std::filesystem::remove_all(path, ec);
        }
    }
};

std::string tmp_path(const char * name) {
    static tmp_dir dir;
    REQUIRE(!dir.path.empty());
    return dir.path + "/" + name;
}

// A context with one KV of every scalar type, arrays of every element type (incl. strings, empty).
gguf_context * make_all_kv() {
    gguf_context * g = gguf_init_empty();
    gguf_set_val_u8(g, "u8", 200);
    gguf_set_val_i8(g, "i8", -100);
    gguf_set_val_u16(g, "u16", 60000);
    gguf_set_val_i16(g, "i16", -30000);
    gguf_set_val_u32(g, "u32", 4000000000u);
    gguf_set_val_i32(g, "i32", -2000000000);
    gguf_set_val_f32(g, "f32", 3.25f);
    gguf_set_val_u64(g, "u64", 0xFEDCBA9876543210ull);
    gguf_set_val_i64(g, "i64", -0x123456789ABCll);
    gguf_set_val_f64(g, "f64", -1e300);
    gguf_set_val_bool(g, "bool", true);
    gguf_set_val_str(g, "str", "hello, gguf");
    gguf_set_val_str(g, "str.empty", "");

    const uint8_t  a_u8[]  = {1, 2, 255};
    const int8_t   a_i8[]  = {-128, 0, 127};
    const uint16_t a_u16[] = {1, 65535};
    const int16_t  a_i16[] = {-32768, 32767, 5};
    const uint32_t a_u32[] = {7, 0xFFFFFFFFu};
    const int32_t  a_i32[] = {-1, 2, -3, 4};
    const float    a_f32[] = {0.5f, -1.5f, 1e-30f};
    const uint8_t  a_bool[] = {1, 0, 1, 1};
    const uint64_t a_u64[] = {0xFFFFFFFFFFFFFFFFull, 3};
    const int64_t  a_i64[] = {INT64_MIN, INT64_MAX};
    const double   a_f64[] = {3.141592653589793, -0.0};
    gguf_set_arr_data(g, "arr.u8", GGUF_TYPE_UINT8, a_u8, 3);
    gguf_set_arr_data(g, "arr.i8", GGUF_TYPE_INT8, a_i8, 3);
    gguf_set_arr_data(g, "arr.u16", GGUF_TYPE_UINT16, a_u16, 2);
    gguf_set_arr_data(g, "arr.i16", GGUF_TYPE_INT16, a_i16, 3);
    gguf_set_arr_data(g, "arr.u32", GGUF_TYPE_UINT32, a_u32, 2);
    gguf_set_arr_data(g, "arr.i32", GGUF_TYPE_INT32, a_i32, 4);
    gguf_set_arr_data(g, "arr.f32", GGUF_TYPE_FLOAT32, a_f32, 3);
    gguf_set_arr_data(g, "arr.bool", GGUF_TYPE_BOOL, a_bool, 4);
    gguf_set_arr_data(g, "arr.u64", GGUF_TYPE_UINT64, a_u64, 2);
    gguf_set_arr_data(g, "arr.i64", GGUF_TYPE_INT64, a_i64, 2);
    gguf_set_arr_data(g, "arr.f64", GGUF_TYPE_FLOAT64, a_f64, 2);
    gguf_set_arr_data(g, "arr.empty", GGUF_TYPE_INT32, nullptr, 0);
    const char * strs[] = {"<unk>", "", "▁the", "a longer string with spaces"};
    gguf_set_arr_str(g, "arr.str", strs, 4);
    return g;
}

template <typename T> void check_arr(const gguf_context * g, const char * key, gguf_type type,
                                     std::initializer_list<T> want) {
    INFO("key ", key);
    const int64_t id = gguf_find_key(g, key);
    REQUIRE(id >= 0);
    CHECK(gguf_get_kv_type(g, id) == GGUF_TYPE_ARRAY);
    CHECK(gguf_get_arr_type(g, id) == type);
    REQUIRE(gguf_get_arr_n(g, id) == want.size());
    if (want.size() > 0) {
        CHECK(std::memcmp(gguf_get_arr_data(g, id), want.begin(), want.size() * sizeof(T)) == 0);
    }
}

void check_all_kv(const gguf_context * g) {
    CHECK(gguf_get_n_kv(g) == 26);
    CHECK(gguf_get_val_u8(g, gguf_find_key(g, "u8")) == 200);
    CHECK(gguf_get_val_i8(g, gguf_find_key(g, "i8")) == -100);
    CHECK(gguf_get_val_u16(g, gguf_find_key(g, "u16")) == 60000);
    CHECK(gguf_get_val_i16(g, gguf_find_key(g, "i16")) == -30000);
    CHECK(gguf_get_val_u32(g, gguf_find_key(g, "u32")) == 4000000000u);
    CHECK(gguf_get_val_i32(g, gguf_find_key(g, "i32")) == -2000000000);
    CHECK(gguf_get_val_f32(g, gguf_find_key(g, "f32")) == 3.25f);
    CHECK(gguf_get_val_u64(g, gguf_find_key(g, "u64")) == 0xFEDCBA9876543210ull);
    CHECK(gguf_get_val_i64(g, gguf_find_key(g, "i64")) == -0x123456789ABCll);
    CHECK(gguf_get_val_f64(g, gguf_find_key(g, "f64")) == -1e300);
    CHECK(gguf_get_val_bool(g, gguf_find_key(g, "bool")) == true);
    CHECK(std::string(gguf_get_val_str(g, gguf_find_key(g, "str"))) == "hello, gguf");
    CHECK(std::string(gguf_get_val_str(g, gguf_find_key(g, "str.empty"))) == "");
    CHECK(gguf_get_kv_type(g, gguf_find_key(g, "f64")) == GGUF_TYPE_FLOAT64);
    CHECK(gguf_get_kv_type(g, gguf_find_key(g, "str")) == GGUF_TYPE_STRING);

    check_arr<uint8_t>(g, "arr.u8", GGUF_TYPE_UINT8, {1, 2, 255});
    check_arr<int8_t>(g, "arr.i8", GGUF_TYPE_INT8, {-128, 0, 127});
    check_arr<uint16_t>(g, "arr.u16", GGUF_TYPE_UINT16, {1, 65535});
    check_arr<int16_t>(g, "arr.i16", GGUF_TYPE_INT16, {-32768, 32767, 5});
    check_arr<uint32_t>(g, "arr.u32", GGUF_TYPE_UINT32, {7, 0xFFFFFFFFu});
    check_arr<int32_t>(g, "arr.i32", GGUF_TYPE_INT32, {-1, 2, -3, 4});
    check_arr<float>(g, "arr.f32", GGUF_TYPE_FLOAT32, {0.5f, -1.5f, 1e-30f});
    check_arr<uint8_t>(g, "arr.bool", GGUF_TYPE_BOOL, {1, 0, 1, 1});
    check_arr<uint64_t>(g, "arr.u64", GGUF_TYPE_UINT64, {0xFFFFFFFFFFFFFFFFull, 3});
    check_arr<int64_t>(g, "arr.i64", GGUF_TYPE_INT64, {INT64_MIN, INT64_MAX});
    check_arr<double>(g, "arr.f64", GGUF_TYPE_FLOAT64, {3.141592653589793, -0.0});
    check_arr<int32_t>(g, "arr.empty", GGUF_TYPE_INT32, {});

    const int64_t s = gguf_find_key(g, "arr.str");
    REQUIRE(s >= 0);
    CHECK(gguf_get_arr_type(g, s) == GGUF_TYPE_STRING);
    REQUIRE(gguf_get_arr_n(g, s) == 4);
    CHECK(std::string(gguf_get_arr_str(g, s, 0)) == "<unk>");
    CHECK(gguf_get_arr_str_len(g, s, 1) == 0);
    CHECK(std::string(gguf_get_arr_str(g, s, 2)) == "▁the");
    CHECK(std::string(gguf_get_arr_str(g, s, 3)) == "a longer string with spaces");
}

// Tensors for the round trip: [ne...] of each supported type with seeded random bytes.
struct test_tensors {
    ggml_context * ctx = nullptr;
    std::vector<std::vector<uint8_t>> bufs;
    std::vector<ggml_tensor *> ts;

    test_tensors() {
        ctx = ggml_init({16 * ggml_tensor_overhead(), nullptr, true});
        add("f32.odd", GGML_TYPE_F32, {7, 3, 1, 1});         // [7, 3]
        add("f16.vec", GGML_TYPE_F16, {5, 1, 1, 1});         // [5]
        add("q8_0.mat", GGML_TYPE_Q8_0, {64, 3, 1, 1});      // [64, 3]
        add("q8_1.3d", GGML_TYPE_Q8_1, {32, 3, 2, 1});       // [32, 3, 2]
        add("i32.4d", GGML_TYPE_I32, {3, 1, 1, 2});          // [3, 1, 1, 2]
    }
    ~test_tensors() { ggml_free(ctx); }

    void add(const char * name, ggml_type type, std::initializer_list<int64_t> ne) {
        ggml_tensor * t = ggml_new_tensor(ctx, type, 4, ne.begin());
        ggml_set_name(t, name);
        std::mt19937 rng(1234 + (unsigned) ts.size());
        std::vector<uint8_t> b(ggml_nbytes(t));
        for (auto & x : b) {
            x = (uint8_t) rng();
        }
        bufs.push_back(std::move(b));
        t->data = bufs.back().data();
        ts.push_back(t);
    }
};

const int k_n_dims_want[] = {2, 1, 2, 3, 4};

void check_tensors(const gguf_context * g, ggml_context * meta, const test_tensors & tt, size_t align) {
    REQUIRE(gguf_get_n_tensors(g) == (int64_t) tt.ts.size());
    CHECK(gguf_get_alignment(g) == align);
    CHECK(gguf_get_data_offset(g) % align == 0);
    for (size_t i = 0; i < tt.ts.size(); ++i) {
        const ggml_tensor * t = tt.ts[i];
        const int64_t id = gguf_find_tensor(g, t->name);
        INFO("tensor ", t->name);
        REQUIRE(id == (int64_t) i);
        CHECK(gguf_get_tensor_type(g, id) == t->type);
        CHECK(gguf_get_tensor_n_dims(g, id) == k_n_dims_want[i]);
        for (int d = 0; d < GGML_MAX_DIMS; ++d) {
            CHECK(gguf_get_tensor_ne(g, id, d) == t->ne[d]);
        }
        CHECK(gguf_get_tensor_offset(g, id) % align == 0);
        CHECK(gguf_get_tensor_size(g, id) == ggml_nbytes(t));
        const void * data = gguf_get_tensor_data(g, id);
        REQUIRE(data != nullptr);
        CHECK(std::memcmp(data, t->data, ggml_nbytes(t)) == 0);
        if (meta) {
            const ggml_tensor * m = ggml_get_tensor(meta, t->name);
            REQUIRE(m != nullptr);
            CHECK(m->type == t->type);
            for (int d = 0; d < GGML_MAX_DIMS; ++d) {
                CHECK(m->ne[d] == t->ne[d]);
            }
            CHECK(m->data == data);  // zero copy: points into the mapping
        }
    }
}

// A valid file with KVs and tensors, as bytes (for truncation).
std::vector<uint8_t> make_valid_file_bytes() {
    gguf_context * g = make_all_kv();
    test_tensors tt;
    for (ggml_tensor * t : tt.ts) {
        gguf_add_tensor(g, t);
    }
    const std::string path = tmp_path("valid.gguf");
    std::string err;
    REQUIRE(gguf_write_to_file(g, path.c_str(), false, &err));
    gguf_free(g);
    return read_bytes(path);
}

}  // namespace

// ---- round trips ----------------------------------------------------------------------------

TEST_CASE("every KV type round trips through a file and a buffer") {
    gguf_context * g = make_all_kv();
    check_all_kv(g);
    const std::string path = tmp_path("kv.gguf");
    std::string err;
    REQUIRE_MESSAGE(gguf_write_to_file(g, path.c_str(), false, &err), err);
    CHECK(!file_exists(path + ".tmp"));

    gguf_context * r = gguf_init_from_file(path.c_str(), k_no_alloc, &err);
    REQUIRE_MESSAGE(r != nullptr, err);
    CHECK(gguf_get_version(r) == 3);
    CHECK(gguf_get_n_tensors(r) == 0);
    check_all_kv(r);
    for (int64_t i = 0; i < gguf_get_n_kv(g); ++i) {
        CHECK(std::string(gguf_get_key(r, i)) == gguf_get_key(g, i));  // order preserved
    }

    const std::vector<uint8_t> bytes = read_bytes(path);
    CHECK(bytes == gguf_get_meta_data(g));  // no tensors: the file is exactly the metadata
    gguf_context * b = gguf_init_from_buffer(bytes.data(), bytes.size(), "kv-buffer", k_no_alloc, &err);
    REQUIRE_MESSAGE(b != nullptr, err);
    check_all_kv(b);

    // gguf_set_kv copies everything; a second write gives identical bytes
    gguf_context * c = gguf_init_empty();
    gguf_set_kv(c, r);
    CHECK(gguf_get_meta_data(c) == bytes);

    gguf_free(c);
    gguf_free(b);
    gguf_free(r);
    gguf_free(g);
}

TEST_CASE("setters replace existing keys; remove_key removes") {
    gguf_context * g = gguf_init_empty();
    gguf_set_val_u32(g, "a", 1);
    gguf_set_val_str(g, "b", "x");
    gguf_set_val_str(g, "a", "now a string");
    CHECK(gguf_get_n_kv(g) == 2);
    CHECK(gguf_get_kv_type(g, gguf_find_key(g, "a")) == GGUF_TYPE_STRING);
    CHECK(std::string(gguf_get_val_str(g, gguf_find_key(g, "a"))) == "now a string");
    gguf_remove_key(g, "b");
    gguf_remove_key(g, "not there");
    CHECK(gguf_get_n_kv(g) == 1);
    CHECK(gguf_find_key(g, "b") == -1);
    gguf_free(g);
}

TEST_CASE("strings read from a file may hold NUL bytes") {
    const std::string with_nul("a\0b", 3);
    byte_writer w;
    w.header(3, 0, 1).str("k").i32(GGUF_TYPE_ARRAY).i32(GGUF_TYPE_STRING).u64(2).str(with_nul).str("z");
    std::string err;
    gguf_context * g = gguf_init_from_buffer(w.b.data(), w.b.size(), "nul", k_no_alloc, &err);
    REQUIRE_MESSAGE(g != nullptr, err);
    CHECK(gguf_get_arr_str_len(g, 0, 0) == 3);
    CHECK(std::memcmp(gguf_get_arr_str(g, 0, 0), with_nul.data(), 3) == 0);
    CHECK(gguf_get_arr_str_len(g, 0, 1) == 1);
    gguf_free(g);
}

TEST_CASE("tensors round trip: bytes equal, offsets aligned (default 32 and custom 64)") {
    for (uint32_t align : {0u, 64u}) {
        CAPTURE(align);
        test_tensors tt;
        gguf_context * g = gguf_init_empty();
        gguf_set_val_str(g, "general.architecture", "test");
        if (align) {
            gguf_set_val_u32(g, GGUF_KEY_GENERAL_ALIGNMENT, align);
        }
        for (ggml_tensor * t : tt.ts) {
            gguf_add_tensor(g, t);
        }
        const size_t want_align = align ? align : GGUF_DEFAULT_ALIGNMENT;
        CHECK(gguf_get_alignment(g) == want_align);

        const std::string path = tmp_path("tensors.gguf");
        std::string err;
        REQUIRE_MESSAGE(gguf_write_to_file(g, path.c_str(), false, &err), err);

        // from the file, with a ggml context pointing into the mapping
        ggml_context * meta = nullptr;
        gguf_context * r = gguf_init_from_file(path.c_str(), {false, &meta}, &err);
        REQUIRE_MESSAGE(r != nullptr, err);
        REQUIRE(meta != nullptr);
        check_tensors(r, meta, tt, want_align);
        CHECK(gguf_get_data_offset(r) == gguf_get_meta_data(g).size());
        CHECK((const uint8_t *) gguf_get_data(r) + gguf_get_tensor_offset(r, 1) == gguf_get_tensor_data(r, 1));
        // the file size is the data section, padded
        CHECK(gguf_get_file_size(r) % want_align == 0);

        // from a buffer, no_alloc: tensors have no data
        const std::vector<uint8_t> bytes = read_bytes(path);
        ggml_context * meta2 = nullptr;
        gguf_context * b = gguf_init_from_buffer(bytes.data(), bytes.size(), "buf", {true, &meta2}, &err);
        REQUIRE_MESSAGE(b != nullptr, err);
        REQUIRE(meta2 != nullptr);
        CHECK(ggml_get_tensor(meta2, "q8_0.mat")->data == nullptr);
        CHECK(ggml_get_tensor(meta2, "q8_0.mat")->ne[1] == 3);
        ggml_context * meta3 = nullptr;
        gguf_context * b3 = gguf_init_from_buffer(bytes.data(), bytes.size(), "buf", {false, &meta3}, &err);
        REQUIRE(b3 != nullptr);
        check_tensors(b3, meta3, tt, want_align);

        // only_meta writes the header part alone
        const std::string mpath = tmp_path("meta-only.gguf");
        REQUIRE(gguf_write_to_file(g, mpath.c_str(), true, &err));
        CHECK(read_bytes(mpath) == gguf_get_meta_data(g));

        ggml_free(meta3);
        gguf_free(b3);
        ggml_free(meta2);
        gguf_free(b);
        ggml_free(meta);
        gguf_free(r);
        gguf_free(g);
    }
}

TEST_CASE("set_tensor_type/set_tensor_data recompute offsets") {
    test_tensors tt;
    gguf_context * g = gguf_init_empty();
    for (ggml_tensor * t : tt.ts) {
        gguf_add_tensor(g, t);
    }
    // f32 [7,3] -> i32 same size; q8_0 [64,3] -> f32 [64,3] (768 bytes instead of 204)
    std::vector<float> f(64 * 3);
    for (size_t i = 0; i < f.size(); ++i) {
        f[i] = (float) i * 0.25f;
    }
    gguf_set_tensor_type(g, "q8_0.mat", GGML_TYPE_F32);
    gguf_set_tensor_data(g, "q8_0.mat", f.data());
    CHECK(gguf_get_tensor_size(g, 2) == 64 * 3 * 4);
    CHECK(gguf_get_tensor_offset(g, 3) == gguf_get_tensor_offset(g, 2) + 768);  // 768 is aligned
    const std::string path = tmp_path("retyped.gguf");
    std::string err;
    REQUIRE(gguf_write_to_file(g, path.c_str(), false, &err));
    gguf_context * r = gguf_init_from_file(path.c_str(), k_no_alloc, &err);
    REQUIRE_MESSAGE(r != nullptr, err);
    CHECK(gguf_get_tensor_type(r, 2) == GGML_TYPE_F32);
    CHECK(std::memcmp(gguf_get_tensor_data(r, 2), f.data(), f.size() * 4) == 0);
    CHECK(std::memcmp(gguf_get_tensor_data(r, 3), tt.bufs[3].data(), tt.bufs[3].size()) == 0);
    gguf_free(r);
    gguf_free(g);
}

TEST_CASE("a version 2 file is read") {
    byte_writer w;
    w.header(2, 1, 1).kv_str("general.architecture", "llama").tensor("t", {4}, GGML_TYPE_F32, 0).pad(32);
    const float x[4] = {1, 2, 3, 4};
    w.raw(x, sizeof(x));
    std::string err;
    gguf_context * g = gguf_init_from_buffer(w.b.data(), w.b.size(), "v2", k_no_alloc, &err);
    REQUIRE_MESSAGE(g != nullptr, err);
    CHECK(gguf_get_version(g) == 2);
    CHECK(gguf_get_tensor_ne(g, 0, 0) == 4);
    gguf_free(g);
}

// ---- real files -----------------------------------------------------------------------------

TEST_CASE("stories260K.gguf: known values, tensors match stories260K.bin") {
    const std::string path = llm_shared_path("models/stories260K.gguf");
    if (!file_exists(path)) {
        MESSAGE("SKIPPED: " << path << " not found");
        return;
    }
    std::string err;
    ggml_context * meta = nullptr;
    gguf_context * g = gguf_init_from_file(path.c_str(), {false, &meta}, &err);
    REQUIRE_MESSAGE(g != nullptr, err);
    CHECK(gguf_get_version(g) == 3);
    CHECK(std::string(gguf_get_val_str(g, gguf_find_key(g, "general.architecture"))) == "llama");
    const int64_t emb = gguf_find_key(g, "llama.embedding_length");
    REQUIRE(emb >= 0);
    CHECK(gguf_get_kv_type(g, emb) == GGUF_TYPE_UINT32);
    CHECK(gguf_get_val_u32(g, emb) == 64);
    CHECK(gguf_get_n_tensors(g) == 48);
    const int64_t te = gguf_find_tensor(g, "token_embd.weight");
    REQUIRE(te >= 0);
    CHECK(gguf_get_tensor_type(g, te) == GGML_TYPE_F32);
    CHECK(gguf_get_tensor_ne(g, te, 0) == 64);
    CHECK(gguf_get_tensor_ne(g, te, 1) == 512);
    const int64_t tok = gguf_find_key(g, "tokenizer.ggml.tokens");
    REQUIRE(tok >= 0);
    CHECK(gguf_get_arr_type(g, tok) == GGUF_TYPE_STRING);
    CHECK(gguf_get_arr_n(g, tok) == 512);
    CHECK(std::string(gguf_get_arr_str(g, tok, 1)) == "<s>");
    CHECK(std::string(gguf_get_val_str(g, gguf_find_key(g, "tokenizer.ggml.model"))) == "llama");

    // every tensor is in the ggml context, pointing into the mapping
    int n = 0;
    for (ggml_tensor * t = ggml_get_first_tensor(meta); t; t = ggml_get_next_tensor(meta, t)) {
        const int64_t id = gguf_find_tensor(g, t->name);
        REQUIRE(id >= 0);
        CHECK(t->data == gguf_get_tensor_data(g, id));
        CHECK(ggml_nbytes(t) == gguf_get_tensor_size(g, id));
        ++n;
    }
    CHECK(n == 48);

    // independent reference: the llama2.c checkpoint holds the same token embedding after its 28-byte header
    const std::vector<uint8_t> bin = read_bytes(llm_shared_path("models/stories260K.bin"));
    if (bin.size() >= 28 + 64 * 512 * 4) {
        CHECK(std::memcmp(gguf_get_tensor_data(g, te), bin.data() + 28, 64 * 512 * 4) == 0);
    }

    // writing the read context copies KVs, infos and data from the mapping: the same bytes come out
    const std::string copy = tmp_path("stories-copy.gguf");
    REQUIRE_MESSAGE(gguf_write_to_file(g, copy.c_str(), false, &err), err);
    CHECK(read_bytes(copy) == read_bytes(path));

    ggml_free(meta);
    gguf_free(g);
}

TEST_CASE("ggml-vocab-llama-spm.gguf: vocab-only file") {
    gguf_context * g = open_shared("models/ggml-vocab-llama-spm.gguf");
    if (!g) return;
    CHECK(gguf_get_n_tensors(g) == 0);
    CHECK(std::string(gguf_get_val_str(g, gguf_find_key(g, "general.architecture"))) == "llama");
    CHECK(std::string(gguf_get_val_str(g, gguf_find_key(g, "tokenizer.ggml.model"))) == "llama");
    const int64_t tok = gguf_find_key(g, "tokenizer.ggml.tokens");
    REQUIRE(tok >= 0);
    CHECK(gguf_get_arr_n(g, tok) == 32000);
    CHECK(std::string(gguf_get_arr_str(g, tok, 0)) == "<unk>");
    CHECK(std::string(gguf_get_arr_str(g, tok, 2)) == "</s>");
    const int64_t sc = gguf_find_key(g, "tokenizer.ggml.scores");
    REQUIRE(sc >= 0);
    CHECK(gguf_get_arr_type(g, sc) == GGUF_TYPE_FLOAT32);
    CHECK(gguf_get_arr_n(g, sc) == 32000);
    gguf_free(g);
}

TEST_CASE("llama-2-tiny-random.gguf: f16 tensors") {
    gguf_context * g = open_shared("models/llama-2-tiny-random.gguf");
    if (!g) return;
    CHECK(gguf_get_n_tensors(g) == 12);
    const int64_t te = gguf_find_tensor(g, "token_embd.weight");
    REQUIRE(te >= 0);
    CHECK(gguf_get_tensor_type(g, te) == GGML_TYPE_F16);
    CHECK(gguf_get_tensor_ne(g, te, 0) == 8);
    CHECK(gguf_get_tensor_ne(g, te, 1) == 32000);
    CHECK(gguf_get_tensor_size(g, te) == 8 * 32000 * 2);
    CHECK(gguf_get_tensor_type(g, gguf_find_tensor(g, "output_norm.weight")) == GGML_TYPE_F32);
    gguf_free(g);
}

// ---- corrupt files: one per validation rule -------------------------------------------------

TEST_CASE("corrupt: header") {
    check_err(byte_writer().raw("GGUX", 4).u32(3).u64(0).u64(0).b, "bad magic");
    check_err(byte_writer().header(1, 0, 0).b, "version 1 is not supported");
    check_err(byte_writer().header(4, 0, 0).b, "unsupported GGUF version 4");
    check_err(byte_writer().header(0x03000000, 0, 0).b, "big-endian");
    check_err(byte_writer().header(3, 0, 1ull << 40).b, "exceeds GGUF_MAX_KV_COUNT");
    check_err(byte_writer().header(3, ~0ull, 0).b, "exceeds GGUF_MAX_TENSOR_COUNT");
    // counts within the limits but far beyond what the file holds: a clean end-of-file error
    check_err(byte_writer().header(3, 0, GGUF_MAX_KV_COUNT).b, "unexpected end of file");
    check_err(byte_writer().header(3, GGUF_MAX_TENSOR_COUNT, 0).b, "unexpected end of file");
}

TEST_CASE("corrupt: strings") {
    check_err(byte_writer().header(3, 0, 1).u64(1000).raw("abc", 3).b, "extends past end of file");
    check_err(byte_writer().header(3, 0, 1).u64(1ull << 40).raw("abc", 3).b, "exceeds GGUF_MAX_STRING_LENGTH");
    check_err(byte_writer().header(3, 0, 1).str("k").i32(GGUF_TYPE_STRING).u64(~0ull).b,
              "exceeds GGUF_MAX_STRING_LENGTH");
    check_err(byte_writer().header(3, 0, 1).str("k").i32(GGUF_TYPE_STRING).u64(9).raw("12345678", 8).b,
              "extends past end of file");
}

TEST_CASE("corrupt: kv types and arrays") {
    check_err(byte_writer().header(3, 0, 1).str("k").i32(13).u32(0).b, "unknown value type 13");
    check_err(byte_writer().header(3, 0, 1).str("k").i32(-1).u32(0).b, "unknown value type -1");
    check_err(byte_writer().header(3, 0, 1).str("k").i32(GGUF_TYPE_ARRAY).i32(GGUF_TYPE_ARRAY).u64(1).b,
              "nested array");
    check_err(byte_writer().header(3, 0, 1).str("k").i32(GGUF_TYPE_ARRAY).i32(99).u64(1).b,
              "unknown array element type 99");
    check_err(byte_writer().header(3, 0, 1).str("k").i32(GGUF_TYPE_ARRAY).i32(GGUF_TYPE_UINT64).u64(1ull << 62).b,
              "exceeds GGUF_MAX_ARRAY_LENGTH");
    // n * element size would overflow 64 bits if unchecked
    check_err(byte_writer().header(3, 0, 1).str("k").i32(GGUF_TYPE_ARRAY).i32(GGUF_TYPE_UINT64).u64(~0ull >> 2).b,
              "exceeds GGUF_MAX_ARRAY_LENGTH");
    // within the limit, more than the file holds: rejected before allocating
    check_err(byte_writer().header(3, 0, 1).str("k").i32(GGUF_TYPE_ARRAY).i32(GGUF_TYPE_FLOAT64)
                  .u64(GGUF_MAX_ARRAY_LENGTH).u64(0).b,
              "extends past end of file");
    check_err(byte_writer().header(3, 0, 1).str("k").i32(GGUF_TYPE_ARRAY).i32(GGUF_TYPE_STRING)
                  .u64(GGUF_MAX_ARRAY_LENGTH).str("a").b,
              "extends past end of file");
    // the error in a string array names the key and the element
    const std::string e = parse_err(byte_writer().header(3, 0, 1).str("tok").i32(GGUF_TYPE_ARRAY)
                                        .i32(GGUF_TYPE_STRING).u64(3).str("a").str("b").u64(100).b);
    CHECK(e.find("key 'tok' element 2") != std::string::npos);
    check_err(byte_writer().header(3, 0, 2).kv_u32("a", 1).kv_u32("a", 2).b, "duplicate key");
    // names from the file are escaped and cut in messages: still one line
    const std::string e2 = parse_err(byte_writer().header(3, 0, 2).kv_u32("a\nb", 1).kv_u32("a\nb", 2).b);
    CHECK(e2.find("key 'a\\x0ab'") != std::string::npos);
    const std::string e3 = parse_err(byte_writer().header(3, 0, 1).str(std::string(5000, 'k')).i32(77).b);
    CHECK(e3.find("(5000 bytes)") != std::string::npos);
    CHECK(e3.size() < 300);
}

TEST_CASE("corrupt: general.alignment") {
    check_err(byte_writer().header(3, 0, 1).kv_u32("general.alignment", 0).b, "not a power of two");
    check_err(byte_writer().header(3, 0, 1).kv_u32("general.alignment", 3).b, "not a power of two");
    check_err(byte_writer().header(3, 0, 1).str("general.alignment").i32(GGUF_TYPE_INT32).i32(32).b,
              "alignment must be a u32, got i32");
    check_err(byte_writer().header(3, 0, 1).str("general.alignment").i32(GGUF_TYPE_UINT64).u64(32).b,
              "alignment must be a u32, got u64");
}

TEST_CASE("corrupt: tensor infos") {
    auto one = [](std::initializer_list<int64_t> ne, int32_t type, uint64_t off, size_t data_bytes = 4096) {
        return byte_writer().header(3, 1, 0).tensor("w", ne, type, off).pad(32).zeros(data_bytes).b;
    };
    CHECK(parse_err(one({4, 4}, GGML_TYPE_F32, 0)) == "");  // the base case is valid
    check_err(one({}, GGML_TYPE_F32, 0), "n_dims = 0 out of range");
    check_err(one({1, 1, 1, 1, 1}, GGML_TYPE_F32, 0), "n_dims = 5 out of range");
    check_err(one({4, 0}, GGML_TYPE_F32, 0), "ne[1] = 0 must be positive");
    check_err(one({-4}, GGML_TYPE_F32, 0), "ne[0] = -4 must be positive");
    check_err(one({1ll << 32, 1ll << 32}, GGML_TYPE_F32, 0), "element count overflows int64");
    check_err(one({1ll << 31, 1ll << 31}, GGML_TYPE_F32, 0), "byte size overflows");  // 2^62 elements * 4
    check_err(one({4}, GGML_TYPE_F32, 4), "not a multiple of the alignment 32");
    check_err(one({4}, GGML_TYPE_F32, 4096), "extends past end of file");
    check_err(one({1024, 2}, GGML_TYPE_F32, 0), "extends past end of file");  // 8192 bytes, 4096 present
    check_err(one({1ll << 40}, GGML_TYPE_F32, 0), "extends past end of file");
    check_err(one({4}, GGML_TYPE_F32, ~0ull - 31), "extends past end of file");  // offset + size overflows
    check_err(one({256}, 16, 0), "unsupported tensor type 16 (iq2_xxs)");
    check_err(one({64}, 20, 0), "unsupported tensor type 20 (iq4_nl)");
    check_err(one({96, 2}, GGML_TYPE_Q4_K, 0), "ne[0] = 96 is not a multiple of the block size 256 of q4_K");
    CHECK(parse_err(one({64, 2}, GGML_TYPE_Q4_0, 0)) == "");
    CHECK(parse_err(one({256, 2}, GGML_TYPE_Q6_K, 0)) == "");
    check_err(one({64}, 30, 0), "unsupported tensor type 30 (bf16)");
    check_err(one({64}, 1000, 0), "unknown tensor type 1000");
    check_err(one({64}, -1, 0), "unknown tensor type -1");
    check_err(one({33, 2}, GGML_TYPE_Q8_0, 0), "ne[0] = 33 is not a multiple of the block size 32 of q8_0");
    CHECK(parse_err(one({32, 2}, GGML_TYPE_Q8_0, 0)) == "");

    const std::string e = parse_err(one({4, 0}, GGML_TYPE_F32, 0));
    CHECK(e.find("tensor 'w'") != std::string::npos);  // names the tensor

    check_err(byte_writer().header(3, 1, 0).tensor(std::string(64, 'x'), {4}, GGML_TYPE_F32, 0).pad(32).zeros(16).b,
              "longer than the maximum 63");
    check_err(byte_writer().header(3, 2, 0).tensor("w", {4}, GGML_TYPE_F32, 0).tensor("w", {4}, GGML_TYPE_F32, 32)
                  .pad(32).zeros(64).b,
              "duplicate tensor name");
    // with general.alignment 64, offset 32 is misaligned
    check_err(byte_writer().header(3, 1, 1).kv_u32("general.alignment", 64).tensor("w", {4}, GGML_TYPE_F32, 32)
                  .pad(64).zeros(128).b,
              "not a multiple of the alignment 64");
}

TEST_CASE("corrupt: truncated at every byte offset fails cleanly") {
    const std::vector<uint8_t> bytes = make_valid_file_bytes();
    std::string err;
    gguf_context * g = gguf_init_from_buffer(bytes.data(), bytes.size(), "full", k_no_alloc, &err);
    REQUIRE_MESSAGE(g != nullptr, err);
    // the file may end in padding after the last tensor: anything shorter than the last byte of data fails
    size_t need = 0;
    for (int64_t i = 0; i < gguf_get_n_tensors(g); ++i) {
        need = std::max(need, gguf_get_data_offset(g) + gguf_get_tensor_offset(g, i) + gguf_get_tensor_size(g, i));
    }
    gguf_free(g);
    REQUIRE(need <= bytes.size());
    int n_fail = 0;
    for (size_t len = 0; len < bytes.size(); ++len) {
        const std::string e = parse_err(bytes, len);
        if (len < need) {
            INFO("len ", len, ": ", e);
            CHECK(!e.empty());
            n_fail += !e.empty();
            CHECK(e.rfind("corrupt.gguf: ", 0) == 0);
        } else {
            CHECK(e.empty());
        }
    }
    CHECK(n_fail == (int) need);

    // the mmap path too: empty file, header cut, last byte of data cut
    for (size_t len : {(size_t) 0, (size_t) 3, (size_t) 23, need - 1}) {
        const std::string path = tmp_path("trunc.gguf");
        {
            std::ofstream f(path, std::ios::binary);
            f.write((const char *) bytes.data(), (std::streamsize) len);
        }
        ggml_context * meta = nullptr;
        gguf_context * t = gguf_init_from_file(path.c_str(), {false, &meta}, &err);
        CHECK(t == nullptr);
        CHECK(meta == nullptr);
        CHECK(err.rfind(path + ": ", 0) == 0);
    }
}

TEST_CASE("files that cannot be opened") {
    std::string err;
    CHECK(gguf_init_from_file("/nonexistent/x.gguf", k_no_alloc) == nullptr);  // no err: logged instead
    CHECK(gguf_init_from_file("/nonexistent/x.gguf", k_no_alloc, &err) == nullptr);
    CHECK(err.find("cannot open") != std::string::npos);
    CHECK(gguf_init_from_file("/tmp", k_no_alloc, &err) == nullptr);
    CHECK(err.find("not a regular file") != std::string::npos);
}

// ---- writing failures leave nothing behind --------------------------------------------------

TEST_CASE("writing to an unwritable path fails cleanly and leaves no file") {
    test_tensors tt;
    gguf_context * g = gguf_init_empty();
    gguf_add_tensor(g, tt.ts[0]);
    std::string err;

    CHECK(!gguf_write_to_file(g, "/nonexistent_dir/out.gguf", false, &err));
    CHECK(err.find("cannot create") != std::string::npos);
    CHECK(!file_exists("/nonexistent_dir/out.gguf.tmp"));

    // a path below a regular file (ENOTDIR, even for root)
    const std::string file = tmp_path("plain-file");
    { std::ofstream(file) << "x"; }
    CHECK(!gguf_write_to_file(g, (file + "/out.gguf").c_str(), false, &err));
    CHECK(err.find("out.gguf") != std::string::npos);

    // the target is a directory: the rename fails, the temp file is removed
    const std::string dir = tmp_path("a-dir.gguf");
    REQUIRE(mkdir(dir.c_str(), 0755) == 0);
    CHECK(!gguf_write_to_file(g, dir.c_str(), false, &err));
    CHECK(err.find("cannot rename") != std::string::npos);
    CHECK(!file_exists(dir + ".tmp"));

    // a tensor without data: an error before anything is created
    const std::string out = tmp_path("nodata.gguf");
    gguf_set_tensor_data(g, tt.ts[0]->name, nullptr);
    CHECK(!gguf_write_to_file(g, out.c_str(), false, &err));
    CHECK(err.find("has no data") != std::string::npos);
    CHECK(!file_exists(out));
    CHECK(!file_exists(out + ".tmp"));
    gguf_free(g);
}
