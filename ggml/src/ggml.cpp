// ggml.cpp - context, tensors, shape helpers, graphs, logging.
// Op builders live in ggml-ops.cpp.
#include "ggml-impl.h"

#include <atomic>
#include <chrono>
#include <cstdarg>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <vector>

// ---- errors and logging ---------------------------------------------------------------------
void ggml_abort(const char * file, int line, const char * fmt, ...) {
    fflush(stdout);
    fprintf(stderr, "%s:%d: ", file, line);
    va_list ap;
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fprintf(stderr, "\n");
    fflush(stderr);
    abort();
}

static ggml_log_callback g_log_cb = nullptr;
static void * g_log_user = nullptr;

void ggml_log_set(ggml_log_callback cb, void * user) {
    g_log_cb = cb;
    g_log_user = user;
}

void ggml_log(ggml_log_level level, const char * fmt, ...) {
    char buf[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof(buf), fmt, ap);
    va_end(ap);
    if (g_log_cb) {
        g_log_cb(level, buf, g_log_user);
    } else if (level != GGML_LOG_LEVEL_DEBUG || std::getenv("GGML_DEBUG")) {
        fputs(buf, stderr);
    }
}

int64_t ggml_time_us() {
    using namespace std::chrono;
    return duration_cast<microseconds>(steady_clock::now().time_since_epoch()).count();
}

// ---- op registry -----------------------------------------------------------------------------
static const char * k_op_names[GGML_OP_COUNT] = {
#define GGML_OP(name, sym, nsrc) #name,
#include "ggml-ops.def"
#undef GGML_OP
};
static const char * k_op_symbols[GGML_OP_COUNT] = {
#define GGML_OP(name, sym, nsrc) sym,
#include "ggml-ops.def"
#undef GGML_OP
};
static const int k_op_n_src[GGML_OP_COUNT] = {
#define GGML_OP(name, sym, nsrc) nsrc,
#include "ggml-ops.def"
#undef GGML_OP
};

const char * ggml_op_name(ggml_op op) { return op >= 0 && op < GGML_OP_COUNT ? k_op_names[op] : "?"; }
const char * ggml_op_symbol(ggml_op op) { return op >= 0 && op < GGML_OP_COUNT ? k_op_symbols[op] : "?"; }
int ggml_op_n_src(ggml_op op) { return op >= 0 && op < GGML_OP_COUNT ? k_op_n_src[op] : 0; }

bool ggml_is_view_op(ggml_op op) {
    return op == GGML_OP_VIEW || op == GGML_OP_RESHAPE || op == GGML_OP_PERMUTE || op == GGML_OP_TRANSPOSE;
}

// ---- context ---------------------------------------------------------------------------------
// Tensor headers (and data unless no_alloc) are bump-allocated from one block of memory.
struct ggml_context {
    uint8_t * mem = nullptr;
    size_t    mem_size = 0;
    size_t    used = 0;
    bool      owns_mem = false;
    bool      no_alloc = false;
    std::vector<ggml_tensor *> tensors;
    std::vector<std::unique_ptr<std::unordered_set<const ggml_tensor *>>> graph_sets;
};

static size_t align_up(size_t x, size_t a) { return (x + a - 1) / a * a; }

static void * ctx_alloc(ggml_context * ctx, size_t size, const char * what) {
    const size_t off = align_up(ctx->used, GGML_MEM_ALIGN);
    if (off + size > ctx->mem_size) {
        GGML_ABORT("ggml context out of memory allocating %s: need %zu bytes, %zu of %zu used", what, size,
                   ctx->used, ctx->mem_size);
    }
    ctx->used = off + size;
    return ctx->mem + off;
}

ggml_context * ggml_init(ggml_init_params params) {
    auto * ctx = new ggml_context;
    ctx->mem_size = params.mem_size ? params.mem_size : 16 * ggml_tensor_overhead();
    if (params.mem_buffer) {
        ctx->mem = (uint8_t *) params.mem_buffer;
    } else {
        ctx->mem = (uint8_t *) std::aligned_alloc(64, align_up(ctx->mem_size, 64));
        GGML_ASSERT(ctx->mem != nullptr);
        ctx->owns_mem = true;
    }
    ctx->no_alloc = params.no_alloc;
    return ctx;
}

void ggml_free(ggml_context * ctx) {
    if (!ctx) return;
    if (ctx->owns_mem) std::free(ctx->mem);
    delete ctx;
}

size_t ggml_used_mem(const ggml_context * ctx) { return ctx->used; }
size_t ggml_tensor_overhead() { return align_up(sizeof(ggml_tensor), GGML_MEM_ALIGN) + GGML_MEM_ALIGN; }
size_t ggml_graph_overhead_custom(size_t size) {
    return align_up(sizeof(ggml_cgraph), GGML_MEM_ALIGN) + 2 * size * sizeof(ggml_tensor *) + 2 * GGML_MEM_ALIGN;
}
bool ggml_get_no_alloc(const ggml_context * ctx) { return ctx->no_alloc; }
void ggml_set_no_alloc(ggml_context * ctx, bool no_alloc) { ctx->no_alloc = no_alloc; }

ggml_tensor * ggml_get_first_tensor(const ggml_context * ctx) {
    return ctx->tensors.empty() ? nullptr : ctx->tensors.front();
}

ggml_tensor * ggml_get_next_tensor(const ggml_context * ctx, ggml_tensor * t) {
    for (size_t i = 0; i + 1 < ctx->tensors.size(); ++i) {
        if (ctx->tensors[i] == t) return ctx->tensors[i + 1];
    }
    return nullptr;
}

ggml_tensor * ggml_get_tensor(const ggml_context * ctx, const char * name) {
    for (ggml_tensor * t : ctx->tensors) {
        if (strcmp(t->name, name) == 0) return t;
    }
    return nullptr;
}

// ---- tensors ---------------------------------------------------------------------------------
void ggml_set_contiguous_strides(ggml_tensor * t) {
    t->nb[0] = ggml_type_size(t->type);
    t->nb[1] = t->nb[0] * (t->ne[0] / ggml_blck_size(t->type));
    for (int i = 2; i < GGML_MAX_DIMS; ++i) t->nb[i] = t->nb[i - 1] * t->ne[i - 1];
}

// new tensor header; data from the context unless no_alloc or a view
static ggml_tensor * new_tensor_impl(ggml_context * ctx, ggml_type type, int n_dims, const int64_t * ne,
                                     ggml_tensor * view_src, size_t view_offs) {
    GGML_ASSERT(ggml_type_is_valid(type));
    GGML_ASSERT(n_dims >= 1 && n_dims <= GGML_MAX_DIMS);
    if (view_src && view_src->view_src) {  // views of views alias the root
        view_offs += view_src->view_offs;
        view_src = view_src->view_src;
    }
    auto * t = (ggml_tensor *) ctx_alloc(ctx, sizeof(ggml_tensor), "tensor header");
    memset(t, 0, sizeof(*t));
    t->type = type;
    for (int i = 0; i < GGML_MAX_DIMS; ++i) t->ne[i] = i < n_dims ? ne[i] : 1;
    GGML_ASSERT(t->ne[0] % ggml_blck_size(type) == 0);
    ggml_set_contiguous_strides(t);
    t->op = GGML_OP_NONE;
    t->view_src = view_src;
    t->view_offs = view_offs;
    if (view_src) {
        t->buffer = view_src->buffer;
        if (view_src->data) t->data = (char *) view_src->data + view_offs;
    } else if (!ctx->no_alloc) {
        t->data = ctx_alloc(ctx, ggml_nbytes(t), "tensor data");
    }
    ctx->tensors.push_back(t);
    return t;
}

ggml_tensor * ggml_new_tensor(ggml_context * ctx, ggml_type type, int n_dims, const int64_t * ne) {
    return new_tensor_impl(ctx, type, n_dims, ne, nullptr, 0);
}
ggml_tensor * ggml_new_tensor_1d(ggml_context * ctx, ggml_type type, int64_t ne0) {
    return ggml_new_tensor(ctx, type, 1, &ne0);
}
ggml_tensor * ggml_new_tensor_2d(ggml_context * ctx, ggml_type type, int64_t ne0, int64_t ne1) {
    const int64_t ne[2] = {ne0, ne1};
    return ggml_new_tensor(ctx, type, 2, ne);
}
ggml_tensor * ggml_new_tensor_3d(ggml_context * ctx, ggml_type type, int64_t ne0, int64_t ne1, int64_t ne2) {
    const int64_t ne[3] = {ne0, ne1, ne2};
    return ggml_new_tensor(ctx, type, 3, ne);
}
ggml_tensor * ggml_new_tensor_4d(ggml_context * ctx, ggml_type type, int64_t ne0, int64_t ne1, int64_t ne2,
                                 int64_t ne3) {
    const int64_t ne[4] = {ne0, ne1, ne2, ne3};
    return ggml_new_tensor(ctx, type, 4, ne);
}
ggml_tensor * ggml_dup_tensor(ggml_context * ctx, const ggml_tensor * src) {
    return ggml_new_tensor(ctx, src->type, GGML_MAX_DIMS, src->ne);
}

// view with src's strides; used by the view builders (ggml-ops.cpp)
ggml_tensor * ggml_new_view(ggml_context * ctx, ggml_tensor * src, int n_dims, const int64_t * ne, size_t offset) {
    return new_tensor_impl(ctx, src->type, n_dims, ne, src, offset);
}

ggml_tensor * ggml_view_tensor(ggml_context * ctx, ggml_tensor * src) {
    ggml_tensor * t = new_tensor_impl(ctx, src->type, GGML_MAX_DIMS, src->ne, src, 0);
    for (int i = 0; i < GGML_MAX_DIMS; ++i) t->nb[i] = src->nb[i];
    ggml_format_name(t, "%s (view)", src->name);
    return t;
}

// ---- shape helpers ---------------------------------------------------------------------------
int64_t ggml_nelements(const ggml_tensor * t) { return t->ne[0] * t->ne[1] * t->ne[2] * t->ne[3]; }
int64_t ggml_nrows(const ggml_tensor * t) { return t->ne[1] * t->ne[2] * t->ne[3]; }

size_t ggml_nbytes(const ggml_tensor * t) {
    for (int i = 0; i < GGML_MAX_DIMS; ++i) {
        if (t->ne[i] <= 0) return 0;
    }
    const int64_t blck = ggml_blck_size(t->type);
    size_t n = ggml_type_size(t->type);
    if (blck == 1) {
        for (int i = 0; i < GGML_MAX_DIMS; ++i) n += (t->ne[i] - 1) * t->nb[i];
    } else {
        n = t->ne[0] * t->nb[0] / blck;
        for (int i = 1; i < GGML_MAX_DIMS; ++i) n += (t->ne[i] - 1) * t->nb[i];
    }
    return n;
}

int ggml_n_dims(const ggml_tensor * t) {
    for (int i = GGML_MAX_DIMS - 1; i >= 1; --i) {
        if (t->ne[i] > 1) return i + 1;
    }
    return 1;
}

bool ggml_is_contiguous(const ggml_tensor * t) {
    size_t next = ggml_type_size(t->type);
    if (t->ne[0] != ggml_blck_size(t->type) && t->nb[0] != next) return false;
    next *= t->ne[0] / ggml_blck_size(t->type);
    for (int i = 1; i < GGML_MAX_DIMS; ++i) {
        if (t->ne[i] != 1) {
            if (t->nb[i] != next) return false;
            next *= t->ne[i];
        }
    }
    return true;
}

bool ggml_is_contiguous_rows(const ggml_tensor * t) { return t->nb[0] == ggml_type_size(t->type); }
bool ggml_is_transposed(const ggml_tensor * t) { return t->nb[0] > t->nb[1]; }
bool ggml_is_permuted(const ggml_tensor * t) {
    return t->nb[0] > t->nb[1] || t->nb[1] > t->nb[2] || t->nb[2] > t->nb[3];
}
bool ggml_are_same_shape(const ggml_tensor * a, const ggml_tensor * b) {
    for (int i = 0; i < GGML_MAX_DIMS; ++i) {
        if (a->ne[i] != b->ne[i]) return false;
    }
    return true;
}
bool ggml_can_repeat(const ggml_tensor * small, const ggml_tensor * big) {
    for (int i = 0; i < GGML_MAX_DIMS; ++i) {
        if (small->ne[i] <= 0 || big->ne[i] % small->ne[i] != 0) return false;
    }
    return true;
}

const char * ggml_get_name(const ggml_tensor * t) { return t->name; }
ggml_tensor * ggml_set_name(ggml_tensor * t, const char * name) {
    snprintf(t->name, sizeof(t->name), "%s", name);
    return t;
}
ggml_tensor * ggml_format_name(ggml_tensor * t, const char * fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(t->name, sizeof(t->name), fmt, ap);
    va_end(ap);
    return t;
}
void ggml_set_input(ggml_tensor * t) { t->flags |= GGML_TENSOR_FLAG_INPUT; }
void ggml_set_output(ggml_tensor * t) { t->flags |= GGML_TENSOR_FLAG_OUTPUT; }
void ggml_set_param(ggml_tensor * t) { t->flags |= GGML_TENSOR_FLAG_PARAM; }

// ---- element access (host data) --------------------------------------------------------------
float ggml_get_f32_nd(const ggml_tensor * t, int64_t i0, int64_t i1, int64_t i2, int64_t i3) {
    GGML_ASSERT(t->data != nullptr);
    const char * row = (const char *) t->data + i1 * t->nb[1] + i2 * t->nb[2] + i3 * t->nb[3];
    switch (t->type) {
        case GGML_TYPE_F32: return *(const float *) (row + i0 * t->nb[0]);
        case GGML_TYPE_F16: return ggml_fp16_to_fp32(*(const ggml_fp16_t *) (row + i0 * t->nb[0]));
        case GGML_TYPE_I32: return (float) *(const int32_t *) (row + i0 * t->nb[0]);
        case GGML_TYPE_Q8_0: {
            const auto * b = (const block_q8_0 *) row + i0 / QK8_0;
            return ggml_fp16_to_fp32(b->d) * b->qs[i0 % QK8_0];
        }
        case GGML_TYPE_Q8_1: {
            const auto * b = (const block_q8_1 *) row + i0 / QK8_1;
            return ggml_fp16_to_fp32(b->d) * b->qs[i0 % QK8_1];
        }
        default: GGML_ABORT("ggml_get_f32_nd: unsupported type %s", ggml_type_name(t->type));
    }
}

void ggml_set_f32_nd(ggml_tensor * t, int64_t i0, int64_t i1, int64_t i2, int64_t i3, float v) {
    GGML_ASSERT(t->data != nullptr);
    char * p = (char *) t->data + i0 * t->nb[0] + i1 * t->nb[1] + i2 * t->nb[2] + i3 * t->nb[3];
    switch (t->type) {
        case GGML_TYPE_F32: *(float *) p = v; break;
        case GGML_TYPE_F16: *(ggml_fp16_t *) p = ggml_fp32_to_fp16(v); break;
        case GGML_TYPE_I32: *(int32_t *) p = (int32_t) v; break;
        default: GGML_ABORT("ggml_set_f32_nd: unsupported type %s", ggml_type_name(t->type));
    }
}

int32_t ggml_get_i32_1d(const ggml_tensor * t, int64_t i) {
    GGML_ASSERT(t->type == GGML_TYPE_I32 && t->data != nullptr);
    return *(const int32_t *) ((const char *) t->data + i * t->nb[0]);
}

// ---- graphs ----------------------------------------------------------------------------------
ggml_cgraph * ggml_new_graph_custom(ggml_context * ctx, size_t size) {
    auto * gf = (ggml_cgraph *) ctx_alloc(ctx, sizeof(ggml_cgraph), "graph");
    gf->size = (int) size;
    gf->n_nodes = 0;
    gf->n_leafs = 0;
    gf->plan_id = 0;
    gf->nodes = (ggml_tensor **) ctx_alloc(ctx, size * sizeof(ggml_tensor *), "graph nodes");
    gf->leafs = (ggml_tensor **) ctx_alloc(ctx, size * sizeof(ggml_tensor *), "graph leafs");
    ctx->graph_sets.push_back(std::make_unique<std::unordered_set<const ggml_tensor *>>());
    gf->visited = ctx->graph_sets.back().get();
    return gf;
}

ggml_cgraph * ggml_new_graph(ggml_context * ctx) { return ggml_new_graph_custom(ctx, GGML_DEFAULT_GRAPH_SIZE); }

// depth-first, sources before users (iterative, so deep graphs cannot overflow the stack)
static void visit(ggml_cgraph * gf, ggml_tensor * root) {
    struct frame { ggml_tensor * t; int next_src; };
    std::vector<frame> stack;
    if (!gf->visited->insert(root).second) return;
    stack.push_back({root, 0});
    while (!stack.empty()) {
        frame & f = stack.back();
        if (f.next_src < GGML_MAX_SRC) {
            ggml_tensor * s = f.t->src[f.next_src++];
            if (s && gf->visited->insert(s).second) stack.push_back({s, 0});
            continue;
        }
        ggml_tensor * t = f.t;
        stack.pop_back();
        if (t->op == GGML_OP_NONE) {
            GGML_ASSERT(gf->n_leafs < gf->size && "graph leaf capacity exceeded");
            gf->leafs[gf->n_leafs++] = t;
        } else {
            GGML_ASSERT(gf->n_nodes < gf->size && "graph node capacity exceeded");
            gf->nodes[gf->n_nodes++] = t;
        }
    }
}

void ggml_build_forward_expand(ggml_cgraph * gf, ggml_tensor * t) { visit(gf, t); }
int ggml_graph_n_nodes(const ggml_cgraph * gf) { return gf->n_nodes; }
ggml_tensor * ggml_graph_node(const ggml_cgraph * gf, int i) {
    if (i < 0) i += gf->n_nodes;
    GGML_ASSERT(i >= 0 && i < gf->n_nodes);
    return gf->nodes[i];
}
int ggml_graph_n_leafs(const ggml_cgraph * gf) { return gf->n_leafs; }
ggml_tensor * ggml_graph_leaf(const ggml_cgraph * gf, int i) {
    GGML_ASSERT(i >= 0 && i < gf->n_leafs);
    return gf->leafs[i];
}
ggml_tensor * ggml_graph_get_tensor(const ggml_cgraph * gf, const char * name) {
    for (int i = 0; i < gf->n_nodes; ++i) {
        if (strcmp(gf->nodes[i]->name, name) == 0) return gf->nodes[i];
    }
    for (int i = 0; i < gf->n_leafs; ++i) {
        if (strcmp(gf->leafs[i]->name, name) == 0) return gf->leafs[i];
    }
    return nullptr;
}
void ggml_graph_clear(ggml_cgraph * gf) {
    gf->n_nodes = 0;
    gf->n_leafs = 0;
    if (gf->visited) gf->visited->clear();
}
