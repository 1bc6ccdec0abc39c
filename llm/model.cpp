// model.cpp - load a Llama 2 / Llama 3 GGUF: hparams, vocab, weights.
//
// Every tensor is checked (present, shape, type) before any memory is allocated. CPU weights are read into CPU
// buffers (pread; 2 MiB pages) where some layer stays on the CPU and the file's tensor data takes at most half of the
// available memory (use_mmap -1, the default; 0: always), else used in place from the file mapping (a CPU buffer
// over the GGUF data section, usage WEIGHTS; use_mmap 1: always): decode streams them once a token, at up to 1.3x
// the rate from the copy (docs/cpu-notes.md). Layers below n_gpu_layers (and the output when n_gpu_layers >
// n_layer) are copied once into the device buffer of their GPU: main_gpu's, or with split mode layer and several
// GPUs consecutive layers on consecutive GPUs by tensor_split (llm_layer_split), the output with the last.
// token_embd stays on the CPU (get_rows there, as llama.cpp does) unless the whole model is offloaded (-ngl above
// n_layer) to one GPU and fits: then it goes to the GPU too, so that a step's graph is one GPU split (no CPU get_rows,
// no copy of n_embd x n_tokens f32 rows to the device; for a tied output it is the output's copy itself).
// LLM_EMBD_CPU=1 keeps it on the CPU (A/B, docs/perf.md).
#include "llm-impl.h"

#ifdef GGML_USE_CUDA
#include "ggml-cuda.h"
#endif

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cinttypes>
#include <cmath>
#include <cstdarg>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <map>
#include <unistd.h>

namespace {

std::string strfmt(const char * fmt, ...) {
    char buf[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof(buf), fmt, ap);
    va_end(ap);
    return buf;
}

std::string shape_str(const int64_t * ne, int n) {
    std::string s = "[";
    for (int i = 0; i < n; ++i) s += (i ? ", " : "") + std::to_string(ne[i]);
    return s + "]";
}

// Reads GGUF keys with type checks; every failure is one line in err.
struct kv_reader {
    const gguf_context * g;
    const std::string & path;
    std::string * err;

    bool fail(const std::string & msg) const {
        if (err) *err = path + ": " + msg;
        return false;
    }
    // any integer type; absent -> def (or error when required)
    bool get_int(const char * key, int64_t & out, bool required, int64_t def = 0) const {
        const int64_t id = gguf_find_key(g, key);
        if (id < 0) {
            if (required) return fail(strfmt("missing key '%s'", key));
            out = def;
            return true;
        }
        switch (gguf_get_kv_type(g, id)) {
            case GGUF_TYPE_UINT8:  out = gguf_get_val_u8(g, id); break;
            case GGUF_TYPE_INT8:   out = gguf_get_val_i8(g, id); break;
            case GGUF_TYPE_UINT16: out = gguf_get_val_u16(g, id); break;
            case GGUF_TYPE_INT16:  out = gguf_get_val_i16(g, id); break;
            case GGUF_TYPE_UINT32: out = gguf_get_val_u32(g, id); break;
            case GGUF_TYPE_INT32:  out = gguf_get_val_i32(g, id); break;
            case GGUF_TYPE_UINT64: {
                const uint64_t v = gguf_get_val_u64(g, id);
                if (v > (uint64_t) INT64_MAX) return fail(strfmt("key '%s' value %" PRIu64 " too large", key, v));
                out = (int64_t) v;
                break;
            }
            case GGUF_TYPE_INT64:  out = gguf_get_val_i64(g, id); break;
            default:
                return fail(strfmt("key '%s' has type %s, expected an integer", key,
                                   gguf_type_name(gguf_get_kv_type(g, id))));
        }
        return true;
    }
    // integer in [lo, hi]
    bool get_i32(const char * key, int32_t & out, bool required, int64_t lo, int64_t hi, int64_t def = 0) const {
        int64_t v = 0;
        if (!get_int(key, v, required, def)) return false;
        if (v < lo || v > hi) {
            return fail(strfmt("key '%s' = %" PRId64 " is out of range [%" PRId64 ", %" PRId64 "]", key, v, lo, hi));
        }
        out = (int32_t) v;
        return true;
    }
    bool get_f32(const char * key, float & out, bool required, float def) const {
        const int64_t id = gguf_find_key(g, key);
        if (id < 0) {
            if (required) return fail(strfmt("missing key '%s'", key));
            out = def;
            return true;
        }
        const gguf_type t = gguf_get_kv_type(g, id);
        if (t == GGUF_TYPE_FLOAT32) out = gguf_get_val_f32(g, id);
        else if (t == GGUF_TYPE_FLOAT64) out = (float) gguf_get_val_f64(g, id);
        else return fail(strfmt("key '%s' has type %s, expected a float", key, gguf_type_name(t)));
        if (!std::isfinite(out)) return fail(strfmt("key '%s' is not finite", key));
        return true;
    }
    bool get_str(const char * key, std::string & out, bool required) const {
        const int64_t id = gguf_find_key(g, key);
        if (id < 0) {
            if (required) return fail(strfmt("missing key '%s'", key));
            out.clear();
            return true;
        }
        if (gguf_get_kv_type(g, id) != GGUF_TYPE_STRING) {
            return fail(strfmt("key '%s' has type %s, expected a string", key,
                               gguf_type_name(gguf_get_kv_type(g, id))));
        }
        out = gguf_get_val_str(g, id);
        return true;
    }
};

bool load_hparams(llm_model & m, std::string * err) {
    const kv_reader r{m.gguf, m.path, err};
    std::string arch;
    if (!r.get_str("general.architecture", arch, true)) return false;
    if (arch != "llama") return r.fail(strfmt("unknown architecture '%s'", arch.c_str()));
    if (!r.get_str("general.name", m.name, false)) return false;

    llm_hparams & hp = m.hp;
    const int64_t big = 1 << 24;
    if (!r.get_i32("llama.context_length", hp.n_ctx_train, true, 1, 1 << 24)) return false;
    if (!r.get_i32("llama.embedding_length", hp.n_embd, true, 1, big)) return false;
    if (!r.get_i32("llama.block_count", hp.n_layer, true, 1, 4096)) return false;
    if (!r.get_i32("llama.feed_forward_length", hp.n_ff, true, 1, big)) return false;
    if (!r.get_i32("llama.attention.head_count", hp.n_head, true, 1, 4096)) return false;
    if (!r.get_i32("llama.attention.head_count_kv", hp.n_head_kv, false, 1, 4096, hp.n_head)) return false;
    if (hp.n_embd % hp.n_head != 0) {
        return r.fail(strfmt("embedding_length %d is not a multiple of head_count %d", hp.n_embd, hp.n_head));
    }
    if (hp.n_head % hp.n_head_kv != 0) {
        return r.fail(strfmt("head_count %d is not a multiple of head_count_kv %d", hp.n_head, hp.n_head_kv));
    }
    hp.n_embd_head = hp.n_embd / hp.n_head;
    int32_t key_len = 0, val_len = 0;
    if (!r.get_i32("llama.attention.key_length", key_len, false, 1, big, hp.n_embd_head)) return false;
    if (!r.get_i32("llama.attention.value_length", val_len, false, 1, big, hp.n_embd_head)) return false;
    if (key_len != hp.n_embd_head || val_len != hp.n_embd_head) {
        return r.fail(strfmt("attention.key_length/value_length %d/%d != embedding_length/head_count %d: not supported",
                             key_len, val_len, hp.n_embd_head));
    }
    if (!r.get_f32("llama.attention.layer_norm_rms_epsilon", hp.rms_eps, false, 1e-5f)) return false;
    if (!(hp.rms_eps > 0)) return r.fail("llama.attention.layer_norm_rms_epsilon must be > 0");
    if (!r.get_f32("llama.rope.freq_base", hp.rope_freq_base, false, 10000.0f)) return false;
    if (!(hp.rope_freq_base > 0)) return r.fail("llama.rope.freq_base must be > 0");
    if (!r.get_i32("llama.rope.dimension_count", hp.n_rot, false, 2, hp.n_embd_head, hp.n_embd_head)) return false;
    if (hp.n_rot % 2 != 0) return r.fail(strfmt("llama.rope.dimension_count %d is odd", hp.n_rot));

    std::string scaling;
    if (!r.get_str("llama.rope.scaling.type", scaling, false)) return false;
    hp.rope_freq_scale = 1.0f;
    if (scaling == "linear") {
        float factor = 1.0f;
        if (!r.get_f32("llama.rope.scaling.factor", factor, true, 1.0f)) return false;
        if (!(factor > 0)) return r.fail(strfmt("llama.rope.scaling.factor %g must be > 0", factor));
        hp.rope_freq_scale = 1.0f / factor;
    } else if (!scaling.empty() && scaling != "none") {
        return r.fail(strfmt("llama.rope.scaling.type '%s' is not supported (none, linear)", scaling.c_str()));
    }
    return true;
}

enum weight_place { PLACE_CPU, PLACE_GPU };

struct tensor_loader {
    llm_model & m;
    std::string * err;
    int n_used = 0;

    bool fail(const std::string & msg) const {
        if (err) *err = m.path + ": " + msg;
        return false;
    }
    // Find name, check its shape ne[0..n) and type; *out = the meta tensor (data in the mapping).
    bool get(const std::string & name, std::initializer_list<int64_t> shape, bool f32_only, ggml_tensor ** out,
             bool required = true) {
        *out = nullptr;
        ggml_tensor * t = ggml_get_tensor(m.ctx_meta, name.c_str());
        if (!t) {
            if (!required) return true;
            return fail(strfmt("missing tensor '%s'", name.c_str()));
        }
        const int n = (int) shape.size();
        int64_t want[GGML_MAX_DIMS] = {1, 1, 1, 1};
        int i = 0;
        for (int64_t v : shape) want[i++] = v;
        bool ok = true;
        for (int d = 0; d < GGML_MAX_DIMS; ++d) ok = ok && t->ne[d] == want[d];
        if (!ok) {
            return fail(strfmt("tensor '%s' has shape %s, expected %s", name.c_str(),
                               shape_str(t->ne, std::max(ggml_n_dims(t), n)).c_str(), shape_str(want, n).c_str()));
        }
        // weights: f32, f16 or any quantized type the library implements (not the activation-only q8_1, q8_K)
        const bool type_ok = f32_only ? t->type == GGML_TYPE_F32
                                      : ggml_type_is_valid(t->type) && t->type != GGML_TYPE_Q8_1 &&
                                            t->type != GGML_TYPE_Q8_K && t->type != GGML_TYPE_I32;
        if (!type_ok) {
            return fail(strfmt("tensor '%s' has unsupported type %s (supported: %s)", name.c_str(),
                               ggml_type_name(t->type),
                               f32_only ? "f32" : "f32, f16, q4_0, q4_1, q5_0, q5_1, q8_0, q2_K..q6_K"));
        }
        ++n_used;
        *out = t;
        return true;
    }
};

struct copy_job {
    ggml_tensor * src;  // meta tensor (data in the mapping)
    ggml_tensor * dst;  // tensor in a copy context
    // split mode row: dst is the slice of src from row r0 and element c0 of each row (a whole block); dst's shape
    // says how many
    int64_t r0 = 0, c0 = 0;
    bool whole() const { return dst->ne[0] == src->ne[0] && dst->ne[1] == src->ne[1]; }
};

double mib(size_t b) { return b / (1024.0 * 1024.0); }

// MemAvailable of /proc/meminfo in bytes (0 where it cannot be read: then nothing is copied by default)
size_t available_memory() {
    FILE * f = fopen("/proc/meminfo", "r");
    if (!f) return 0;
    char line[256];
    unsigned long long kb = 0;
    while (fgets(line, sizeof(line), f)) {
        if (sscanf(line, "MemAvailable: %llu kB", &kb) == 1) break;
    }
    fclose(f);
    return (size_t) kb * 1024;
}

// Reads the file bytes of meta tensor src (data in the mapping of g) into host memory dst with pread: the mapping's
// pages are never touched, so the copy takes no page faults on the source (a CPU buffer of 32 MiB and more is on
// 2 MiB pages): 2.2 GB of f16 weights from the page cache in 0.3-0.7 s against ~2 s by memcpy from the mapping
// (docs/cpu-notes.md). False (nothing promised about dst) where a read fails.
bool read_tensor_bytes(int fd, const gguf_context * g, const ggml_tensor * src, void * dst) {
    if (fd < 0) return false;
    const size_t n = ggml_nbytes(src);
    const size_t off = (size_t) ((const char *) src->data - (const char *) gguf_get_data(g)) + gguf_get_data_offset(g);
    for (size_t done = 0; done < n;) {
        const size_t want = std::min<size_t>(n - done, (size_t) 1 << 30);
        const ssize_t got = pread(fd, (char *) dst + done, want, (off_t) (off + done));
        if (got <= 0) {
            if (got < 0 && errno == EINTR) continue;
            return false;
        }
        done += (size_t) got;
    }
    return true;
}

// A slice (split mode row) gathered row by row from the mapping into stage, then uploaded at once.
void upload_slice(const copy_job & j, std::vector<uint8_t> & stage) {
    const size_t row = j.dst->nb[1], off = ggml_row_size(j.src->type, j.c0);
    stage.resize(ggml_nbytes(j.dst));
    for (int64_t r = 0; r < j.dst->ne[1]; ++r) {
        memcpy(stage.data() + r * row, (const char *) j.src->data + (j.r0 + r) * j.src->nb[1] + off, row);
    }
    ggml_backend_tensor_set(j.dst, stage.data(), 0, stage.size());
}

// Split mode row: the KV heads and FFN columns of each device (kv_first, ff_first: llm_row_split's boundaries). The
// column slices of wo and ffn_down start and end on whole blocks of their types; every device gets a KV head and an
// FFN block.
bool split_rows(const llm_model & m, const std::vector<double> & share, std::vector<int> & kv_first,
                std::vector<int> & ff_first, std::string * err) {
    const llm_hparams & hp = m.hp;
    const int n_dev = (int) share.size();
    auto fail = [&](const std::string & msg) {
        if (err) *err = m.path + ": split mode row: " + msg;
        return false;
    };
    int64_t blck_o = 1, blck_ff = 1;
    for (const llm_layer & L : m.layers) {
        blck_o = std::max<int64_t>(blck_o, ggml_blck_size(L.wo->type));
        blck_ff = std::max<int64_t>(blck_ff, ggml_blck_size(L.ffn_down->type));
    }
    if (hp.n_ff % blck_ff != 0) {
        return fail(strfmt("n_ff %d is not a multiple of ffn_down's block of %" PRId64, hp.n_ff, blck_ff));
    }
    kv_first = llm_row_split(hp.n_head_kv, share);
    ff_first = llm_row_split((int) (hp.n_ff / blck_ff), share);
    const int64_t head_cols = (int64_t) hp.n_embd_head * (hp.n_head / hp.n_head_kv);  // wo columns of a KV head
    for (int d = 0; d < n_dev; ++d) {
        ff_first[d + 1] *= (int) blck_ff;
        if (kv_first[d + 1] == kv_first[d] || ff_first[d + 1] == ff_first[d]) {
            return fail(strfmt("%d devices by these shares leave device %d no KV head (of %d) or FFN block (of %" PRId64
                               "): use fewer devices or other -ts", n_dev, d, hp.n_head_kv, hp.n_ff / blck_ff));
        }
        if (kv_first[d] * head_cols % blck_o != 0) {
            return fail(strfmt("device %d's columns of attn_output start at %" PRId64 ", inside a block of %" PRId64
                               " (use other -ts, or fewer devices)", d, kv_first[d] * head_cols, blck_o));
        }
    }
    return true;
}

}  // namespace

void llm_model_free(llm_model * m) {
    if (!m) return;
    for (auto * b : m->buf_dev) ggml_backend_buffer_free(b);
    if (m->buf_host) ggml_backend_buffer_free(m->buf_host);
    if (m->buf_mmap) ggml_backend_buffer_free(m->buf_mmap);
    if (m->buf_repack) ggml_backend_buffer_free(m->buf_repack);
    for (auto * c : m->ctx_dev) ggml_free(c);
    ggml_free(m->ctx_host);
    ggml_free(m->ctx_repack);
    ggml_free(m->ctx_meta);
    gguf_free(m->gguf);
    delete m;
}

static bool load_tensors(llm_model & m, const llm_model_params & params, std::string * err) {
    const llm_hparams & hp = m.hp;
    tensor_loader tl{m, err};
    const int64_t n_embd = hp.n_embd, n_ff = hp.n_ff, n_kv = hp.n_embd_k_gqa();

    // ---- names, shapes, types --------------------------------------------------------------------
    ggml_tensor * tok_embd = ggml_get_tensor(m.ctx_meta, "token_embd.weight");
    if (!tok_embd) return tl.fail("missing tensor 'token_embd.weight'");
    m.hp.n_vocab = m.vocab.n_vocab() > 0 ? m.vocab.n_vocab() : (int32_t) tok_embd->ne[1];
    const int64_t n_vocab = m.hp.n_vocab;
    if (!tl.get("token_embd.weight", {n_embd, n_vocab}, false, &m.tok_embd)) return false;
    if (!tl.get("output_norm.weight", {n_embd}, true, &m.output_norm)) return false;
    if (!tl.get("output.weight", {n_embd, n_vocab}, false, &m.output, /*required=*/false)) return false;
    m.hp.tied_output = m.output == nullptr;
    ggml_tensor * rope_freqs = nullptr;
    if (!tl.get("rope_freqs.weight", {hp.n_rot / 2}, true, &rope_freqs, false)) return false;

    m.layers.resize(hp.n_layer);
    for (int il = 0; il < hp.n_layer; ++il) {
        llm_layer & L = m.layers[il];
        auto nm = [il](const char * s) { return strfmt("blk.%d.%s.weight", il, s); };
        if (!tl.get(nm("attn_norm"), {n_embd}, true, &L.attn_norm)) return false;
        if (!tl.get(nm("attn_q"), {n_embd, n_embd}, false, &L.wq)) return false;
        if (!tl.get(nm("attn_k"), {n_embd, n_kv}, false, &L.wk)) return false;
        if (!tl.get(nm("attn_v"), {n_embd, n_kv}, false, &L.wv)) return false;
        if (!tl.get(nm("attn_output"), {n_embd, n_embd}, false, &L.wo)) return false;
        if (!tl.get(nm("ffn_norm"), {n_embd}, true, &L.ffn_norm)) return false;
        if (!tl.get(nm("ffn_gate"), {n_embd, n_ff}, false, &L.ffn_gate)) return false;
        if (!tl.get(nm("ffn_up"), {n_embd, n_ff}, false, &L.ffn_up)) return false;
        if (!tl.get(nm("ffn_down"), {n_ff, n_embd}, false, &L.ffn_down)) return false;
        L.rope_freqs = rope_freqs;
    }
    if (tl.n_used != gguf_get_n_tensors(m.gguf)) {
        GGML_LOG_WARN("%s: %s: %" PRId64 " tensors in the file, %d used\n", __func__, m.path.c_str(),
                      gguf_get_n_tensors(m.gguf), tl.n_used);
    }

    // ---- placement ----------------------------------------------------------------------------------
    // The offloaded layers (and the output, counted as layer n_layer when n_gpu_layers > n_layer) go to m.devices:
    // main_gpu alone, or with split mode layer every CUDA device with a share, by llm_layer_split.
    int n_gpu = 0;
    std::vector<ggml_backend_buffer_type_t> buft_dev;  // per entry of m.devices
    std::vector<int> layer_dev(hp.n_layer, -1);       // per layer: index into m.devices, -1 the CPU
    int output_dev = -1;
    const bool sim = params.sim_devices >= 2;
    m.sim_devices = sim;
    int n_avail = sim ? std::min(params.sim_devices, GGML_CPU_SIM_MAX - 1) : 0;  // devices to choose from
    std::string kind = sim ? "simulated" : "CUDA";
#ifdef GGML_USE_CUDA
    if (!sim) n_avail = ggml_backend_cuda_get_device_count();
    if (params.n_gpu_layers > 0 && n_avail == 0) {
        GGML_LOG_WARN("%s: no CUDA device: -ngl %d ignored, running on the CPU\n", __func__, params.n_gpu_layers);
    }
#endif
    auto buft_of = [&](int d) -> ggml_backend_buffer_type_t {
        if (sim) return ggml_backend_cpu_sim_buffer_type(d + 1);
#ifdef GGML_USE_CUDA
        return ggml_backend_cuda_buffer_type(d);
#else
        return nullptr;
#endif
    };
    bool row = false;  // split mode row over several devices (m.shards)
    std::vector<int> kv_first, ff_first;  // row: each device's first KV head and FFN column (and the end)
    if (params.n_gpu_layers > 0 && n_avail > 0) {
        if (params.main_gpu < 0 || params.main_gpu >= n_avail) {
            return tl.fail(strfmt("%s device %d is not available (%d found)", kind.c_str(), params.main_gpu, n_avail));
        }
        n_gpu = std::min(params.n_gpu_layers, hp.n_layer);
        std::vector<int> devs;
        std::vector<double> share;
        if (params.split_mode == LLM_SPLIT_NONE || n_avail == 1) {
            devs = {params.main_gpu};
            share = {1.0};
        } else {
            const auto & ts = params.tensor_split;
            if ((int) ts.size() > n_avail) {
                return tl.fail(strfmt("--tensor-split has %d values for %d %s devices", (int) ts.size(), n_avail,
                                      kind.c_str()));
            }
            for (int d = 0; d < n_avail; ++d) {
                double w = sim ? 1.0 : 0.0;
#ifdef GGML_USE_CUDA
                if (!sim && ts.empty()) {
                    size_t fr = 0, tot = 0;
                    ggml_backend_cuda_get_device_memory(d, &fr, &tot);
                    w = (double) fr;
                }
#endif
                if (!ts.empty()) w = d < (int) ts.size() ? ts[d] : 0.0;
                if (!(w >= 0) || !std::isfinite(w)) {
                    return tl.fail(strfmt("--tensor-split value %g for device %d", w, d));
                }
                if (w > 0) {
                    devs.push_back(d);
                    share.push_back(w);
                }
            }
            if (devs.empty()) return tl.fail("--tensor-split gives no device a share");
        }
        row = params.split_mode == LLM_SPLIT_ROW && devs.size() > 1;
        // row: main_gpu (when it has a share) is shard 0, which holds the output (llama.cpp's -mg with -sm row)
        const auto mg = std::find(devs.begin(), devs.end(), params.main_gpu);
        if (row && mg != devs.end()) {
            const size_t k = mg - devs.begin();
            std::rotate(devs.begin(), devs.begin() + k, devs.end());
            std::rotate(share.begin(), share.begin() + k, share.end());
        }
        if (row && !split_rows(m, share, kv_first, ff_first, err)) return false;
        const std::vector<int> unit_dev =
            row ? std::vector<int>(n_gpu + (params.n_gpu_layers > hp.n_layer), 0)  // shard 0: the output
                : llm_layer_split(hp.n_layer, params.n_gpu_layers, share);
        std::vector<int> slot(devs.size(), -1);  // devs index -> m.devices index (the devices that get something)
        for (size_t u = 0; u < unit_dev.size(); ++u) {
            const int i = unit_dev[u];
            if (slot[i] < 0) {
                ggml_backend_buffer_type_t b = buft_of(devs[i]);
                if (!b) return tl.fail(strfmt("%s device %d is not available", kind.c_str(), devs[i]));
                slot[i] = (int) m.devices.size();
                m.devices.push_back(devs[i]);
                buft_dev.push_back(b);
            }
            (u < (size_t) n_gpu ? layer_dev[u] : output_dev) = slot[i];
        }
        for (size_t i = 1; row && i < devs.size(); ++i) {  // every device holds a slice of every layer
            ggml_backend_buffer_type_t b = buft_of(devs[i]);
            if (!b) return tl.fail(strfmt("%s device %d is not available", kind.c_str(), devs[i]));
            m.devices.push_back(devs[i]);
            buft_dev.push_back(b);
        }
    }
    m.n_gpu_layers = n_gpu;
    m.output_on_gpu = output_dev >= 0;
    m.main_gpu = m.devices.empty() ? params.main_gpu : m.devices[0];
    const int n_dev = (int) m.devices.size();
    // per device: free memory, and the KV cache of the context to come on its layers (0 without n_ctx_hint): both
    // weighed against the weights before any upload
    std::vector<size_t> free_mem(n_dev, SIZE_MAX), kv_bytes(n_dev, 0);
#ifdef GGML_USE_CUDA
    for (int i = 0; i < n_dev && !sim; ++i) {
        size_t total_mem = 0;
        ggml_backend_cuda_get_device_memory(m.devices[i], &free_mem[i], &total_mem);
    }
    if (params.n_ctx_hint > 0) {
        const int64_t n_embd_kv = hp.n_embd_k_gqa();
        const size_t per_layer = (size_t) params.n_ctx_hint * (ggml_row_size(params.type_k_hint, n_embd_kv) +
                                                               ggml_row_size(params.type_v_hint, n_embd_kv));
        for (int il = 0; il < n_gpu && !row; ++il) kv_bytes[layer_dev[il]] += per_layer;
        for (int d = 0; d < n_dev && row; ++d) {
            const int64_t n_kv_d = (int64_t) (kv_first[d + 1] - kv_first[d]) * hp.n_embd_head;
            kv_bytes[d] = (size_t) params.n_ctx_hint * n_gpu *
                          (ggml_row_size(params.type_k_hint, n_kv_d) + ggml_row_size(params.type_v_hint, n_kv_d));
        }
    }
#endif

    ggml_backend_buffer_type_t buft_cpu = ggml_backend_cpu_buffer_type();
    const size_t n_dev_tensors = 16 + 12 * (size_t) hp.n_layer;
    for (int i = 0; i < n_dev; ++i) {
        m.ctx_dev.push_back(ggml_init({n_dev_tensors * ggml_tensor_overhead(), nullptr, true}));
    }
    // CPU weights read into CPU buffers (use_mmap 0; -1: where some layer stays on the CPU and the file's tensor data
    // takes at most half of the available memory), else used in place from the file mapping
    bool copy_cpu = params.use_mmap == 0;
    if (params.use_mmap < 0 && n_gpu < hp.n_layer) {
        const size_t data_size = gguf_get_file_size(m.gguf) - gguf_get_data_offset(m.gguf);
        copy_cpu = data_size <= available_memory() / 2;
    }
    ggml_context * ctx_host = nullptr;  // copy_cpu: CPU copies
    if (copy_cpu) ctx_host = ggml_init({n_dev_tensors * ggml_tensor_overhead(), nullptr, true});
    m.ctx_host = ctx_host;  // owned by the model from here on

    std::vector<copy_job> jobs_dev, jobs_host, jobs_repack;
    std::vector<ggml_tensor *> mmap_tensors;
    std::map<std::pair<ggml_tensor *, int>, ggml_tensor *> placed;  // (meta, device or -1) -> final tensor
    // dev: index into m.devices, -1 the CPU. mm: t is only ever a mat-mul weight, so a CPU copy may be repacked (the
    // token embedding, read by get_rows, is not; a tied output is that same tensor)
    auto place = [&](ggml_tensor * t, int dev, const char * name = nullptr, bool mm = false) -> ggml_tensor * {
        if (!t) return nullptr;
        auto it = placed.find({t, dev});
        if (it != placed.end()) return it->second;
        ggml_tensor * out = t;
        const bool gpu = dev >= 0;
        const bool repack = !gpu && mm && params.use_repack && ggml_backend_cpu_repack_wanted(t->type);
        if (repack) {
            if (!m.ctx_repack) m.ctx_repack = ggml_init({n_dev_tensors * ggml_tensor_overhead(), nullptr, true});
            out = ggml_dup_tensor(m.ctx_repack, t);
            ggml_set_name(out, name ? name : t->name);
            jobs_repack.push_back({t, out});
        } else if (gpu || ctx_host) {
            ggml_context * c = gpu ? m.ctx_dev[dev] : ctx_host;
            out = ggml_dup_tensor(c, t);
            ggml_set_name(out, name ? name : t->name);
            (gpu ? jobs_dev : jobs_host).push_back({t, out});
        } else {
            mmap_tensors.push_back(t);
        }
        placed[{t, dev}] = out;
        return out;
    };
    // the token embedding on the GPU with everything else, if there is one device and the file's tensors and the KV
    // cache fit in its free memory (the file's bytes: the device copies of all its other tensors plus the embedding);
    // a tied output's GPU copy is the embedding's. With the layers split over devices it stays on the CPU.
    bool embd_gpu = m.output_on_gpu && n_dev == 1;
    if (const char * e = std::getenv("LLM_EMBD_CPU")) embd_gpu = embd_gpu && std::atoi(e) == 0;
#ifdef GGML_USE_CUDA
    if (embd_gpu && !hp.tied_output) {
        const size_t need = gguf_get_file_size(m.gguf) - gguf_get_data_offset(m.gguf) + kv_bytes[0];
        if (need > free_mem[0]) {
            embd_gpu = false;
            GGML_LOG_INFO("%s: token_embd stays on the CPU: the model and its KV cache need %.1f MiB, CUDA%d has %.1f MiB "
                          "free\n", __func__, mib(need), m.devices[0], mib(free_mem[0]));
        }
    }
#endif
    m.tok_embd = place(m.tok_embd, embd_gpu ? 0 : -1);
    m.tok_embd_on_gpu = embd_gpu;
    // split mode row: columns [c0, c0 + nc) of rows [r0, r0 + nr) of matrix t, a tensor of its own on device dev
    auto slice = [&](ggml_tensor * t, int dev, int64_t c0, int64_t nc, int64_t r0, int64_t nr) {
        ggml_tensor * out = ggml_new_tensor_2d(m.ctx_dev[dev], t->type, nc, nr);
        ggml_set_name(out, t->name);
        jobs_dev.push_back({t, out, r0, c0});
        return out;
    };
    if (row) m.shards.resize(n_dev);
    for (int d = 0; d < (int) m.shards.size(); ++d) {
        llm_shard & sh = m.shards[d];
        const int group = hp.n_head / hp.n_head_kv;
        const int64_t hd = hp.n_embd_head;
        sh.head_kv0 = kv_first[d];
        sh.n_head_kv = kv_first[d + 1] - kv_first[d];
        sh.n_head = sh.n_head_kv * group;
        sh.ff0 = ff_first[d];
        sh.n_ff = ff_first[d + 1] - ff_first[d];
        const int64_t q0 = (int64_t) sh.head_kv0 * group * hd, nq = (int64_t) sh.n_head * hd;
        const int64_t k0 = (int64_t) sh.head_kv0 * hd, nk = (int64_t) sh.n_head_kv * hd;
        sh.layers.resize(n_gpu);  // the offloaded layers; the rest run whole on the CPU (shard 0's graph)
        for (int il = 0; il < n_gpu; ++il) {
            const llm_layer & L = m.layers[il];
            llm_layer & S = sh.layers[il];
            S.buft = buft_dev[d];
            S.attn_norm = place(L.attn_norm, d);
            S.ffn_norm = place(L.ffn_norm, d);
            S.rope_freqs = place(L.rope_freqs, d);
            S.wq = slice(L.wq, d, 0, n_embd, q0, nq);                 // [n_embd, nq]
            S.wk = slice(L.wk, d, 0, n_embd, k0, nk);                 // [n_embd, nk]
            S.wv = slice(L.wv, d, 0, n_embd, k0, nk);
            S.wo = slice(L.wo, d, q0, nq, 0, n_embd);                 // [nq, n_embd]
            S.ffn_gate = slice(L.ffn_gate, d, 0, n_embd, sh.ff0, sh.n_ff);  // [n_embd, n_ff_d]
            S.ffn_up = slice(L.ffn_up, d, 0, n_embd, sh.ff0, sh.n_ff);
            S.ffn_down = slice(L.ffn_down, d, sh.ff0, sh.n_ff, 0, n_embd);  // [n_ff_d, n_embd]
        }
    }
    if (row) std::copy(m.shards[0].layers.begin(), m.shards[0].layers.end(), m.layers.begin());
    for (int il = row ? n_gpu : 0; il < hp.n_layer; ++il) {
        llm_layer & L = m.layers[il];
        const int d = layer_dev[il];
        L.buft = d >= 0 ? buft_dev[d] : buft_cpu;
        for (ggml_tensor ** w : {&L.attn_norm, &L.ffn_norm, &L.rope_freqs}) {
            *w = place(*w, d);
        }
        for (ggml_tensor ** w : {&L.wq, &L.wk, &L.wv, &L.wo, &L.ffn_gate, &L.ffn_up, &L.ffn_down}) {
            *w = place(*w, d, nullptr, true);
        }
    }
    m.output_norm = place(m.output_norm, output_dev);
    if (m.hp.tied_output) {
        ggml_tensor * src = ggml_get_tensor(m.ctx_meta, "token_embd.weight");
        m.output = output_dev >= 0 ? place(src, output_dev, "output.weight") : m.tok_embd;
    } else {
        m.output = place(m.output, output_dev, nullptr, true);
    }

    // ---- buffers -----------------------------------------------------------------------------------
    size_t dev_bytes = 0, host_bytes = 0, mmap_bytes = 0, repack_bytes = 0;
    std::vector<size_t> dev_bytes_of(n_dev, 0);
    std::vector<int> dev_layers(n_dev, 0);
    for (int il = 0; il < n_gpu; ++il) {
        for (int d = 0; d < n_dev; ++d) dev_layers[d] += row ? 1 : layer_dev[il] == d;
    }
    for (int d = 0; d < n_dev; ++d) {
        for (ggml_tensor * t = ggml_get_first_tensor(m.ctx_dev[d]); t; t = ggml_get_next_tensor(m.ctx_dev[d], t)) {
            dev_bytes_of[d] += ggml_backend_buft_get_alloc_size(buft_dev[d], t);
        }
        dev_bytes += dev_bytes_of[d];
    }
    for (auto & j : jobs_host) host_bytes += ggml_nbytes(j.dst);
    for (auto & j : jobs_repack) repack_bytes += ggml_nbytes(j.dst);
    for (auto * t : mmap_tensors) mmap_bytes += ggml_nbytes(t);

    for (int d = 0; d < n_dev; ++d) {
        if (dev_bytes_of[d] == 0) continue;
        const char * name = ggml_backend_buft_name(buft_dev[d]);
#ifdef GGML_USE_CUDA
        if (dev_bytes_of[d] + kv_bytes[d] > free_mem[d]) {
            if (kv_bytes[d] == 0) {
                return tl.fail(strfmt("out of device memory: %d layers need %.1f MiB of weights, %s has %.1f MiB free",
                                      dev_layers[d], mib(dev_bytes_of[d]), name, mib(free_mem[d])));
            }
            return tl.fail(strfmt("out of device memory: n_ctx %d needs %.1f MiB of KV cache (%s K, %s V) + %.1f MiB of "
                                  "weights on %d layers, %s has %.1f MiB free; use a smaller -c, a quantized cache "
                                  "(-ctk/-ctv q8_0) or fewer -ngl",
                                  params.n_ctx_hint, mib(kv_bytes[d]), ggml_type_name(params.type_k_hint),
                                  ggml_type_name(params.type_v_hint), mib(dev_bytes_of[d]), dev_layers[d], name,
                                  mib(free_mem[d])));
        }
#endif
        ggml_backend_buffer_t buf = ggml_backend_alloc_ctx_tensors_from_buft(m.ctx_dev[d], buft_dev[d]);
        if (!buf) {
            return tl.fail(strfmt("out of device memory: allocating %.1f MiB of weights on %s failed",
                                  mib(dev_bytes_of[d]), name));
        }
        m.buf_dev.push_back(buf);
        ggml_backend_buffer_set_usage(buf, GGML_BACKEND_BUFFER_USAGE_WEIGHTS);
        m.buffer_sizes.push_back({name, ggml_backend_buffer_get_size(buf)});
    }
    if (ctx_host) {
        m.buf_host = ggml_backend_alloc_ctx_tensors_from_buft(ctx_host, buft_cpu);
        if (!m.buf_host) {
            return tl.fail(strfmt("out of memory: allocating %.1f MiB of weights failed", mib(host_bytes)));
        }
        ggml_backend_buffer_set_usage(m.buf_host, GGML_BACKEND_BUFFER_USAGE_WEIGHTS);
        m.buffer_sizes.push_back({"CPU", host_bytes});
    }
    if (m.ctx_repack) {
        ggml_backend_buffer_type_t buft = ggml_backend_cpu_repack_buffer_type();
        m.buf_repack = ggml_backend_alloc_ctx_tensors_from_buft(m.ctx_repack, buft);
        if (!m.buf_repack) {
            return tl.fail(strfmt("out of memory: allocating %.1f MiB of repacked weights failed", mib(repack_bytes)));
        }
        ggml_backend_buffer_set_usage(m.buf_repack, GGML_BACKEND_BUFFER_USAGE_WEIGHTS);
        m.buffer_sizes.push_back({ggml_backend_buft_name(buft), repack_bytes});
    }
    if (!mmap_tensors.empty()) {
        const size_t data_size = gguf_get_file_size(m.gguf) - gguf_get_data_offset(m.gguf);
        m.buf_mmap = ggml_backend_cpu_buffer_from_ptr(const_cast<void *>(gguf_get_data(m.gguf)), data_size);
        if (!m.buf_mmap) return tl.fail("cannot wrap the file mapping as a CPU buffer");
        ggml_backend_buffer_set_usage(m.buf_mmap, GGML_BACKEND_BUFFER_USAGE_WEIGHTS);
        for (ggml_tensor * t : mmap_tensors) {
            void * addr = t->data;
            t->data = nullptr;
            ggml_backend_tensor_alloc(m.buf_mmap, t, addr);
        }
        m.buffer_sizes.push_back({"CPU (mmap)", mmap_bytes});
    }

    // ---- upload ------------------------------------------------------------------------------------
    const size_t total = dev_bytes + host_bytes + repack_bytes;
    size_t done = 0;
    bool cancelled = false;
    // the CPU copies read from the file (pread), the rest from the mapping (falling back to it where a read fails)
    const int fd = jobs_host.empty() ? -1 : open(m.path.c_str(), O_RDONLY | O_CLOEXEC);
    std::vector<uint8_t> stage;  // a slice's rows gathered (split mode row)
    for (auto * jobs : {&jobs_dev, &jobs_host, &jobs_repack}) {
        for (auto & j : *jobs) {
            if (cancelled) break;
            if (!j.whole()) {
                upload_slice(j, stage);
            } else if (jobs != &jobs_host || !ggml_backend_buffer_is_host(j.dst->buffer) ||
                       !read_tensor_bytes(fd, m.gguf, j.src, j.dst->data)) {
                ggml_backend_tensor_set(j.dst, j.src->data, 0, ggml_nbytes(j.src));
            }
            done += ggml_nbytes(j.dst);
            if (params.progress && !params.progress(total ? (float) done / total : 1.0f)) cancelled = true;
        }
    }
    if (fd >= 0) close(fd);
    if (cancelled) return tl.fail("loading cancelled");
    if (params.progress && total == 0) params.progress(1.0f);

    if (params.verbose || !jobs_dev.empty()) {
        // "CUDA0", "CUDA0 (layers 0-15), CUDA1 (16-31)" or "CUDA0 (KV heads 0-3, FFN 0-5631), CUDA1 (...)"
        std::string where = n_dev == 0 ? "-" : "";
        for (int d = 0, il = 0; d < n_dev; ++d) {
            where += (d ? ", " : "") + std::string(ggml_backend_buft_name(buft_dev[d]));
            if (n_dev == 1) break;
            if (row) {
                const llm_shard & sh = m.shards[d];
                where += strfmt(" (KV heads %d-%d, FFN %d-%d)", sh.head_kv0, sh.head_kv0 + sh.n_head_kv - 1, sh.ff0,
                                sh.ff0 + sh.n_ff - 1);
                continue;
            }
            const int first = il;
            while (il < n_gpu && layer_dev[il] == d) ++il;
            where += il > first ? strfmt(" (layers %d-%d)", first, il - 1) : std::string(" (output)");
        }
        GGML_LOG_INFO("%s: %d/%d layers on %s (%.1f MiB %s), CPU weights %.1f MiB%s, output on %s, token_embd on "
                      "%s\n", __func__, n_gpu, hp.n_layer, where.c_str(), mib(dev_bytes), sim ? "simulated" : "VRAM",
                      mib(mmap_bytes + host_bytes + repack_bytes), ctx_host ? "" : " (mmap)",
                      m.output_on_gpu ? ggml_backend_buft_name(ggml_backend_buffer_get_type(m.output->buffer)) : "CPU",
                      m.tok_embd_on_gpu ? ggml_backend_buft_name(ggml_backend_buffer_get_type(m.tok_embd->buffer))
                                        : "CPU");
    }
    return true;
}

std::vector<int> llm_layer_split(int n_layer, int n_gpu_layers, const std::vector<double> & share) {
    const int n_gpu = std::min(n_gpu_layers, n_layer);
    const int n_units = n_gpu + (n_gpu_layers > n_layer ? 1 : 0);
    double sum = 0;
    for (double w : share) sum += w;
    std::vector<int> dev(n_units, (int) share.size() - 1);
    for (int u = 0; u < n_units; ++u) {
        double cum = 0;
        for (size_t i = 0; i < share.size(); ++i) {
            cum += share[i] / sum;
            if ((double) u / n_units < cum - 1e-9) {
                dev[u] = (int) i;
                break;
            }
        }
    }
    return dev;
}

std::vector<int> llm_row_split(int n_units, const std::vector<double> & share) {
    double sum = 0;
    for (double w : share) sum += w;
    std::vector<int> first(share.size() + 1, n_units);
    double cum = 0;
    for (size_t i = 0; i < share.size(); ++i) {
        first[i] = std::min(n_units, (int) std::lround(n_units * cum / sum));
        cum += share[i];
    }
    return first;
}

bool llm_split_mode_from_name(const std::string & name, llm_split_mode * mode) {
    std::string n = name;
    for (char & c : n) c = (char) std::tolower((unsigned char) c);
    if (n == "none") *mode = LLM_SPLIT_NONE;
    else if (n == "layer") *mode = LLM_SPLIT_LAYER;
    else if (n == "row") *mode = LLM_SPLIT_ROW;
    else return false;
    return true;
}

bool llm_tensor_split_parse(const std::string & s, std::vector<float> * split) {
    std::vector<float> out;
    size_t i = 0;
    while (i <= s.size()) {
        const size_t j = std::min(s.find_first_of(",/", i), s.size());
        const std::string tok = s.substr(i, j - i);
        char * end = nullptr;
        errno = 0;
        const float v = tok.empty() ? -1.0f : std::strtof(tok.c_str(), &end);
        if (tok.empty() || errno || *end || !(v >= 0) || !std::isfinite(v)) return false;
        out.push_back(v);
        i = j + 1;
    }
    *split = std::move(out);
    return true;
}

llm_model * llm_model_load(const char * path, const llm_model_params & params, std::string * err) {
    const int64_t t0 = ggml_time_us();
    auto * m = new llm_model;
    m->path = path ? path : "";
    m->verbose = params.verbose;
    std::string gerr;
    m->gguf = gguf_init_from_file(m->path.c_str(), {false, &m->ctx_meta}, &gerr);
    if (!m->gguf) {
        if (err) *err = gerr.empty() ? m->path + ": cannot read GGUF" : gerr;
        llm_model_free(m);
        return nullptr;
    }
    if (!load_hparams(*m, err)) {
        llm_model_free(m);
        return nullptr;
    }
    if (gguf_find_key(m->gguf, "tokenizer.ggml.model") >= 0) {
        std::string verr;
        if (!llm_vocab_load(m->vocab, m->gguf, &verr)) {
            if (err) *err = m->path + ": " + verr;
            llm_model_free(m);
            return nullptr;
        }
    } else {
        GGML_LOG_WARN("%s: %s has no tokenizer (tokenizer.ggml.model): token ids only\n", __func__, path);
    }
    if (!load_tensors(*m, params, err)) {
        llm_model_free(m);
        return nullptr;
    }

    // stats: parameters and bytes over the file's tensors; the dominant matrix type
    std::map<ggml_type, int64_t> by_type;
    for (int64_t i = 0; i < gguf_get_n_tensors(m->gguf); ++i) {
        int64_t ne = 1;
        for (int d = 0; d < GGML_MAX_DIMS; ++d) ne *= gguf_get_tensor_ne(m->gguf, i, d);
        m->n_params += ne;
        m->n_bytes += gguf_get_tensor_size(m->gguf, i);
        if (gguf_get_tensor_n_dims(m->gguf, i) >= 2) by_type[gguf_get_tensor_type(m->gguf, i)] += ne;
    }
    ggml_type best = GGML_TYPE_F32;
    int64_t best_n = -1;
    for (auto & [t, n] : by_type) {
        if (n > best_n) best = t, best_n = n;
    }
    m->type_name = ggml_type_name(best);
    m->t_load_ms = (ggml_time_us() - t0) / 1000.0;
    return m;
}

const llm_hparams & llm_model_hparams(const llm_model * model) { return model->hp; }
const llm_vocab & llm_model_get_vocab(const llm_model * model) { return model->vocab; }
uint64_t llm_model_n_params(const llm_model * model) { return model->n_params; }
uint64_t llm_model_size(const llm_model * model) { return model->n_bytes; }

std::vector<std::pair<std::string, size_t>> llm_model_buffer_sizes(const llm_model * model) {
    return model->buffer_sizes;
}

std::string llm_model_desc(const llm_model * model) {
    const double p = (double) model->n_params;
    std::string size;
    if (p >= 1e9) size = strfmt("%.1fB", p / 1e9);
    else if (p >= 1e6) size = strfmt("%.0fM", p / 1e6);
    else size = strfmt("%.0fK", p / 1e3);
    return "llama " + size + " " + model->type_name;
}

std::string llm_model_meta(const llm_model * model, const char * key) {
    const gguf_context * g = model->gguf;
    const int64_t id = gguf_find_key(g, key);
    if (id < 0) return "";
    switch (gguf_get_kv_type(g, id)) {
        case GGUF_TYPE_UINT8:   return std::to_string(gguf_get_val_u8(g, id));
        case GGUF_TYPE_INT8:    return std::to_string(gguf_get_val_i8(g, id));
        case GGUF_TYPE_UINT16:  return std::to_string(gguf_get_val_u16(g, id));
        case GGUF_TYPE_INT16:   return std::to_string(gguf_get_val_i16(g, id));
        case GGUF_TYPE_UINT32:  return std::to_string(gguf_get_val_u32(g, id));
        case GGUF_TYPE_INT32:   return std::to_string(gguf_get_val_i32(g, id));
        case GGUF_TYPE_UINT64:  return std::to_string(gguf_get_val_u64(g, id));
        case GGUF_TYPE_INT64:   return std::to_string(gguf_get_val_i64(g, id));
        case GGUF_TYPE_FLOAT32: return strfmt("%g", gguf_get_val_f32(g, id));
        case GGUF_TYPE_FLOAT64: return strfmt("%g", gguf_get_val_f64(g, id));
        case GGUF_TYPE_BOOL:    return gguf_get_val_bool(g, id) ? "true" : "false";
        case GGUF_TYPE_STRING:  return gguf_get_val_str(g, id);
        case GGUF_TYPE_ARRAY:
            return strfmt("[%s x %zu]", gguf_type_name(gguf_get_arr_type(g, id)), gguf_get_arr_n(g, id));
        default: return "";
    }
}
