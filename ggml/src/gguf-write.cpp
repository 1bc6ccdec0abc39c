// gguf-write.cpp - GGUF v3 writer: header, key-values, tensor infos, data section with every tensor
// aligned to gguf_get_alignment. Files are written to "<fname>.tmp" and renamed: a failure leaves nothing.
#include "gguf-impl.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string>

namespace {

struct byte_buf {
    std::vector<uint8_t> b;

    void raw(const void * p, size_t n) {
        const size_t o = b.size();  // resize + memcpy: vector::insert trips gcc 12's -Wstringop-overflow
        b.resize(o + n);
        if (n > 0) {
            std::memcpy(b.data() + o, p, n);
        }
    }
    template <typename T> void put(T v) { raw(&v, sizeof(v)); }
    void str(const std::string & s) {
        put<uint64_t>(s.size());
        raw(s.data(), s.size());
    }
    void pad_to(size_t alignment) {
        while (b.size() % alignment != 0) {
            b.push_back(0);
        }
    }
};

void write_kv(byte_buf & out, const gguf_kv & kv) {
    out.str(kv.key);
    out.put<int32_t>(kv.type);
    switch (kv.type) {
        case GGUF_TYPE_STRING:
            out.str(kv.strs[0]);
            break;
        case GGUF_TYPE_ARRAY:
            out.put<int32_t>(kv.arr_type);
            out.put<uint64_t>(kv.n);
            if (kv.arr_type == GGUF_TYPE_STRING) {
                for (const std::string & s : kv.strs) {
                    out.str(s);
                }
            } else {
                out.raw(kv.data.data(), kv.data.size());
            }
            break;
        default:
            out.raw(kv.data.data(), kv.data.size());
            break;
    }
}

// Where a tensor's bytes come from at write time.
const void * tensor_src(const gguf_context * ctx, size_t i) {
    const gguf_tensor_info & ti = ctx->infos[i];
    if (ti.data_set) {
        return ti.data;
    }
    if (ti.tensor) {
        return ti.tensor->data;
    }
    return gguf_get_tensor_data(ctx, (int64_t) i);  // a context read from a file: copy from the mapping
}

bool fail(std::string * err, const std::string & msg) {
    if (err) {
        *err = msg;
    } else {
        GGML_LOG_ERROR("gguf_write_to_file: %s\n", msg.c_str());
    }
    return false;
}

bool write_all(FILE * f, const void * p, size_t n) {
    return n == 0 || fwrite(p, 1, n, f) == n;
}

}  // namespace

std::vector<uint8_t> gguf_get_meta_data(const gguf_context * ctx) {
    byte_buf out;
    out.raw(GGUF_MAGIC, 4);
    out.put<uint32_t>(GGUF_VERSION);
    out.put<uint64_t>(ctx->infos.size());
    out.put<uint64_t>(ctx->kv.size());
    for (const gguf_kv & kv : ctx->kv) {
        write_kv(out, kv);
    }
    for (const gguf_tensor_info & ti : ctx->infos) {
        out.str(ti.name);
        out.put<uint32_t>((uint32_t) ti.n_dims);
        for (int j = 0; j < ti.n_dims; ++j) {
            out.put<int64_t>(ti.ne[j]);
        }
        out.put<int32_t>(ti.type);
        out.put<uint64_t>(ti.offset);
    }
    out.pad_to(ctx->alignment);
    return std::move(out.b);
}

bool gguf_write_to_file(const gguf_context * ctx, const char * fname, bool only_meta, std::string * err) {
    if (!only_meta) {
        for (size_t i = 0; i < ctx->infos.size(); ++i) {
            if (ctx->infos[i].size > 0 && !tensor_src(ctx, i)) {
                return fail(err, std::string(fname) + ": tensor '" + ctx->infos[i].name + "' has no data to write");
            }
        }
    }
    const std::vector<uint8_t> meta = gguf_get_meta_data(ctx);

    const std::string tmp = std::string(fname) + ".tmp";
    FILE * f = fopen(tmp.c_str(), "wb");
    if (!f) {
        return fail(err, std::string(fname) + ": cannot create '" + tmp + "': " + strerror(errno));
    }
    auto abandon = [&](const std::string & why) {
        fclose(f);
        unlink(tmp.c_str());
        return fail(err, std::string(fname) + ": " + why);
    };

    if (!write_all(f, meta.data(), meta.size())) {
        return abandon(std::string("write failed: ") + strerror(errno));
    }
    if (!only_meta) {
        static const uint8_t zeros[256] = {};
        uint64_t pos = 0;  // relative to the data section
        auto pad_to = [&](uint64_t target) {
            while (pos < target) {
                const size_t n = (size_t) std::min<uint64_t>(sizeof(zeros), target - pos);
                if (!write_all(f, zeros, n)) {
                    return false;
                }
                pos += n;
            }
            return true;
        };
        for (size_t i = 0; i < ctx->infos.size(); ++i) {
            const gguf_tensor_info & ti = ctx->infos[i];
            if (ti.offset < pos) {
                return abandon("tensor '" + ti.name + "' offset " + std::to_string(ti.offset) +
                               " overlaps the previous tensor");
            }
            if (!pad_to(ti.offset) || !write_all(f, tensor_src(ctx, i), ti.size)) {
                return abandon("writing tensor '" + ti.name + "' failed: " + strerror(errno));
            }
            pos += ti.size;
        }
        if (!pad_to((pos + ctx->alignment - 1) / ctx->alignment * ctx->alignment)) {
            return abandon(std::string("write failed: ") + strerror(errno));
        }
    }
    if (fflush(f) != 0 || fsync(fileno(f)) != 0) {
        return abandon(std::string("write failed: ") + strerror(errno));
    }
    if (fclose(f) != 0) {
        unlink(tmp.c_str());
        return fail(err, std::string(fname) + ": close failed: " + strerror(errno));
    }
    if (rename(tmp.c_str(), fname) != 0) {
        const std::string why = strerror(errno);
        unlink(tmp.c_str());
        return fail(err, std::string(fname) + ": cannot rename '" + tmp + "': " + why);
    }
    return true;
}
