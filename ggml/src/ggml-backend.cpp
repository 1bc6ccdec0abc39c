// ggml-backend.cpp - the generic backend layer: buffer types, buffers, tensor placement and
// data access across backends, backends, and context allocation. The scheduler is in
// ggml-sched.cpp; the CPU backend in cpu/ggml-cpu.cpp.
#include "ggml-backend.h"

#include "ggml-backend-impl.h"
#include "ggml-impl.h"

#include <algorithm>
#include <climits>
#include <cstring>
#include <mutex>
#include <unordered_map>
#include <vector>

// ---- which backend allocated a buffer (so two backends sharing a buffer type can be told apart)
static std::mutex & buffer_owner_mutex() {
    static std::mutex m;
    return m;
}
static std::unordered_map<const ggml_backend_buffer *, ggml_backend_t> & buffer_owners() {
    static std::unordered_map<const ggml_backend_buffer *, ggml_backend_t> m;
    return m;
}

static void buffer_set_owner(ggml_backend_buffer_t buf, ggml_backend_t backend) {
    std::lock_guard<std::mutex> lock(buffer_owner_mutex());
    buffer_owners()[buf] = backend;
}

ggml_backend_t ggml_backend_buffer_get_owner(ggml_backend_buffer_t buf) {
    std::lock_guard<std::mutex> lock(buffer_owner_mutex());
    auto it = buffer_owners().find(buf);
    return it == buffer_owners().end() ? nullptr : it->second;
}

// ---- buffer type -------------------------------------------------------------------------
const char * ggml_backend_buft_name(ggml_backend_buffer_type_t buft) { return buft->iface.get_name(buft); }

ggml_backend_buffer_t ggml_backend_buft_alloc_buffer(ggml_backend_buffer_type_t buft, size_t size) {
    const size_t max_size = ggml_backend_buft_get_max_size(buft);
    if (size > max_size) {
        GGML_LOG_ERROR("%s: %zu bytes exceed the max buffer size %zu of %s\n", __func__, size, max_size,
                       ggml_backend_buft_name(buft));
        return nullptr;
    }
    return buft->iface.alloc_buffer(buft, size);
}

size_t ggml_backend_buft_get_alignment(ggml_backend_buffer_type_t buft) {
    return buft->iface.get_alignment ? buft->iface.get_alignment(buft) : GGML_MEM_ALIGN;
}

size_t ggml_backend_buft_get_max_size(ggml_backend_buffer_type_t buft) {
    return buft->iface.get_max_size ? buft->iface.get_max_size(buft) : SIZE_MAX;
}

size_t ggml_backend_buft_get_alloc_size(ggml_backend_buffer_type_t buft, const ggml_tensor * t) {
    return buft->iface.get_alloc_size ? buft->iface.get_alloc_size(buft, t) : ggml_nbytes(t);
}

bool ggml_backend_buft_is_host(ggml_backend_buffer_type_t buft) {
    return buft->iface.is_host ? buft->iface.is_host(buft) : false;
}

// ---- buffer ------------------------------------------------------------------------------
ggml_backend_buffer_t ggml_backend_buffer_init(ggml_backend_buffer_type_t buft, ggml_backend_buffer_i iface,
                                               void * context, size_t size) {
    auto * buf = new ggml_backend_buffer;
    buf->iface = iface;
    buf->buft = buft;
    buf->context = context;
    buf->size = size;
    buf->usage = GGML_BACKEND_BUFFER_USAGE_ANY;
    return buf;
}

void ggml_backend_buffer_free(ggml_backend_buffer_t buf) {
    if (!buf) return;
    {
        std::lock_guard<std::mutex> lock(buffer_owner_mutex());
        buffer_owners().erase(buf);
    }
    if (buf->iface.free_buffer) buf->iface.free_buffer(buf);
    delete buf;
}

void * ggml_backend_buffer_get_base(ggml_backend_buffer_t buf) { return buf->iface.get_base(buf); }

size_t ggml_backend_buffer_get_size(ggml_backend_buffer_t buf) { return buf->size; }

void ggml_backend_buffer_clear(ggml_backend_buffer_t buf, uint8_t value) {
    if (buf->size > 0 && buf->iface.clear) buf->iface.clear(buf, value);
}

bool ggml_backend_buffer_is_host(ggml_backend_buffer_t buf) { return ggml_backend_buft_is_host(buf->buft); }

void ggml_backend_buffer_set_usage(ggml_backend_buffer_t buf, ggml_backend_buffer_usage usage) { buf->usage = usage; }

bool ggml_backend_tensor_in_weights(const ggml_tensor * t) {
    while (t->view_src)
        t = t->view_src;
    return t->buffer && t->buffer->usage == GGML_BACKEND_BUFFER_USAGE_WEIGHTS;
}

ggml_backend_buffer_type_t ggml_backend_buffer_get_type(ggml_backend_buffer_t buf) { return buf->buft; }

void ggml_backend_tensor_alloc(ggml_backend_buffer_t buf, ggml_tensor * t, void * addr) {
    GGML_ASSERT(buf && t && addr);
    GGML_ASSERT(t->buffer == nullptr && "tensor already has a buffer");
    GGML_ASSERT(t->data == nullptr && "tensor already has data");
    GGML_ASSERT(t->view_src == nullptr && "views get their memory from ggml_backend_view_init");
    char * base = (char *)ggml_backend_buffer_get_base(buf);
    const size_t size = ggml_backend_buft_get_alloc_size(buf->buft, t);
    GGML_ASSERT((char *)addr >= base && (char *)addr + size <= base + buf->size && "tensor outside its buffer");
    t->buffer = buf;
    t->data = addr;
    if (buf->iface.init_tensor) buf->iface.init_tensor(buf, t);
}

void ggml_backend_view_init(ggml_tensor * t) {
    GGML_ASSERT(t->view_src && t->view_src->data && "view of a tensor without memory");
    t->buffer = t->view_src->buffer;
    t->data = (char *)t->view_src->data + t->view_offs;
    if (t->buffer && t->buffer->iface.init_tensor) t->buffer->iface.init_tensor(t->buffer, t);
}

// ---- tensor data -------------------------------------------------------------------------
static ggml_backend_buffer_t tensor_buffer(const ggml_tensor * t) {
    return t->view_src && t->view_src->buffer ? t->view_src->buffer : t->buffer;
}

void ggml_backend_tensor_set(ggml_tensor * t, const void * data, size_t offset, size_t size) {
    GGML_ASSERT(t->data && "tensor has no memory (not allocated)");
    if (offset + size > ggml_nbytes(t)) {
        GGML_ABORT("%s: write of [%zu, %zu) beyond tensor '%s' of %zu bytes", __func__, offset, offset + size, t->name,
                   ggml_nbytes(t));
    }
    if (size == 0) return;
    ggml_backend_buffer_t buf = tensor_buffer(t);
    if (!buf) {
        std::memcpy((char *)t->data + offset, data, size); // context memory
        return;
    }
    buf->iface.set_tensor(buf, t, data, offset, size);
}

void ggml_backend_tensor_get(const ggml_tensor * t, void * data, size_t offset, size_t size) {
    GGML_ASSERT(t->data && "tensor has no memory (not allocated)");
    if (offset + size > ggml_nbytes(t)) {
        GGML_ABORT("%s: read of [%zu, %zu) beyond tensor '%s' of %zu bytes", __func__, offset, offset + size, t->name,
                   ggml_nbytes(t));
    }
    if (size == 0) return;
    ggml_backend_buffer_t buf = tensor_buffer(t);
    if (!buf) {
        std::memcpy(data, (const char *)t->data + offset, size);
        return;
    }
    buf->iface.get_tensor(buf, t, data, offset, size);
}

static bool tensor_is_host(const ggml_tensor * t) {
    ggml_backend_buffer_t buf = tensor_buffer(t);
    return !buf || ggml_backend_buffer_is_host(buf);
}

void ggml_backend_tensor_copy(const ggml_tensor * src, ggml_tensor * dst) {
    if (src->type != dst->type || ggml_nbytes(src) != ggml_nbytes(dst)) {
        GGML_ABORT("%s: '%s' and '%s' differ in type or size", __func__, src->name, dst->name);
    }
    if (src == dst) return;
    const size_t n = ggml_nbytes(src);
    if (n == 0) return;
    GGML_ASSERT(src->data && dst->data);
    if (tensor_is_host(src)) {
        ggml_backend_tensor_set(dst, src->data, 0, n);
    } else if (tensor_is_host(dst)) {
        ggml_backend_tensor_get(src, dst->data, 0, n);
    } else {
        ggml_backend_buffer_t dbuf = tensor_buffer(dst);
        if (dbuf->iface.cpy_tensor && dbuf->iface.cpy_tensor(dbuf, src, dst)) return;
        std::vector<uint8_t> bounce(n); // device -> host -> device
        ggml_backend_tensor_get(src, bounce.data(), 0, n);
        ggml_backend_tensor_set(dst, bounce.data(), 0, n);
    }
}

// ---- backend -----------------------------------------------------------------------------
const char * ggml_backend_name(ggml_backend_t backend) { return backend ? backend->iface.get_name(backend) : "none"; }

void ggml_backend_free(ggml_backend_t backend) {
    if (backend) backend->iface.free(backend);
}

ggml_backend_buffer_type_t ggml_backend_get_default_buffer_type(ggml_backend_t backend) {
    return backend->iface.get_default_buffer_type(backend);
}

ggml_backend_buffer_t ggml_backend_alloc_buffer(ggml_backend_t backend, size_t size) {
    ggml_backend_buffer_t buf = ggml_backend_buft_alloc_buffer(ggml_backend_get_default_buffer_type(backend), size);
    if (buf) buffer_set_owner(buf, backend);
    return buf;
}

ggml_status ggml_backend_graph_compute(ggml_backend_t backend, ggml_cgraph * gf) {
    ggml_status st = backend->iface.graph_compute(backend, gf);
    ggml_backend_synchronize(backend);
    return st;
}

bool ggml_backend_supports_op(ggml_backend_t backend, const ggml_tensor * op) {
    return backend->iface.supports_op(backend, op);
}

bool ggml_backend_supports_buft(ggml_backend_t backend, ggml_backend_buffer_type_t buft) {
    return backend->iface.supports_buft(backend, buft);
}

void ggml_backend_synchronize(ggml_backend_t backend) {
    if (backend->iface.synchronize) backend->iface.synchronize(backend);
}

void ggml_backend_tensor_set_async(ggml_backend_t backend, ggml_tensor * t, const void * data, size_t offset,
                                   size_t size) {
    if (!backend->iface.set_tensor_async) return ggml_backend_tensor_set(t, data, offset, size);
    GGML_ASSERT(t->data && offset + size <= ggml_nbytes(t));
    if (size > 0) backend->iface.set_tensor_async(backend, t, data, offset, size);
}

void ggml_backend_tensor_get_async(ggml_backend_t backend, const ggml_tensor * t, void * data, size_t offset,
                                   size_t size) {
    if (!backend->iface.get_tensor_async) return ggml_backend_tensor_get(t, data, offset, size);
    GGML_ASSERT(t->data && offset + size <= ggml_nbytes(t));
    if (size > 0) backend->iface.get_tensor_async(backend, t, data, offset, size);
}

// ---- context allocation --------------------------------------------------------------------
ggml_backend_buffer_t ggml_backend_alloc_ctx_tensors_from_buft(ggml_context * ctx, ggml_backend_buffer_type_t buft) {
    const size_t align = std::max<size_t>(ggml_backend_buft_get_alignment(buft), 1);
    const size_t max_size = ggml_backend_buft_get_max_size(buft);
    size_t total = 0;
    for (ggml_tensor * t = ggml_get_first_tensor(ctx); t; t = ggml_get_next_tensor(ctx, t)) {
        if (t->data || t->view_src) continue;
        const size_t sz = ggml_backend_buft_get_alloc_size(buft, t);
        if (sz > max_size) {
            GGML_LOG_ERROR("%s: tensor '%s' needs %zu bytes, more than the max buffer size %zu of %s\n", __func__,
                           t->name, sz, max_size, ggml_backend_buft_name(buft));
            return nullptr;
        }
        total += (sz + align - 1) / align * align;
    }
    if (total == 0) {
        GGML_LOG_DEBUG("%s: all tensors of the context already have memory\n", __func__);
        return nullptr;
    }
    if (total > max_size) {
        GGML_LOG_ERROR("%s: the context's tensors need %zu bytes, more than the max buffer size %zu of %s\n", __func__,
                       total, max_size, ggml_backend_buft_name(buft));
        return nullptr;
    }
    ggml_backend_buffer_t buf = ggml_backend_buft_alloc_buffer(buft, total);
    if (!buf) {
        GGML_LOG_ERROR("%s: failed to allocate a %s buffer of %zu bytes\n", __func__, ggml_backend_buft_name(buft),
                       total);
        return nullptr;
    }
    char * p = (char *)ggml_backend_buffer_get_base(buf);
    for (ggml_tensor * t = ggml_get_first_tensor(ctx); t; t = ggml_get_next_tensor(ctx, t)) {
        if (t->data || t->view_src) continue;
        ggml_backend_tensor_alloc(buf, t, p);
        const size_t sz = ggml_backend_buft_get_alloc_size(buft, t);
        p += (sz + align - 1) / align * align;
    }
    for (ggml_tensor * t = ggml_get_first_tensor(ctx); t; t = ggml_get_next_tensor(ctx, t)) {
        if (t->view_src && !t->buffer && t->view_src->buffer == buf) ggml_backend_view_init(t);
    }
    return buf;
}

ggml_backend_buffer_t ggml_backend_alloc_ctx_tensors(ggml_context * ctx, ggml_backend_t backend) {
    ggml_backend_buffer_t buf =
        ggml_backend_alloc_ctx_tensors_from_buft(ctx, ggml_backend_get_default_buffer_type(backend));
    if (buf) buffer_set_owner(buf, backend);
    return buf;
}
