// quantize - convert the weight matrices of a GGUF to another type, with llama.cpp's per-tensor mixes.
//
//   quantize [--dry-run] [--allow-requantize] [--pure] in.gguf out.gguf TYPE [threads]
//   TYPE: q4_0 q4_1 q5_0 q5_1 q2_K q3_K_S q3_K_M q3_K_L q4_K_S q4_K_M q5_K_S q5_K_M q6_K q8_0 f16 f32
//         (any case; q3_K, q4_K, q5_K mean the _M mixes, as in llama-quantize)
//
// Each tensor's rows are converted to f32 (the input type's to_float: f32, f16 or any quantized type) and
// quantized with the output type's reference quantizer (from_float_ref), so a file quantized here is
// byte-identical to one from llama.cpp's llama-quantize without an importance matrix. The type of each
// tensor follows llama.cpp (mix.h); --pure gives every weight matrix the default type. 1-D tensors
// (norms) stay f32. All metadata is copied, general.file_type set; tensors are written in llama.cpp's
// order, so the whole file equals llama-quantize's (checked on the shared quant vectors). The output is written to OUT.tmp and
// renamed only on success; on any error (or Ctrl-C) nothing is left behind. --dry-run prints the plan.
#include "mix.h"

#include "ggml.h"
#include "gguf.h"
#include "model-info.h"

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include <sys/stat.h>
#include <unistd.h>

namespace {

std::string g_tmp_path;  // removed on failure or interrupt

void on_signal(int sig) {
    if (!g_tmp_path.empty()) unlink(g_tmp_path.c_str());
    std::signal(sig, SIG_DFL);
    std::raise(sig);
}

int fail(const std::string & msg) {
    if (!g_tmp_path.empty()) unlink(g_tmp_path.c_str());
    fprintf(stderr, "error: %s\n", msg.c_str());
    return 1;
}

std::string type_list() {
    size_t n = 0;
    const llm_ftype_info * l = llm_ftype_list(&n);
    std::string s;
    for (size_t i = 0; i < n; ++i) s += (i ? ", " : "") + std::string(l[i].name);
    return s;
}

void usage(const char * prog) {
    fprintf(stderr,
            "usage: %s [--dry-run] [--allow-requantize] [--pure] in.gguf out.gguf TYPE [threads]\n"
            "  TYPE: %s (any case; Q3_K, Q4_K, Q5_K = the _M mixes)\n"
            "  --dry-run           print the type of every tensor and the sizes, write nothing\n"
            "  --pure              every weight matrix in TYPE (no per-tensor mix; output.weight too)\n"
            "  --allow-requantize  accepted as in llama-quantize; quantized input is always requantized\n"
            "                      through f32, with a warning (quality loss)\n",
            prog, type_list().c_str());
}

// convert n_rows rows of ne0 elements from src (type st, row stride src_nb1) to dst type dt (dense)
void convert_rows(const char * src, ggml_type st, size_t src_nb1, char * dst, ggml_type dt, int64_t ne0, int64_t r0,
                  int64_t r1) {
    std::vector<float> row(ne0);
    const ggml_type_traits * tsrc = ggml_get_type_traits(st);
    const ggml_type_traits * tdst = ggml_get_type_traits(dt);
    const size_t dst_row = ggml_row_size(dt, ne0);
    for (int64_t r = r0; r < r1; ++r) {
        tsrc->to_float(src + r * src_nb1, row.data(), ne0);
        tdst->from_float_ref(row.data(), dst + r * dst_row, ne0);
    }
}

double mib(uint64_t b) { return b / 1048576.0; }

bool same_file(const std::string & a, const std::string & b) {
    struct stat sa, sb;
    if (a == b) return true;
    return stat(a.c_str(), &sa) == 0 && stat(b.c_str(), &sb) == 0 && sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
}

// llama.cpp's tensor order (llama_model_loader's weight_name_comparer): tensors outside the layers first,
// then by layer number, by name within each; the mix visits and the output lists tensors in this order,
// so a file written here equals llama-quantize's byte for byte
std::vector<int64_t> llama_order(const gguf_context * g) {
    const int64_t n = gguf_get_n_tensors(g);
    std::vector<int64_t> order(n);
    std::vector<int> layer(n, -1);
    for (int64_t i = 0; i < n; ++i) {
        order[i] = i;
        sscanf(gguf_get_tensor_name(g, i), "blk.%d.", &layer[i]);
    }
    std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) {
        if (layer[a] != layer[b]) return layer[a] < layer[b];
        return strcmp(gguf_get_tensor_name(g, a), gguf_get_tensor_name(g, b)) < 0;
    });
    return order;
}

struct tensor_plan {
    quant_choice choice;
    int64_t      ne[4];
    int          n_dims;
    uint64_t     n_elements;
    size_t       in_size, out_size;
};

}  // namespace

int main(int argc, char ** argv) {
    bool dry_run = false, pure = false;
    std::vector<std::string> pos;
    for (int i = 1; i < argc; ++i) {
        const std::string a = argv[i];
        if (a == "--dry-run") dry_run = true;
        else if (a == "--pure") pure = true;
        else if (a == "--allow-requantize") {}  // requantizing is always allowed (with a warning)
        else if (a == "-h" || a == "--help") {
            usage(argv[0]);
            return 0;
        } else if (a.rfind("--", 0) == 0) {
            return fail("unknown option '" + a + "' (--dry-run, --allow-requantize, --pure)");
        } else pos.push_back(a);
    }
    // --dry-run may leave out the output path: in.gguf TYPE [threads]
    if (dry_run && (pos.size() == 2 || pos.size() == 3) && llm_ftype_from_name(pos[1])) pos.insert(pos.begin() + 1, "");
    if (pos.size() < 3 || pos.size() > 4) {
        return fail(std::string("usage: ") + argv[0] +
                    " [--dry-run] [--allow-requantize] [--pure] in.gguf out.gguf TYPE [threads] (--help lists the types)");
    }
    const std::string in_path = pos[0], out_path = pos[1], type_name = pos[2];
    const llm_ftype_info * fi = llm_ftype_from_name(type_name);
    if (!fi) return fail("unknown type '" + type_name + "'; valid types: " + type_list());
    int n_threads = (int) std::max(1u, std::thread::hardware_concurrency());
    if (pos.size() == 4) {
        char * end = nullptr;
        const long v = strtol(pos[3].c_str(), &end, 10);
        if (pos[3].empty() || *end || v < 1 || v > 1024) {
            return fail("invalid thread count '" + pos[3] + "' (1..1024)");
        }
        n_threads = (int) v;
    }
    if (!dry_run && same_file(in_path, out_path)) return fail("input and output are the same file");

    std::string err;
    gguf_context * in = gguf_init_from_file(in_path.c_str(), {true, nullptr}, &err);
    if (!in) return fail(err);

    // ---- plan: the type of every tensor, in llama.cpp's order ----------------------------------------------
    const int64_t n_tensors = gguf_get_n_tensors(in);
    const std::vector<int64_t> order = llama_order(in);
    quant_mixer mixer(in, *fi, pure);
    std::vector<tensor_plan> plan(n_tensors);
    llm_type_summary s_in = llm_type_summary_from_gguf(in), s_out;
    std::string requant_from;  // quantized input types that get requantized
    for (const int64_t i : order) {
        tensor_plan & p = plan[i];
        const std::string name = gguf_get_tensor_name(in, i);
        const ggml_type st = gguf_get_tensor_type(in, i);
        p.n_dims = gguf_get_tensor_n_dims(in, i);
        p.n_elements = 1;
        for (int d = 0; d < 4; ++d) {
            p.ne[d] = gguf_get_tensor_ne(in, i, d);
            p.n_elements *= (uint64_t) p.ne[d];
        }
        p.choice = mixer.choose(name, p.n_dims, p.ne, st);
        const ggml_type dt = p.choice.type;
        if (dt != st) {
            const ggml_type_traits * tt = ggml_get_type_traits(dt);
            if (!ggml_type_is_valid(dt) || !tt->from_float_ref) {
                gguf_free(in);
                return fail("tensor '" + name + "': quantizing to " + ggml_type_name(dt) +
                            " is not implemented in this build");
            }
            if (!ggml_get_type_traits(st)->to_float) {
                gguf_free(in);
                return fail("tensor '" + name + "': cannot convert from " + ggml_type_name(st));
            }
            if (ggml_is_quantized(st) && ggml_is_quantized(dt) &&
                requant_from.find(ggml_type_name(st)) == std::string::npos) {
                requant_from += (requant_from.empty() ? "" : ", ") + std::string(ggml_type_name(st));
            }
        }
        if (p.choice.fallback) fprintf(stderr, "warning: %s\n", p.choice.why.c_str());
        p.in_size = gguf_get_tensor_size(in, i);
        p.out_size = dt == st ? p.in_size : ggml_row_size(dt, p.ne[0]) * (p.n_elements / p.ne[0]);
        s_out.add(dt, p.n_elements, p.out_size);
    }
    s_out.ftype = fi->ftype;
    if (!requant_from.empty()) {
        fprintf(stderr,
                "warning: the input is already quantized (%s): those tensors are requantized through f32, which "
                "loses quality; quantize from the f16/f32 model when you have it\n",
                requant_from.c_str());
    }
    fprintf(stderr, "quantizing '%s' to '%s' as %s (%s)%s, %d threads\n", in_path.c_str(),
            dry_run ? "(dry run)" : out_path.c_str(), fi->name, llm_ftype_name(fi->ftype).c_str(),
            pure ? ", pure" : "", n_threads);

    // ---- output header ---------------------------------------------------------------------------------
    gguf_context * out = gguf_init_empty();
    gguf_set_kv(out, in);
    for (const char * key : {"general.quantization_version", "general.file_type"}) gguf_remove_key(out, key);  // last
    gguf_set_val_u32(out, "general.quantization_version", 2);
    gguf_set_val_u32(out, "general.file_type", (uint32_t) fi->ftype);
    ggml_context * meta = ggml_init({(size_t) (n_tensors + 1) * ggml_tensor_overhead(), nullptr, true});
    for (const int64_t i : order) {
        ggml_tensor * t = ggml_new_tensor(meta, plan[i].choice.type, 4, plan[i].ne);
        ggml_set_name(t, gguf_get_tensor_name(in, i));
        gguf_add_tensor(out, t);
    }
    auto cleanup = [&] {
        gguf_free(out);
        gguf_free(in);
        ggml_free(meta);
    };

    FILE * f = nullptr;
    if (!dry_run) {
        g_tmp_path = out_path + ".tmp";
        std::signal(SIGINT, on_signal);
        std::signal(SIGTERM, on_signal);
        f = fopen(g_tmp_path.c_str(), "wb");
        if (!f) {
            const std::string why = strerror(errno);
            g_tmp_path.clear();
            cleanup();
            return fail("cannot create '" + out_path + ".tmp': " + why);
        }
    }
    auto write_all = [&](const void * p, size_t n) { return n == 0 || fwrite(p, 1, n, f) == n; };
    bool ok = true;
    if (f) {
        const std::vector<uint8_t> header = gguf_get_meta_data(out);
        ok = write_all(header.data(), header.size());
        if (!ok) err = "write failed for '" + g_tmp_path + "': " + strerror(errno);
    }

    // ---- tensors ---------------------------------------------------------------------------------------
    size_t name_w = 0;
    for (int64_t i = 0; i < n_tensors; ++i) name_w = std::max(name_w, strlen(gguf_get_tensor_name(in, i)));
    const int idx_w = (int) std::to_string(n_tensors).size();
    const size_t align = gguf_get_alignment(out);
    std::vector<char> buf;
    const int64_t t0 = ggml_time_us();
    for (int64_t k = 0; ok && k < n_tensors; ++k) {
        const int64_t i = order[k];
        const tensor_plan & p = plan[i];
        const char * name = gguf_get_tensor_name(in, i);
        const ggml_type st = gguf_get_tensor_type(in, i), dt = p.choice.type;
        const int64_t ne0 = p.ne[0];
        const int64_t n_rows = (int64_t) (p.n_elements / ne0);
        std::string shape;
        for (int d = 0; d < p.n_dims; ++d) {
            char b[32];
            snprintf(b, sizeof(b), "%s%5lld", d ? ", " : "", (long long) p.ne[d]);
            shape += b;
        }
        printf("[%*lld/%*lld] %-*s - [%s], type = %s, ", idx_w, (long long) k + 1, idx_w, (long long) n_tensors,
               (int) name_w, name, shape.c_str(), ggml_type_name(st));
        if (dt != st) {
            printf("converting to %s .. ", ggml_type_name(dt));
        }
        fflush(stdout);
        if (f) {
            const char * src = (const char *) gguf_get_tensor_data(in, i);
            if (!src) {
                ok = false;
                err = std::string("no data for tensor '") + name + "'";
                printf("\n");
                break;
            }
            const char * data = src;
            if (dt != st) {
                buf.resize(p.out_size);
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
            const size_t pad = (align - p.out_size % align) % align;
            ok = write_all(data, p.out_size);
            for (size_t done = 0; ok && done < pad; done += sizeof(zeros)) {
                ok = write_all(zeros, std::min(sizeof(zeros), pad - done));
            }
            if (!ok) {
                err = "write failed for '" + g_tmp_path + "' at tensor '" + name + "': " + strerror(errno);
                printf("\n");
                break;
            }
        }
        if (dt != st) printf("size = %.2f MiB -> %.2f MiB\n", mib(p.in_size), mib(p.out_size));
        else printf("size = %.3f MiB\n", mib(p.in_size));
        fflush(stdout);
    }
    if (f) {
        if (ok && fflush(f) != 0) {
            ok = false;
            err = "write failed for '" + g_tmp_path + "': " + strerror(errno);
        }
        if (fclose(f) != 0 && ok) {
            ok = false;
            err = "closing '" + g_tmp_path + "' failed: " + strerror(errno);
        }
    }
    cleanup();
    if (!ok) return fail(err);
    if (f) {
        if (rename(g_tmp_path.c_str(), out_path.c_str()) != 0) {
            return fail("cannot rename '" + g_tmp_path + "' to '" + out_path + "': " + strerror(errno));
        }
        g_tmp_path.clear();
    }

    // ---- summary ---------------------------------------------------------------------------------------
    printf("model size: %s (%.2f BPW) -> %s (%.2f BPW), %.2fx smaller, %.2f s%s\n",
           llm_format_size(s_in.n_bytes).c_str(), s_in.bpw(), llm_format_size(s_out.n_bytes).c_str(), s_out.bpw(),
           s_out.n_bytes ? (double) s_in.n_bytes / (double) s_out.n_bytes : 0.0, (ggml_time_us() - t0) / 1e6,
           dry_run ? " (dry run: nothing written)" : "");
    printf("%s:\n", dry_run ? "output (dry run)" : out_path.c_str());
    llm_type_summary_print(stdout, s_out, "  ");
    return 0;
}
