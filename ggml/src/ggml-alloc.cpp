// ggml-alloc.cpp - the graph allocator: liveness planning of a graph's intermediates into one
// buffer (free list with best fit and coalescing), in-place reuse, and placement.
#include "ggml-alloc.h"

#include "ggml-impl.h"

#include <algorithm>
#include <climits>
#include <cstdint>
#include <unordered_map>
#include <vector>

static size_t align_up(size_t x, size_t a) { return (x + a - 1) / a * a; }

// ---- free list ---------------------------------------------------------------------------
// Free blocks below `top` are kept sorted by offset; everything at or above `top` is free.
namespace {
struct free_list {
    struct block {
        size_t offset;
        size_t size;
    };
    size_t alignment = 1;
    std::vector<block> blocks;
    size_t top = 0;
    size_t max_size = 0;

    void reset(size_t align) {
        alignment = align;
        blocks.clear();
        top = 0;
        max_size = 0;
    }

    size_t alloc(size_t size) {
        size = align_up(std::max<size_t>(size, 1), alignment);
        int best = -1;
        for (int i = 0; i < (int)blocks.size(); ++i) { // best fit: the smallest block that holds it
            if (blocks[i].size >= size && (best < 0 || blocks[i].size < blocks[best].size)) best = i;
        }
        size_t offset;
        if (best >= 0) {
            offset = blocks[best].offset;
            blocks[best].offset += size;
            blocks[best].size -= size;
            if (blocks[best].size == 0) blocks.erase(blocks.begin() + best);
        } else {
            offset = top;
            top += size;
        }
        max_size = std::max(max_size, top);
        return offset;
    }

    void free(size_t offset, size_t size) {
        size = align_up(std::max<size_t>(size, 1), alignment);
        if (offset + size == top) {
            top = offset;
            while (!blocks.empty() && blocks.back().offset + blocks.back().size == top) {
                top = blocks.back().offset;
                blocks.pop_back();
            }
            return;
        }
        auto it = std::lower_bound(blocks.begin(), blocks.end(), offset,
                                   [](const block & b, size_t off) { return b.offset < off; });
        GGML_ASSERT(it == blocks.end() || it->offset >= offset + size); // no double free / overlap
        it = blocks.insert(it, block{offset, size});
        // coalesce with the next block, then with the previous one
        if (it + 1 != blocks.end() && it->offset + it->size == (it + 1)->offset) {
            it->size += (it + 1)->size;
            blocks.erase(it + 1);
        }
        if (it != blocks.begin() && (it - 1)->offset + (it - 1)->size == it->offset) {
            (it - 1)->size += it->size;
            blocks.erase(it);
        }
    }
};

struct tensor_info {
    int n_children = 0;     // consumers not yet run
    int n_views = 0;        // views (nodes with view_src == this) still holding this tensor's memory
    bool owned = false;     // this allocator places it (no data, not a view)
    bool allocated = false; // currently holds a block in the plan
    bool pinned = false;    // never freed (graph inputs and data-less leafs)
    bool inplace = false;   // computed over its source's block
    size_t offset = SIZE_MAX;
    size_t size = 0;
};
} // namespace

struct ggml_gallocr {
    ggml_backend_buffer_type_t buft = nullptr;
    ggml_backend_buffer_t buffer = nullptr;
    size_t alignment = 1;
    free_list fl;
    std::unordered_map<const ggml_tensor *, tensor_info> info;
    size_t plan_size = 0;
};

static bool same_layout(const ggml_tensor * a, const ggml_tensor * b) {
    if (a->type != b->type) return false;
    for (int i = 0; i < GGML_MAX_DIMS; ++i) {
        if (a->ne[i] != b->ne[i] || a->nb[i] != b->nb[i]) return false;
    }
    return true;
}

bool ggml_op_can_inplace(const ggml_tensor * node, int src_index) {
    if (src_index < 0 || src_index >= GGML_MAX_SRC) return false;
    const ggml_tensor * src = node->src[src_index];
    if (!src || node->view_src) return false;
    bool op_ok = false;
    switch (node->op) {
        case GGML_OP_ADD:
        case GGML_OP_MUL:
            op_ok = src_index <= 1;
            break;
        case GGML_OP_SCALE:
        case GGML_OP_SILU:
        case GGML_OP_SWIGLU:
        case GGML_OP_RMS_NORM:
        case GGML_OP_SOFT_MAX:
        case GGML_OP_ROPE:
        case GGML_OP_DIAG_MASK_INF:
            op_ok = src_index == 0;
            break;
        default:
            op_ok = false;
            break;
    }
    return op_ok && same_layout(node, src);
}

ggml_gallocr_t ggml_gallocr_new(ggml_backend_buffer_type_t buft) {
    GGML_ASSERT(buft);
    auto * ga = new ggml_gallocr;
    ga->buft = buft;
    ga->alignment = std::max<size_t>(ggml_backend_buft_get_alignment(buft), 1);
    return ga;
}

void ggml_gallocr_free(ggml_gallocr_t galloc) {
    if (!galloc) return;
    if (galloc->buffer) ggml_backend_buffer_free(galloc->buffer);
    delete galloc;
}

static bool needs_alloc(const ggml_tensor * t) { return t->data == nullptr && t->buffer == nullptr && !t->view_src; }

static void plan_alloc(ggml_gallocr_t ga, const ggml_tensor * t, tensor_info & ti) {
    ti.owned = true;
    ti.allocated = true;
    ti.size = ggml_backend_buft_get_alloc_size(ga->buft, t);
    ti.offset = ga->fl.alloc(ti.size);
}

// t's consumers (and views) are all done: give its memory back (views: release their view_src)
static void plan_release(ggml_gallocr_t ga, const ggml_tensor * t) {
    if (t->flags & (GGML_TENSOR_FLAG_OUTPUT | GGML_TENSOR_FLAG_INPUT)) return;
    if (t->view_src) {
        tensor_info & vi = ga->info[t->view_src];
        vi.n_views--;
        if (vi.n_views == 0 && vi.n_children == 0) plan_release(ga, t->view_src);
        return;
    }
    tensor_info & ti = ga->info[t];
    if (ti.owned && ti.allocated && !ti.pinned) {
        ga->fl.free(ti.offset, ti.size);
        ti.allocated = false;
    }
}

// Can node take over parent's block? parent must be ours, alive, consumed only by this node,
// not aliased by a view, not an input/output, and of the same layout (ggml_op_can_inplace).
static bool try_inplace(ggml_gallocr_t ga, const ggml_tensor * node, tensor_info & ni) {
    for (int i = 0; i < GGML_MAX_SRC; ++i) {
        const ggml_tensor * p = node->src[i];
        if (!p || !ggml_op_can_inplace(node, i)) continue;
        if (p->view_src || (p->flags & (GGML_TENSOR_FLAG_INPUT | GGML_TENSOR_FLAG_OUTPUT))) continue;
        auto it = ga->info.find(p);
        if (it == ga->info.end()) continue;
        tensor_info & pi = it->second;
        if (!pi.owned || !pi.allocated || pi.pinned || pi.n_children != 1 || pi.n_views != 0) continue;
        if (ggml_backend_buft_get_alloc_size(ga->buft, node) > pi.size) continue;
        ni.owned = true;
        ni.allocated = true;
        ni.inplace = true;
        ni.offset = pi.offset;
        ni.size = pi.size;
        pi.allocated = false; // the block now belongs to node
        return true;
    }
    return false;
}

// Plan every tensor of gf; returns the buffer size the plan needs.
static size_t plan_graph(ggml_gallocr_t ga, const ggml_cgraph * gf) {
    ga->info.clear();
    ga->fl.reset(ga->alignment);
    // consumers per tensor, views per view_src
    for (int i = 0; i < gf->n_nodes; ++i) {
        const ggml_tensor * node = gf->nodes[i];
        ga->info[node];
        if (node->view_src) ga->info[node->view_src].n_views++;
        for (int j = 0; j < GGML_MAX_SRC; ++j) {
            if (node->src[j]) ga->info[node->src[j]].n_children++;
        }
    }
    // graph inputs first, in their own never-reused blocks: data-less leafs, INPUT-flagged nodes,
    // and data-less sources that are not part of the graph (so nothing can overwrite them)
    auto pin = [&](const ggml_tensor * t) {
        tensor_info & ti = ga->info[t];
        if (ti.allocated || !needs_alloc(t)) return;
        plan_alloc(ga, t, ti);
        ti.pinned = true;
    };
    for (int i = 0; i < gf->n_leafs; ++i)
        pin(gf->leafs[i]);
    for (int i = 0; i < gf->n_nodes; ++i) {
        if (gf->nodes[i]->flags & GGML_TENSOR_FLAG_INPUT) pin(gf->nodes[i]);
    }
    std::unordered_map<const ggml_tensor *, bool> in_graph;
    for (int i = 0; i < gf->n_nodes; ++i)
        in_graph[gf->nodes[i]] = true;
    for (int i = 0; i < gf->n_nodes; ++i) {
        for (int j = 0; j < GGML_MAX_SRC; ++j) {
            const ggml_tensor * s = gf->nodes[i]->src[j];
            if (s && !in_graph.count(s)) pin(s);
        }
    }
    // walk the nodes in order
    for (int i = 0; i < gf->n_nodes; ++i) {
        const ggml_tensor * node = gf->nodes[i];
        tensor_info & ni = ga->info[node];
        if (needs_alloc(node) && !ni.allocated && !try_inplace(ga, node, ni)) plan_alloc(ga, node, ni);
        for (int j = 0; j < GGML_MAX_SRC; ++j) {
            const ggml_tensor * s = node->src[j];
            if (!s) continue;
            tensor_info & si = ga->info[s];
            si.n_children--;
            if (si.n_children == 0 && si.n_views == 0) plan_release(ga, s);
        }
        // a view nobody reads is a graph result: it keeps holding its view_src (never freed)
    }
    return ga->fl.max_size;
}

static bool ensure_buffer(ggml_gallocr_t ga, size_t size) {
    if (ga->buffer && ggml_backend_buffer_get_size(ga->buffer) >= size) return true;
    const size_t max_size = ggml_backend_buft_get_max_size(ga->buft);
    if (size > max_size) {
        GGML_LOG_ERROR("%s: graph needs %zu bytes, more than the %s buffer type's max size %zu\n", __func__, size,
                       ggml_backend_buft_name(ga->buft), max_size);
        return false;
    }
    if (ga->buffer) ggml_backend_buffer_free(ga->buffer);
    ga->buffer = ggml_backend_buft_alloc_buffer(ga->buft, std::max(size, ga->alignment));
    if (!ga->buffer) {
        GGML_LOG_ERROR("%s: failed to allocate a %s compute buffer of %zu bytes\n", __func__,
                       ggml_backend_buft_name(ga->buft), size);
        return false;
    }
    ggml_backend_buffer_set_usage(ga->buffer, GGML_BACKEND_BUFFER_USAGE_COMPUTE);
    return true;
}

bool ggml_gallocr_reserve(ggml_gallocr_t galloc, ggml_cgraph * gf) {
    galloc->plan_size = plan_graph(galloc, gf);
    return ensure_buffer(galloc, galloc->plan_size);
}

bool ggml_gallocr_alloc_graph(ggml_gallocr_t galloc, ggml_cgraph * gf) {
    // tensors this allocator placed before (the same graph allocated again) are planned afresh,
    // so that they and the new ones cannot overlap
    auto unplace = [&](ggml_tensor * t) {
        if (t && galloc->buffer && t->buffer == galloc->buffer) {
            t->data = nullptr;
            t->buffer = nullptr;
        }
    };
    for (int i = 0; i < gf->n_leafs; ++i)
        unplace(gf->leafs[i]);
    for (int i = 0; i < gf->n_nodes; ++i) {
        unplace(gf->nodes[i]);
        for (ggml_tensor * s : gf->nodes[i]->src)
            unplace(s);
    }
    galloc->plan_size = plan_graph(galloc, gf);
    if (!ensure_buffer(galloc, galloc->plan_size)) return false;
    char * base = (char *)ggml_backend_buffer_get_base(galloc->buffer);
    auto place = [&](ggml_tensor * t) {
        if (!needs_alloc(t)) return;
        auto it = galloc->info.find(t);
        if (it == galloc->info.end() || !it->second.owned) return;
        ggml_backend_tensor_alloc(galloc->buffer, t, base + it->second.offset);
    };
    auto view = [&](ggml_tensor * t) {
        if (!t->view_src || t->buffer) return;
        if (!t->view_src->data) {
            GGML_LOG_ERROR("%s: view '%s' of '%s', which has no memory\n", __func__, t->name, t->view_src->name);
            return;
        }
        ggml_backend_view_init(t);
    };
    for (int i = 0; i < gf->n_leafs; ++i)
        place(gf->leafs[i]);
    for (int i = 0; i < gf->n_nodes; ++i) {
        ggml_tensor * node = gf->nodes[i];
        for (int j = 0; j < GGML_MAX_SRC; ++j) {
            if (node->src[j]) place(node->src[j]);
        }
        place(node);
    }
    bool ok = true;
    for (int i = 0; i < gf->n_nodes; ++i) {
        ggml_tensor * node = gf->nodes[i];
        for (int j = 0; j < GGML_MAX_SRC; ++j) {
            if (node->src[j]) view(node->src[j]);
        }
        view(node);
        ok = ok && (node->data || ggml_nelements(node) == 0);
    }
    if (!ok) GGML_LOG_ERROR("%s: some nodes of the graph got no memory\n", __func__);
    return ok;
}

size_t ggml_gallocr_get_buffer_size(ggml_gallocr_t galloc) {
    return galloc->buffer ? ggml_backend_buffer_get_size(galloc->buffer) : 0;
}

ggml_backend_buffer_t ggml_gallocr_get_buffer(ggml_gallocr_t galloc) { return galloc->buffer; }

size_t ggml_gallocr_naive_size(ggml_cgraph * gf, ggml_backend_buffer_type_t buft) {
    const size_t align = std::max<size_t>(ggml_backend_buft_get_alignment(buft), 1);
    size_t total = 0;
    for (int i = 0; i < gf->n_nodes; ++i) {
        const ggml_tensor * t = gf->nodes[i];
        if (t->view_src) continue;
        total += align_up(std::max<size_t>(ggml_backend_buft_get_alloc_size(buft, t), 1), align);
    }
    return total;
}

bool ggml_gallocr_is_inplace(ggml_gallocr_t galloc, const ggml_tensor * t) {
    auto it = galloc->info.find(t);
    return it != galloc->info.end() && it->second.inplace;
}

size_t ggml_gallocr_get_offset(ggml_gallocr_t galloc, const ggml_tensor * t) {
    if (galloc->buffer && t->data && t->buffer == galloc->buffer) {
        return (size_t)((const char *)t->data - (const char *)ggml_backend_buffer_get_base(galloc->buffer));
    }
    if (t->view_src) {
        const size_t o = ggml_gallocr_get_offset(galloc, t->view_src);
        return o == SIZE_MAX ? SIZE_MAX : o + t->view_offs;
    }
    auto it = galloc->info.find(t);
    return it != galloc->info.end() && it->second.owned ? it->second.offset : SIZE_MAX;
}
