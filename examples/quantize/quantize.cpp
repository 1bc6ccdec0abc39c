// quantize - convert the 2-D weight matrices of a GGUF to q8_0, f16 or f32.
//   quantize in.gguf out.gguf q8_0|f16|f32 [threads]
// 1-D tensors (norms) stay f32; all metadata is copied (general.file_type updated). The output is
// written to OUT.tmp and renamed only on success; on any error (or Ctrl-C) nothing is left behind.
#include "ggml.h"
#include "gguf.h"

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include <unistd.h>

static std::string g_tmp_path;  // removed on failure or interrupt

static void on_signal(int sig) {
    if (!g_tmp_path.empty()) unlink(g_tmp_path.c_str());
    std::signal(sig, SIG_DFL);
    std::raise(sig);
}

static int fail(const std::string & msg) {
    if (!g_tmp_path.empty()) unlink(g_tmp_path.c_str());
    fprintf(stderr, "error: %s\n", msg.c_str());
    return 1;
}

// llama.cpp's general.file_type values
static int file_type_of(ggml_type t) {
    switch (t) {
        case GGML_TYPE_F32: return 0;
        case GGML_TYPE_F16: return 1;
        case GGML_TYPE_Q8_0: return 7;
        default: return -1;
    }
}

// convert n_rows rows of ne0 elements from src (type st, row stride src_nb1) to dst type dt (dense)
static void convert_rows(const char * src, ggml_type st, size_t src_nb1, char * dst, ggml_type dt, int64_t ne0,
                         int64_t r0, int64_t r1) {
    std::vector<float> row(ne0);
    const ggml_type_traits * tsrc = ggml_get_type_traits(st);
    const ggml_type_traits * tdst = ggml_get_type_traits(dt);
    const size_t dst_row = ggml_row_size(dt, ne0);
    for (int64_t r = r0; r < r1; ++r) {
        tsrc->to_float(src + r * src_nb1, row.data(), ne0);
        tdst->from_float_ref(row.data(), dst + r * dst_row, ne0);
    }
}

static std::string mib(size_t b) {
    char buf[32];
    snprintf(buf, sizeof(buf), "%.2f MiB", b / 1048576.0);
    return buf;
}

int main(int argc, char ** argv) {
    if (argc < 4 || argc > 5) {
        fprintf(stderr, "usage: %s in.gguf out.gguf q8_0|f16|f32 [threads]\n", argv[0]);
        return 1;
    }
    const std::string in_path = argv[1], out_path = argv[2], type_name = argv[3];
    ggml_type target;
    if (type_name == "q8_0") target = GGML_TYPE_Q8_0;
    else if (type_name == "f16") target = GGML_TYPE_F16;
    else if (type_name == "f32") target = GGML_TYPE_F32;
    else return fail("unknown target type '" + type_name + "' (q8_0, f16, f32)");
    int n_threads = (int) std::max(1u, std::thread::hardware_concurrency());
    if (argc == 5) {
        char * end = nullptr;
        const long v = strtol(argv[4], &end, 10);
        if (*end || v < 1 || v > 1024) return fail(std::string("invalid thread count '") + argv[4] + "' (1..1024)");
        n_threads = (int) v;
    }
    if (in_path == out_path) return fail("input and output are the same file");

    std::string err;
    gguf_context * in = gguf_init_from_file(in_path.c_str(), {true, nullptr}, &err);
    if (!in) return fail(err);

    // plan the output: same KVs, same tensor order, new types
    gguf_context * out = gguf_init_empty();
    gguf_set_kv(out, in);
    gguf_set_val_u32(out, "general.file_type", (uint32_t) file_type_of(target));
    gguf_set_val_u32(out, "general.quantization_version", 2);

    const int64_t n_tensors = gguf_get_n_tensors(in);
    ggml_context * meta = ggml_init({(size_t) (n_tensors + 1) * ggml_tensor_overhead(), nullptr, true});
    std::vector<ggml_type> out_types(n_tensors);
    size_t bytes_in = 0, bytes_out = 0;
    for (int64_t i = 0; i < n_tensors; ++i) {
        const ggml_type st = gguf_get_tensor_type(in, i);
        const int n_dims = gguf_get_tensor_n_dims(in, i);
        int64_t ne[4];
        for (int d = 0; d < 4; ++d) ne[d] = gguf_get_tensor_ne(in, i, d);
        ggml_type dt = st;
        const bool is_matrix = n_dims == 2 && std::string(gguf_get_tensor_name(in, i)).find("weight") != std::string::npos;
        if (is_matrix && (st == GGML_TYPE_F32 || st == GGML_TYPE_F16 || st == GGML_TYPE_Q8_0)) {
            dt = target;
            if (dt == GGML_TYPE_Q8_0 && ne[0] % QK8_0 != 0) dt = GGML_TYPE_F16;  // cannot be blocked
        } else if (n_dims == 1 && st == GGML_TYPE_F16) {
            dt = GGML_TYPE_F32;  // 1-D tensors are kept in f32
        }
        out_types[i] = dt;
        ggml_tensor * t = ggml_new_tensor(meta, dt, 4, ne);
        ggml_set_name(t, gguf_get_tensor_name(in, i));
        gguf_add_tensor(out, t);
        bytes_in += gguf_get_tensor_size(in, i);
        bytes_out += ggml_nbytes(t);
    }

    g_tmp_path = out_path + ".tmp";
    std::signal(SIGINT, on_signal);
    std::signal(SIGTERM, on_signal);
    FILE * f = fopen(g_tmp_path.c_str(), "wb");
    if (!f) {
        const std::string why = strerror(errno);
        g_tmp_path.clear();
        gguf_free(out);
        gguf_free(in);
        ggml_free(meta);
        return fail("cannot create '" + out_path + ".tmp': " + why);
    }
    auto write_all = [&](const void * p, size_t n) { return n == 0 || fwrite(p, 1, n, f) == n; };
    const std::vector<uint8_t> header = gguf_get_meta_data(out);
    bool ok = write_all(header.data(), header.size());

    const size_t align = gguf_get_alignment(out);
    std::vector<char> buf;
    const int64_t t0 = ggml_time_us();
    for (int64_t i = 0; ok && i < n_tensors; ++i) {
        const char * name = gguf_get_tensor_name(in, i);
        const ggml_type st = gguf_get_tensor_type(in, i), dt = out_types[i];
        const int64_t ne0 = gguf_get_tensor_ne(in, i, 0);
        const int64_t n_rows = gguf_get_tensor_ne(in, i, 1) * gguf_get_tensor_ne(in, i, 2) * gguf_get_tensor_ne(in, i, 3);
        const char * src = (const char *) gguf_get_tensor_data(in, i);
        if (!src) {
            ok = false;
            err = std::string("no data for tensor '") + name + "'";
            break;
        }
        const size_t out_size = ggml_row_size(dt, ne0) * n_rows;
        const char * data = src;
        if (dt != st) {
            buf.resize(out_size);
            const size_t src_nb1 = ggml_row_size(st, ne0);
            std::vector<std::thread> th;
            const int nt = (int) std::min<int64_t>(n_threads, std::max<int64_t>(1, n_rows / 16));
            for (int k = 0; k < nt; ++k) {
                const int64_t r0 = n_rows * k / nt, r1 = n_rows * (k + 1) / nt;
                th.emplace_back(convert_rows, src, st, src_nb1, buf.data(), dt, ne0, r0, r1);
            }
            for (auto & t : th) t.join();
            data = buf.data();
        }
        static const char zeros[64] = {0};
        const size_t pad = (align - out_size % align) % align;
        ok = write_all(data, out_size) && write_all(zeros, std::min(pad, sizeof(zeros)));
        for (size_t p = sizeof(zeros); ok && p < pad; p += sizeof(zeros)) {
            ok = write_all(zeros, std::min(sizeof(zeros), pad - p));
        }
        if (!ok) err = "write failed for '" + out_path + ".tmp' at tensor '" + name + "': " + strerror(errno);
        printf("[%4lld/%4lld] %-32s %-5s -> %-5s [%6lld, %6lld] %s -> %s\n", (long long) i + 1, (long long) n_tensors,
               name, ggml_type_name(st), ggml_type_name(dt), (long long) ne0, (long long) n_rows,
               mib(gguf_get_tensor_size(in, i)).c_str(), mib(out_size).c_str());
        fflush(stdout);
    }
    if (ok && fflush(f) != 0) {
        ok = false;
        err = "write failed for '" + out_path + ".tmp': " + strerror(errno);
    }
    if (fclose(f) != 0 && ok) {
        ok = false;
        err = "closing '" + out_path + ".tmp' failed: " + strerror(errno);
    }
    gguf_free(out);
    gguf_free(in);
    ggml_free(meta);
    if (!ok) return fail(err);
    if (rename(g_tmp_path.c_str(), out_path.c_str()) != 0) {
        return fail("cannot rename '" + g_tmp_path + "' to '" + out_path + "': " + strerror(errno));
    }
    g_tmp_path.clear();
    printf("model size: %s -> %s (%.2fx) in %.1f s\n", mib(bytes_in).c_str(), mib(bytes_out).c_str(),
           bytes_out ? (double) bytes_in / bytes_out : 0.0, (ggml_time_us() - t0) / 1e6);
    return 0;
}
