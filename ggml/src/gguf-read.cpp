// gguf-read.cpp - GGUF v2/v3 parser: every count, length, type, shape, size and offset is checked
// against the limits in gguf.h and the bytes actually present before it is used, and every size
// computation is an overflow-checked multiply. Each failure is one line:
//   "<file>: <what is wrong> (<where: key / tensor / element>, offset <byte offset>)".
#include "gguf-impl.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdarg>
#include <cstring>
#include <string>
#include <unordered_set>

namespace {

// A name from the file as it may appear in a one-line message: control bytes escaped, long names cut.
std::string printable(const std::string & s) {
    const size_t max = 96;
    std::string out;
    for (size_t i = 0; i < s.size() && i < max; ++i) {
        const unsigned char c = (unsigned char) s[i];
        if (c < 0x20 || c == 0x7f) {
            char buf[8];
            snprintf(buf, sizeof(buf), "\\x%02x", c);
            out += buf;
        } else {
            out += (char) c;
        }
    }
    return s.size() > max ? out + "...(" + std::to_string(s.size()) + " bytes)" : out;
}

struct gguf_reader {
    const uint8_t * p;
    size_t          size;
    size_t          pos = 0;
    const char *    fname;
    std::string     err;

    // where we are, for messages (filled in lazily: only formatted on failure)
    const char *        section = "header";
    const std::string * key     = nullptr;  // current key or tensor name
    int64_t             index   = -1;       // kv / tensor number
    int64_t             elem    = -1;       // array element

    std::string where(size_t off) const {
        std::string w;
        if (key) {
            w += std::string(section) + " '" + printable(*key) + "'";
        } else if (index >= 0) {
            w += std::string(section) + " #" + std::to_string(index);
        } else {
            w += section;
        }
        if (elem >= 0) {
            w += " element " + std::to_string(elem);
        }
        return w + ", offset " + std::to_string(off);
    }

    // "<file>: <msg> (<where>, offset N)"; always returns false
    bool fail_at(size_t off, const char * fmt, ...) __attribute__((format(printf, 3, 4))) {
        char buf[512];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(buf, sizeof(buf), fmt, ap);
        va_end(ap);
        err = std::string(fname) + ": " + buf + " (" + where(off) + ")";
        return false;
    }

    bool need(size_t n, const char * what) {
        if (n > size - pos) {
            return fail_at(pos, "unexpected end of file reading %s (need %zu bytes, %zu left)", what, n, size - pos);
        }
        return true;
    }

    template <typename T> bool read(T & v, const char * what) {
        if (!need(sizeof(T), what)) {
            return false;
        }
        std::memcpy(&v, p + pos, sizeof(T));
        pos += sizeof(T);
        return true;
    }

    bool read_str(std::string & s, const char * what) {
        const size_t at = pos;
        uint64_t len = 0;
        if (!read(len, what)) {
            return false;
        }
        if (len > GGUF_MAX_STRING_LENGTH) {
            return fail_at(at, "%s length %llu exceeds GGUF_MAX_STRING_LENGTH (%u)", what, (unsigned long long) len,
                           (unsigned) GGUF_MAX_STRING_LENGTH);
        }
        if (len > size - pos) {
            return fail_at(at, "%s length %llu extends past end of file (%zu bytes left)", what,
                           (unsigned long long) len, size - pos);
        }
        s.assign((const char *) p + pos, (size_t) len);
        pos += (size_t) len;
        return true;
    }
};

bool read_kv_value(gguf_reader & r, gguf_kv & kv) {
    const size_t at_type = r.pos;
    int32_t type = 0;
    if (!r.read(type, "value type")) {
        return false;
    }
    if (type < 0 || type >= GGUF_TYPE_COUNT) {
        return r.fail_at(at_type, "unknown value type %d", (int) type);
    }
    kv.type = (gguf_type) type;

    if (kv.type == GGUF_TYPE_STRING) {
        kv.strs.resize(1);
        return r.read_str(kv.strs[0], "string value");
    }
    if (kv.type != GGUF_TYPE_ARRAY) {
        const size_t esize = gguf_type_size(kv.type);
        if (!r.need(esize, "value")) {
            return false;
        }
        kv.data.assign(r.p + r.pos, r.p + r.pos + esize);
        r.pos += esize;
        return true;
    }

    // array: element type, u64 count, elements
    const size_t at_arr = r.pos;
    int32_t arr_type = 0;
    if (!r.read(arr_type, "array element type")) {
        return false;
    }
    if (arr_type == GGUF_TYPE_ARRAY) {
        return r.fail_at(at_arr, "nested array (array of arrays) is not supported");
    }
    if (arr_type < 0 || arr_type >= GGUF_TYPE_COUNT) {
        return r.fail_at(at_arr, "unknown array element type %d", (int) arr_type);
    }
    kv.arr_type = (gguf_type) arr_type;

    const size_t at_n = r.pos;
    uint64_t n = 0;
    if (!r.read(n, "array length")) {
        return false;
    }
    if (n > GGUF_MAX_ARRAY_LENGTH) {
        return r.fail_at(at_n, "array length %llu exceeds GGUF_MAX_ARRAY_LENGTH (%llu)", (unsigned long long) n,
                         (unsigned long long) GGUF_MAX_ARRAY_LENGTH);
    }
    kv.n = (size_t) n;

    // every element takes at least min_size bytes: reject lengths the file cannot hold before allocating
    const size_t min_size = kv.arr_type == GGUF_TYPE_STRING ? sizeof(uint64_t) : gguf_type_size(kv.arr_type);
    size_t min_bytes = 0;
    if (__builtin_mul_overflow((size_t) n, min_size, &min_bytes) || min_bytes > r.size - r.pos) {
        return r.fail_at(at_n, "array of %llu %s extends past end of file (%zu bytes left)", (unsigned long long) n,
                         gguf_type_name(kv.arr_type), r.size - r.pos);
    }

    if (kv.arr_type != GGUF_TYPE_STRING) {
        kv.data.assign(r.p + r.pos, r.p + r.pos + min_bytes);
        r.pos += min_bytes;
        return true;
    }
    kv.strs.resize((size_t) n);
    for (size_t i = 0; i < (size_t) n; ++i) {
        r.elem = (int64_t) i;
        if (!r.read_str(kv.strs[i], "string")) {
            return false;
        }
    }
    r.elem = -1;
    return true;
}

bool read_tensor_info(gguf_reader & r, gguf_tensor_info & ti, size_t alignment) {
    const size_t at_dims = r.pos;
    uint32_t n_dims = 0;
    if (!r.read(n_dims, "n_dims")) {
        return false;
    }
    if (n_dims < 1 || n_dims > GGML_MAX_DIMS) {
        return r.fail_at(at_dims, "n_dims = %u out of range [1, %d]", n_dims, GGML_MAX_DIMS);
    }
    ti.n_dims = (int) n_dims;
    for (uint32_t j = 0; j < n_dims; ++j) {
        const size_t at_ne = r.pos;
        int64_t ne = 0;
        if (!r.read(ne, "ne")) {
            return false;
        }
        if (ne <= 0) {
            return r.fail_at(at_ne, "ne[%u] = %lld must be positive", j, (long long) ne);
        }
        ti.ne[j] = ne;
    }
    int64_t nel = 1;
    for (int j = 0; j < GGML_MAX_DIMS; ++j) {
        if (__builtin_mul_overflow(nel, ti.ne[j], &nel)) {
            return r.fail_at(at_dims, "element count overflows int64 (ne = [%lld, %lld, %lld, %lld])",
                             (long long) ti.ne[0], (long long) ti.ne[1], (long long) ti.ne[2], (long long) ti.ne[3]);
        }
    }

    // type errors start with the tensor's name ("tensor 'blk.0.ffn_down.weight': unsupported tensor type 16
    // (iq2_xxs) (tensor #9, offset 1234)"): which weight is in which type is what the user looks for
    auto fail_tensor = [&r](size_t off, const std::string & msg) {
        const std::string * name = r.key;
        r.key = nullptr;  // the suffix then gives the tensor's number
        r.fail_at(off, "tensor '%s': %s", name ? printable(*name).c_str() : "?", msg.c_str());
        r.key = name;
        return false;
    };
    const size_t at_type = r.pos;
    int32_t type = 0;
    if (!r.read(type, "tensor type")) {
        return false;
    }
    char msg[256];
    if (type < 0 || type >= GGML_TYPE_COUNT || !ggml_type_is_valid(type)) {
        const char * tn = gguf_ggml_type_name_any(type);  // ggml's name, also for types not implemented here
        if (tn) {
            snprintf(msg, sizeof(msg), "unsupported tensor type %d (%s)", (int) type, tn);
        } else {
            snprintf(msg, sizeof(msg), "unknown tensor type %d", (int) type);
        }
        return fail_tensor(at_type, msg);
    }
    ti.type = (ggml_type) type;
    const int64_t blck = ggml_blck_size(ti.type);
    if (ti.ne[0] % blck != 0) {
        snprintf(msg, sizeof(msg), "ne[0] = %lld is not a multiple of the block size %lld of %s", (long long) ti.ne[0],
                 (long long) blck, ggml_type_name(ti.type));
        return fail_tensor(at_dims, msg);
    }
    if (!gguf_tensor_nbytes(ti.type, ti.ne, &ti.size)) {
        return r.fail_at(at_dims, "byte size overflows (ne = [%lld, %lld, %lld, %lld], type %s)", (long long) ti.ne[0],
                         (long long) ti.ne[1], (long long) ti.ne[2], (long long) ti.ne[3], ggml_type_name(ti.type));
    }

    const size_t at_off = r.pos;
    if (!r.read(ti.offset, "tensor data offset")) {
        return false;
    }
    if (ti.offset % alignment != 0) {
        return r.fail_at(at_off, "data offset %llu is not a multiple of the alignment %zu",
                         (unsigned long long) ti.offset, alignment);
    }
    return true;
}

bool parse(gguf_reader & r, gguf_context * ctx) {
    // header
    if (!r.need(4, "magic")) {
        return false;
    }
    if (std::memcmp(r.p, GGUF_MAGIC, 4) != 0) {
        return r.fail_at(0, "bad magic %02x %02x %02x %02x (expected \"GGUF\"), not a GGUF file", r.p[0], r.p[1],
                         r.p[2], r.p[3]);
    }
    r.pos = 4;
    uint32_t version = 0;
    if (!r.read(version, "version")) {
        return false;
    }
    if (version != 2 && version != 3) {
        if (version == 1) {
            return r.fail_at(4, "GGUF version 1 is not supported (expected 3, or 2)");
        }
        if ((version & 0xFFFF) == 0) {
            return r.fail_at(4, "unsupported GGUF version %u: big-endian files are not supported", version);
        }
        return r.fail_at(4, "unsupported GGUF version %u (expected 3, or 2)", version);
    }
    ctx->version = version;

    uint64_t n_tensors = 0, n_kv = 0;
    if (!r.read(n_tensors, "tensor count")) {
        return false;
    }
    if (n_tensors > GGUF_MAX_TENSOR_COUNT) {
        return r.fail_at(8, "tensor count %llu exceeds GGUF_MAX_TENSOR_COUNT (%u)", (unsigned long long) n_tensors,
                         (unsigned) GGUF_MAX_TENSOR_COUNT);
    }
    if (!r.read(n_kv, "kv count")) {
        return false;
    }
    if (n_kv > GGUF_MAX_KV_COUNT) {
        return r.fail_at(16, "kv count %llu exceeds GGUF_MAX_KV_COUNT (%u)", (unsigned long long) n_kv,
                         (unsigned) GGUF_MAX_KV_COUNT);
    }

    // key-values (a kv takes at least 8 + 4 + 1 bytes: do not trust n_kv for the reservation)
    ctx->kv.reserve((size_t) std::min<uint64_t>(n_kv, (r.size - r.pos) / 13));
    std::unordered_set<std::string> keys;
    size_t align_at = 0;  // offset of the general.alignment kv, for messages
    for (uint64_t i = 0; i < n_kv; ++i) {
        r.section = "kv";
        r.key     = nullptr;
        r.index   = (int64_t) i;
        gguf_kv kv;
        const size_t at_key = r.pos;
        if (!r.read_str(kv.key, "key")) {
            return false;
        }
        if (kv.key.empty()) {
            return r.fail_at(at_key, "empty key");
        }
        r.section = "key";
        r.key     = &kv.key;
        if (!keys.insert(kv.key).second) {
            return r.fail_at(at_key, "duplicate key");
        }
        if (kv.key == GGUF_KEY_GENERAL_ALIGNMENT) {
            align_at = at_key;
        }
        if (!read_kv_value(r, kv)) {
            return false;
        }
        ctx->kv.push_back(std::move(kv));
    }
    r.key   = nullptr;
    r.index = -1;

    // alignment
    const int64_t align_id = gguf_find_key(ctx, GGUF_KEY_GENERAL_ALIGNMENT);
    if (align_id >= 0) {
        const gguf_kv & kv = ctx->kv[(size_t) align_id];
        r.section = "key";
        r.key     = &kv.key;
        if (kv.type != GGUF_TYPE_UINT32) {
            return r.fail_at(align_at, "alignment must be a u32, got %s", gguf_type_name(kv.type));
        }
        uint32_t a = 0;
        std::memcpy(&a, kv.data.data(), 4);
        if (a == 0 || (a & (a - 1)) != 0) {
            return r.fail_at(align_at, "alignment %u is not a power of two", a);
        }
        ctx->alignment = a;
        r.key          = nullptr;
    }

    // tensor infos
    ctx->infos.reserve((size_t) std::min<uint64_t>(n_tensors, (r.size - r.pos) / 32));
    std::unordered_set<std::string> names;
    std::vector<size_t> info_at;  // file offset of each tensor info, for messages
    for (uint64_t i = 0; i < n_tensors; ++i) {
        r.section = "tensor info";
        r.key     = nullptr;
        r.index   = (int64_t) i;
        gguf_tensor_info ti;
        const size_t at_name = r.pos;
        info_at.push_back(at_name);
        if (!r.read_str(ti.name, "tensor name")) {
            return false;
        }
        r.section = "tensor";
        r.key     = &ti.name;
        if (ti.name.size() >= GGML_MAX_NAME) {
            return r.fail_at(at_name, "tensor name is %zu bytes, longer than the maximum %d", ti.name.size(),
                             GGML_MAX_NAME - 1);
        }
        if (!names.insert(ti.name).second) {
            return r.fail_at(at_name, "duplicate tensor name");
        }
        if (!read_tensor_info(r, ti, ctx->alignment)) {
            return false;
        }
        ctx->infos.push_back(std::move(ti));
    }

    // data section: starts at the next multiple of the alignment; every tensor must lie inside the file
    r.section = "data section";
    r.key     = nullptr;
    r.index   = -1;
    size_t data_offset = 0;
    if (__builtin_add_overflow(r.pos, ctx->alignment - 1, &data_offset)) {
        return r.fail_at(r.pos, "data section offset overflows");
    }
    data_offset -= data_offset % ctx->alignment;
    ctx->data_offset = data_offset;
    for (size_t i = 0; i < ctx->infos.size(); ++i) {
        const gguf_tensor_info & ti = ctx->infos[i];
        r.section = "tensor";
        r.key     = &ti.name;
        size_t end = 0;
        if (__builtin_add_overflow(data_offset, (size_t) ti.offset, &end) || __builtin_add_overflow(end, ti.size, &end) ||
            end > r.size) {
            return r.fail_at(info_at[i],
                             "data (%zu bytes at data offset %llu, data section at file offset %zu) extends past end "
                             "of file (%zu bytes)",
                             ti.size, (unsigned long long) ti.offset, data_offset, r.size);
        }
    }
    r.key = nullptr;
    return true;
}

void report(const std::string & msg, const char * func, std::string * err) {
    if (err) {
        *err = msg;
    } else {
        GGML_LOG_ERROR("%s: %s\n", func, msg.c_str());
    }
}

// Parse size bytes at data; on success ctx keeps base (if keep) and, if asked, gets a ggml context.
gguf_context * init_from_bytes(const uint8_t * data, size_t size, const char * name, bool keep,
                               gguf_init_params params, std::string * err, const char * func) {
    if (params.ctx) {
        *params.ctx = nullptr;
    }
    gguf_reader r{data, size, 0, name, {}};
    gguf_context * ctx = new gguf_context();
    ctx->file_size = size;
    if (!parse(r, ctx)) {
        report(r.err, func, err);
        delete ctx;
        return nullptr;
    }
    ctx->base = keep ? data : nullptr;

    if (params.ctx) {
        const size_t n = ctx->infos.size();
        ggml_init_params ip = {(n + 1) * ggml_tensor_overhead(), nullptr, true};
        ggml_context * meta = ggml_init(ip);
        if (!meta) {
            report(std::string(name) + ": ggml_init failed for " + std::to_string(n) + " tensors", func, err);
            delete ctx;
            return nullptr;
        }
        for (const gguf_tensor_info & ti : ctx->infos) {
            ggml_tensor * t = ggml_new_tensor(meta, ti.type, ti.n_dims, ti.ne);
            ggml_set_name(t, ti.name.c_str());
            if (!params.no_alloc) {
                t->data = (void *) (data + ctx->data_offset + ti.offset);
            }
        }
        *params.ctx = meta;
    }
    return ctx;
}

}  // namespace

gguf_context * gguf_init_from_buffer(const void * data, size_t size, const char * name, gguf_init_params params,
                                     std::string * err) {
    return init_from_bytes((const uint8_t *) data, size, name ? name : "<buffer>", !params.no_alloc, params, err,
                           __func__);
}

gguf_context * gguf_init_from_file(const char * fname, gguf_init_params params, std::string * err) {
    if (params.ctx) {
        *params.ctx = nullptr;
    }
    const int fd = open(fname, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        report(std::string(fname) + ": cannot open: " + strerror(errno), __func__, err);
        return nullptr;
    }
    struct stat st;
    const bool stat_ok = fstat(fd, &st) == 0;
    if (!stat_ok || !S_ISREG(st.st_mode)) {
        const std::string why = stat_ok ? "not a regular file" : strerror(errno);
        close(fd);
        report(std::string(fname) + ": cannot read: " + why, __func__, err);
        return nullptr;
    }
    const size_t size = (size_t) st.st_size;
    void * addr = nullptr;
    if (size > 0) {
        addr = mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
        if (addr == MAP_FAILED) {
            const std::string why = strerror(errno);
            close(fd);
            report(std::string(fname) + ": mmap of " + std::to_string(size) + " bytes failed: " + why, __func__, err);
            return nullptr;
        }
    }
    close(fd);
    gguf_context * ctx = init_from_bytes((const uint8_t *) addr, size, fname, true, params, err, __func__);
    if (!ctx) {
        if (addr) {
            munmap(addr, size);
        }
        return nullptr;
    }
    ctx->map_addr = addr;
    ctx->map_size = size;
    return ctx;
}
