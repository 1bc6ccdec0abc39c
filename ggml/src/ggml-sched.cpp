// ggml-sched.cpp - the backend scheduler: assigns each node of a graph to a backend, splits the
// graph into runs of nodes on one backend, copies each split's foreign inputs into the split's
// backend, plans one compute buffer per backend (ggml_gallocr) and runs the splits in order.
//
// Each split is a ggml_cgraph view over the caller's node array (nodes + i_start, n), passed to
// its backend's graph_compute. Inputs that live elsewhere are copied into tensors of the split
// backend's compute buffer; the consuming nodes' src pointers are redirected to the copies only
// while the scheduler plans or runs the graph, so between calls the caller's graph is untouched
// (and may be freed before ggml_backend_sched_reset). While profiling (ggml_backend_sched_set_profile) a compute
// runs through sched_compute_profiled: every split synchronised and timed per node by its backend.
#include "ggml-alloc.h"
#include "ggml-backend-impl.h"
#include "ggml-backend.h"
#include "ggml-cost.h"
#include "ggml-impl.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <unordered_map>
#include <vector>

struct ggml_backend_sched {
    std::vector<ggml_backend_t> backends; // priority order; the last is the fallback (CPU)
    std::vector<ggml_gallocr_t> galloc;   // one per backend
    size_t graph_size = 0;

    std::unordered_map<const ggml_tensor *, int> user_backend; // ggml_backend_sched_set_tensor_backend
    std::unordered_map<const ggml_tensor *, int> assign;       // where each tensor runs / lives

    std::vector<ggml_sched_split_info> splits;
    std::vector<ggml_cgraph> split_graphs;
    std::unordered_map<const ggml_tensor *, int> node_split;
    std::unordered_map<const ggml_tensor *, ggml_tensor *> copy_origin;
    std::deque<ggml_tensor> extra; // input copies and liveness markers (stable addresses)

    // node->src[j] reads copy instead of orig while the scheduler plans or runs the graph
    struct rewrite {
        ggml_tensor * node;
        int j;
        ggml_tensor * orig;
        ggml_tensor * copy;
    };
    std::vector<rewrite> rewrites;

    std::vector<std::vector<ggml_tensor *>> plan_nodes, plan_leafs; // per backend, execution order
    std::vector<ggml_cgraph> plan_graphs;

    const ggml_cgraph * cur_graph = nullptr;
    int cur_n_nodes = 0;
    bool is_alloc = false;
    int n_copies = 0;

    bool profile = false;  // ggml_backend_sched_set_profile
    bool has_prof = false; // prof holds a profiled compute
    ggml_profile prof;
    std::vector<int> prof_backend; // backend of each of prof's records
};

static const ggml_tensor * tensor_root(const ggml_tensor * t) {
    while (t->view_src)
        t = t->view_src;
    return t;
}

static bool is_compute_node(const ggml_tensor * n) {
    return n->op != GGML_OP_NONE && !ggml_is_view_op(n->op) && !n->view_src;
}

static int buffer_backend_id(ggml_backend_sched_t sched, ggml_backend_buffer_t buf) {
    if (!buf) return -1;
    const int nb = (int)sched->backends.size();
    ggml_backend_t owner = ggml_backend_buffer_get_owner(buf);
    for (int i = 0; i < nb; ++i) {
        if (sched->backends[i] == owner) return i;
    }
    for (int i = 0; i < nb; ++i) {
        if (ggml_backend_get_default_buffer_type(sched->backends[i]) == buf->buft) return i;
    }
    for (int i = 0; i < nb; ++i) {
        if (ggml_backend_supports_buft(sched->backends[i], buf->buft)) return i;
    }
    return -1;
}

// backend whose memory holds t: its buffer's owner, the host for context memory, else its assignment
static int mem_backend_id(ggml_backend_sched_t sched, const ggml_tensor * t) {
    const ggml_tensor * r = tensor_root(t);
    if (r->buffer) {
        const int id = buffer_backend_id(sched, r->buffer);
        return id >= 0 ? id : (int)sched->backends.size() - 1;
    }
    if (r->data) return (int)sched->backends.size() - 1;
    auto it = sched->assign.find(r);
    return it == sched->assign.end() ? -1 : it->second;
}

// A split's input src into its copy dst on backend b. From host memory into a backend that writes asynchronously
// (set_tensor_async: the host data read before the call returns, the write ordered before the split's work) without
// a wait per input: a decode step's inputs (token ids, positions, cells; CUDA: ~6 us of host time a copy) cost the
// device time between steps. GGML_SCHED_SYNC_INPUTS=1: every input by ggml_backend_tensor_copy, as before.
static void copy_input(ggml_backend_sched_t sched, ggml_backend_t b, const ggml_tensor * src, ggml_tensor * dst) {
    static const bool sync_inputs = getenv("GGML_SCHED_SYNC_INPUTS") != nullptr;
    const int sb = mem_backend_id(sched, src);
    if (sb >= 0) ggml_backend_synchronize(sched->backends[sb]);
    const ggml_tensor * r = tensor_root(src);
    const bool host = r->buffer ? ggml_backend_buffer_is_host(r->buffer) : r->data != nullptr;
    if (!sync_inputs && b->iface.set_tensor_async && host && ggml_is_contiguous(src)) {
        ggml_backend_tensor_set_async(b, dst, src->data, 0, ggml_nbytes(src));
        return;
    }
    ggml_backend_tensor_copy(src, dst);
}

static bool is_weight(const ggml_tensor * t) {
    return ggml_backend_tensor_in_weights(t) || (tensor_root(t)->flags & GGML_TENSOR_FLAG_PARAM);
}

// The caller's graph reads the copies only inside scheduler calls; between calls it is untouched.
static void rewrites_apply(ggml_backend_sched_t sched) {
    for (const auto & r : sched->rewrites)
        r.node->src[r.j] = r.copy;
}
static void rewrites_undo(ggml_backend_sched_t sched) {
    for (auto it = sched->rewrites.rbegin(); it != sched->rewrites.rend(); ++it)
        it->node->src[it->j] = it->orig;
}

static void sched_clear(ggml_backend_sched_t sched) {
    sched->rewrites.clear(); // (already undone: the caller's graph may be gone by now)
    sched->assign.clear();
    sched->splits.clear();
    sched->split_graphs.clear();
    sched->node_split.clear();
    sched->copy_origin.clear();
    sched->extra.clear();
    for (auto & v : sched->plan_nodes)
        v.clear();
    for (auto & v : sched->plan_leafs)
        v.clear();
    sched->plan_graphs.clear();
    sched->cur_graph = nullptr;
    sched->is_alloc = false;
    sched->n_copies = 0;
}

ggml_backend_sched_t ggml_backend_sched_new(ggml_backend_t * backends, int n_backends, size_t graph_size) {
    GGML_ASSERT(backends && n_backends > 0);
    auto * sched = new ggml_backend_sched;
    for (int i = 0; i < n_backends; ++i) {
        GGML_ASSERT(backends[i]);
        sched->backends.push_back(backends[i]);
        sched->galloc.push_back(ggml_gallocr_new(ggml_backend_get_default_buffer_type(backends[i])));
    }
    sched->graph_size = graph_size;
    sched->plan_nodes.resize(n_backends);
    sched->plan_leafs.resize(n_backends);
    return sched;
}

void ggml_backend_sched_free(ggml_backend_sched_t sched) {
    if (!sched) return;
    sched_clear(sched);
    for (auto * ga : sched->galloc)
        ggml_gallocr_free(ga);
    delete sched;
}

void ggml_backend_sched_reset(ggml_backend_sched_t sched) {
    sched_clear(sched);
    sched->user_backend.clear();
}

// ---- assignment ----------------------------------------------------------------------------
static bool sched_assign(ggml_backend_sched_t sched, const ggml_cgraph * gf) {
    const int n_b = (int)sched->backends.size();
    const int cpu = n_b - 1;
    auto & assign = sched->assign;
    auto supports = [&](int b, const ggml_tensor * n) {
        return b >= 0 && b < n_b && ggml_backend_supports_op(sched->backends[b], n);
    };
    auto user = [&](const ggml_tensor * t) {
        auto it = sched->user_backend.find(t);
        return it == sched->user_backend.end() ? -1 : it->second;
    };
    // memory that already exists decides; data-less leafs (graph inputs) live on the host
    auto assign_leaf = [&](const ggml_tensor * t) {
        if (assign.count(t)) return;
        const ggml_tensor * r = tensor_root(t);
        if (r->buffer || r->data)
            assign[t] = mem_backend_id(sched, t);
        else if (user(t) >= 0)
            assign[t] = user(t);
        else if (!t->view_src)
            assign[t] = cpu;
    };
    for (int i = 0; i < gf->n_leafs; ++i)
        assign_leaf(gf->leafs[i]);
    for (int i = 0; i < gf->n_nodes; ++i) {
        for (int j = 0; j < GGML_MAX_SRC; ++j) {
            const ggml_tensor * s = gf->nodes[i]->src[j];
            if (s && s->op == GGML_OP_NONE) assign_leaf(s);
        }
    }
    // (1) explicit, (2) existing memory, (3) next to a weight
    for (int i = 0; i < gf->n_nodes; ++i) {
        const ggml_tensor * n = gf->nodes[i];
        if (!is_compute_node(n)) continue;
        if (user(n) >= 0) {
            assign[n] = user(n);
        } else if (n->buffer || n->data) {
            assign[n] = mem_backend_id(sched, n);
        } else {
            for (int j = 0; j < GGML_MAX_SRC; ++j) {
                const ggml_tensor * s = n->src[j];
                if (!s || !is_weight(s)) continue;
                const int b = mem_backend_id(sched, s);
                if (supports(b, n)) assign[n] = b;
                break;
            }
        }
    }
    // (4) propagate to neighbours: non-CPU backends down then up, then any backend down then up
    auto expand = [&](bool forward, bool any) {
        int cur = -1;
        for (int k = 0; k < gf->n_nodes; ++k) {
            const ggml_tensor * n = gf->nodes[forward ? k : gf->n_nodes - 1 - k];
            if (!is_compute_node(n)) continue;
            auto it = assign.find(n);
            if (it != assign.end())
                cur = (!any && it->second == cpu) ? -1 : it->second;
            else if (cur >= 0 && supports(cur, n))
                assign[n] = cur;
        }
    };
    expand(true, false);
    expand(false, false);
    expand(true, true);
    expand(false, true);
    // (5) nothing to follow: the highest priority backend that supports it, then follow that
    int cur = -1;
    for (int i = 0; i < gf->n_nodes; ++i) {
        const ggml_tensor * n = gf->nodes[i];
        if (!is_compute_node(n)) continue;
        auto it = assign.find(n);
        if (it != assign.end()) {
            cur = it->second;
            continue;
        }
        if (supports(cur, n)) {
            assign[n] = cur;
            continue;
        }
        for (int b = 0; b < n_b; ++b) {
            if (supports(b, n)) {
                assign[n] = cur = b;
                break;
            }
        }
    }
    // unsupported where it was put: fall back to the CPU
    for (int i = 0; i < gf->n_nodes; ++i) {
        const ggml_tensor * n = gf->nodes[i];
        if (!is_compute_node(n)) continue;
        auto it = assign.find(n);
        if (it != assign.end() && supports(it->second, n)) continue;
        if (!supports(cpu, n)) {
            GGML_LOG_ERROR("%s: no backend supports node %d '%s' (%s)\n", __func__, i, n->name, ggml_op_name(n->op));
            return false;
        }
        assign[n] = cpu;
    }
    // views (and ops writing into a view, like CPY) run where their memory lives
    for (int i = 0; i < gf->n_nodes; ++i) {
        const ggml_tensor * n = gf->nodes[i];
        if (is_compute_node(n)) continue;
        const bool has_mem = n->view_src || n->buffer || n->data;
        const int b = has_mem ? mem_backend_id(sched, n) : (user(n) >= 0 ? user(n) : cpu);
        if (b < 0) {
            GGML_LOG_ERROR("%s: view node %d '%s' of a tensor with no memory and no backend\n", __func__, i, n->name);
            return false;
        }
        assign[n] = b;
        if (n->view_src && !ggml_is_view_op(n->op) && !supports(b, n)) {
            GGML_LOG_ERROR("%s: node %d '%s' (%s) writes into %s memory but that backend does not support it\n",
                           __func__, i, n->name, ggml_op_name(n->op), ggml_backend_name(sched->backends[b]));
            return false;
        }
    }
    return true;
}

// ---- splits, input copies, per-backend plans ---------------------------------------------
static ggml_tensor * new_extra(ggml_backend_sched_t sched, const ggml_tensor * like) {
    ggml_tensor & t = sched->extra.emplace_back();
    std::memset(&t, 0, sizeof(t));
    t.type = like->type;
    for (int i = 0; i < GGML_MAX_DIMS; ++i) {
        t.ne[i] = like->ne[i];
        t.nb[i] = like->nb[i]; // same layout, so a raw copy of ggml_nbytes bytes is the tensor
    }
    t.op = GGML_OP_NONE;
    return &t;
}

static bool sched_split(ggml_backend_sched_t sched, ggml_cgraph * gf) {
    if (!sched_assign(sched, gf)) return false;
    const int n_b = (int)sched->backends.size();
    auto & splits = sched->splits;
    // runs of compute nodes on one backend; views stay in the current run
    for (int i = 0; i < gf->n_nodes; ++i) {
        const ggml_tensor * n = gf->nodes[i];
        if (splits.empty()) splits.push_back({-1, i, i, {}, {}});
        if (n->op != GGML_OP_NONE && !ggml_is_view_op(n->op)) {
            const int b = sched->assign.at(n);
            if (splits.back().backend_id == -1)
                splits.back().backend_id = b;
            else if (splits.back().backend_id != b)
                splits.push_back({b, i, i, {}, {}});
        }
        splits.back().i_end = i + 1;
        sched->node_split[n] = (int)splits.size() - 1;
    }
    for (auto & s : splits) {
        if (s.backend_id == -1) s.backend_id = n_b - 1;
    }
    // foreign inputs: one copy per (tensor, split), consumers redirected to it
    for (int si = 0; si < (int)splits.size(); ++si) {
        auto & s = splits[si];
        std::unordered_map<const ggml_tensor *, ggml_tensor *> copies;
        for (int i = s.i_start; i < s.i_end; ++i) {
            ggml_tensor * n = gf->nodes[i];
            if (n->op == GGML_OP_NONE || ggml_is_view_op(n->op)) continue;
            for (int j = 0; j < GGML_MAX_SRC; ++j) {
                ggml_tensor * src = n->src[j];
                if (!src) continue;
                const int sb = mem_backend_id(sched, src);
                if (sb == s.backend_id) continue;
                if (sb < 0) {
                    GGML_LOG_ERROR("%s: input '%s' of node %d '%s' has no memory and no backend\n", __func__, src->name,
                                   i, n->name);
                    return false;
                }
                ggml_tensor *& c = copies[src];
                if (!c) {
                    c = new_extra(sched, src);
                    std::snprintf(c->name, GGML_MAX_NAME, "%.40s#%s#%d", src->name,
                                  ggml_backend_name(sched->backends[s.backend_id]), si);
                    sched->assign[c] = s.backend_id;
                    sched->copy_origin[c] = src;
                    s.inputs.push_back(src);
                    s.input_copies.push_back(c);
                    sched->n_copies++;
                }
                sched->rewrites.push_back({n, j, src, c});
                n->src[j] = c;
            }
        }
    }
    // per-backend execution order for the allocators: input copies at the start of their split,
    // and a marker in the source's backend that keeps the source alive until it is copied
    for (int i = 0; i < gf->n_leafs; ++i) {
        ggml_tensor * l = gf->leafs[i];
        if (l->data || l->buffer || l->view_src) continue;
        sched->plan_leafs[sched->assign.at(l)].push_back(l);
    }
    for (auto & s : splits) {
        for (size_t k = 0; k < s.inputs.size(); ++k) {
            ggml_tensor * src = s.inputs[k];
            const int sb = mem_backend_id(sched, src);
            if (!tensor_root(src)->data && !tensor_root(src)->buffer) {
                // a consumer that is never computed: it has (dummy) memory, so the allocator
                // places nothing for it, but src stays alive until this point of the order
                static float dummy;
                ggml_tensor * dep = new_extra(sched, src);
                for (int d = 0; d < GGML_MAX_DIMS; ++d)
                    dep->ne[d] = 1;
                dep->type = GGML_TYPE_F32;
                ggml_set_contiguous_strides(dep);
                dep->data = &dummy;
                dep->src[0] = src;
                std::snprintf(dep->name, GGML_MAX_NAME, "%.50s#keep", src->name);
                sched->plan_nodes[sb].push_back(dep);
            }
            sched->plan_nodes[s.backend_id].push_back(s.input_copies[k]);
        }
        for (int i = s.i_start; i < s.i_end; ++i) {
            ggml_tensor * n = gf->nodes[i];
            const int b = n->view_src ? mem_backend_id(sched, n) : sched->assign.at(n);
            sched->plan_nodes[b].push_back(n);
        }
    }
    for (int b = 0; b < n_b; ++b) {
        ggml_cgraph g{};
        g.size = (int)std::max(sched->plan_nodes[b].size(), sched->plan_leafs[b].size());
        g.n_nodes = (int)sched->plan_nodes[b].size();
        g.n_leafs = (int)sched->plan_leafs[b].size();
        g.nodes = sched->plan_nodes[b].data();
        g.leafs = sched->plan_leafs[b].data();
        g.visited = nullptr;
        sched->plan_graphs.push_back(g);
    }
    for (auto & s : splits) {
        ggml_cgraph g{};
        g.size = g.n_nodes = s.i_end - s.i_start;
        g.n_leafs = 0;
        g.nodes = gf->nodes + s.i_start;
        g.leafs = nullptr;
        g.visited = nullptr;
        sched->split_graphs.push_back(g);
    }
    return true;
}

static bool plan_empty(ggml_backend_sched_t sched, int b) {
    return sched->plan_nodes[b].empty() && sched->plan_leafs[b].empty();
}

bool ggml_backend_sched_reserve(ggml_backend_sched_t sched, ggml_cgraph * measure_graph) {
    sched_clear(sched);
    bool ok = sched_split(sched, measure_graph);
    for (int b = 0; ok && b < (int)sched->backends.size(); ++b) {
        if (!plan_empty(sched, b)) ok = ggml_gallocr_reserve(sched->galloc[b], &sched->plan_graphs[b]);
    }
    rewrites_undo(sched);
    sched_clear(sched);
    return ok;
}

bool ggml_backend_sched_alloc_graph(ggml_backend_sched_t sched, ggml_cgraph * gf) {
    sched_clear(sched);
    if (!sched_split(sched, gf)) {
        rewrites_undo(sched);
        sched_clear(sched);
        return false;
    }
    for (int b = 0; b < (int)sched->backends.size(); ++b) {
        if (plan_empty(sched, b)) continue;
        if (!ggml_gallocr_alloc_graph(sched->galloc[b], &sched->plan_graphs[b])) {
            GGML_LOG_ERROR("%s: failed to allocate the %s compute buffer\n", __func__,
                           ggml_backend_name(sched->backends[b]));
            rewrites_undo(sched);
            sched_clear(sched);
            return false;
        }
    }
    rewrites_undo(sched);
    static std::atomic<uint64_t> next_plan_id{0};
    for (auto & g : sched->split_graphs) g.plan_id = ++next_plan_id;
    sched->cur_graph = gf;
    sched->cur_n_nodes = gf->n_nodes;
    sched->is_alloc = true;
    GGML_LOG_DEBUG("%s: %d nodes, %zu splits, %d copies\n", __func__, gf->n_nodes, sched->splits.size(),
                   sched->n_copies);
    for (size_t b = 0; b < sched->backends.size(); ++b) {
        GGML_LOG_DEBUG("%s:   %s compute buffer: %zu bytes\n", __func__, ggml_backend_name(sched->backends[b]),
                       ggml_gallocr_get_buffer_size(sched->galloc[b]));
    }
    return true;
}

// Is gf still the graph the last ggml_backend_sched_alloc_graph prepared? (A graph rebuilt in the
// same memory has fresh tensors without data and without the redirected sources.)
static bool sched_graph_is_current(ggml_backend_sched_t sched, const ggml_cgraph * gf) {
    if (!sched->is_alloc || sched->cur_graph != gf || sched->cur_n_nodes != gf->n_nodes) return false;
    for (const auto & r : sched->rewrites) {
        if (r.node->src[r.j] != r.orig) return false;
    }
    for (int i = 0; i < gf->n_nodes; ++i) {
        if (!gf->nodes[i]->data && ggml_nelements(gf->nodes[i]) > 0) return false;
    }
    return true;
}

static ggml_status sched_compute_profiled(ggml_backend_sched_t sched, ggml_cgraph * gf);

ggml_status ggml_backend_sched_graph_compute(ggml_backend_sched_t sched, ggml_cgraph * gf) {
    const ggml_status st = ggml_backend_sched_graph_compute_async(sched, gf);
    if (st == GGML_STATUS_SUCCESS) ggml_backend_sched_synchronize(sched);
    return st;
}

void ggml_backend_sched_synchronize(ggml_backend_sched_t sched) {
    for (auto * b : sched->backends)
        ggml_backend_synchronize(b);
}

ggml_status ggml_backend_sched_graph_compute_async(ggml_backend_sched_t sched, ggml_cgraph * gf) {
    if (!sched_graph_is_current(sched, gf)) {
        if (!ggml_backend_sched_alloc_graph(sched, gf)) return GGML_STATUS_ALLOC_FAILED;
    }
    if (sched->profile) return sched_compute_profiled(sched, gf);
    rewrites_apply(sched);
    for (size_t si = 0; si < sched->splits.size(); ++si) {
        const auto & s = sched->splits[si];
        ggml_backend_t backend = sched->backends[s.backend_id];
        if (!s.inputs.empty()) ggml_backend_synchronize(backend);
        for (size_t k = 0; k < s.inputs.size(); ++k)
            copy_input(sched, backend, s.inputs[k], s.input_copies[k]);
        const ggml_status st = backend->iface.graph_compute(backend, &sched->split_graphs[si]);
        if (st != GGML_STATUS_SUCCESS) {
            GGML_LOG_ERROR("%s: split %zu on %s failed (%d)\n", __func__, si, ggml_backend_name(backend), (int)st);
            rewrites_undo(sched);
            return st;
        }
    }
    rewrites_undo(sched);
    return GGML_STATUS_SUCCESS;
}

// ---- profiling ---------------------------------------------------------------------------------------
static double now_us() {
    return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

struct sched_prof_split {
    ggml_backend_sched_t sched;
    int i_start;     // the split's first node in the graph
    int backend_id;
};

// a backend's record: nodes [i, i + n) of the split took us (kept raw: the records are filled in after the wall
// time is taken)
static void sched_prof_record(void * user, int i, int n, double us) {
    const auto & ps = *(const sched_prof_split *)user;
    ggml_profile_node r;
    r.node = ps.i_start + i;
    r.n_nodes = n;
    r.us = us;
    ps.sched->prof.nodes.push_back(std::move(r));
    ps.sched->prof_backend.push_back(ps.backend_id);
}

// name, op, shapes, types, backend and summed cost of each raw record of gf
static void sched_prof_fill(ggml_backend_sched_t sched, const ggml_cgraph * gf) {
    for (size_t i = 0; i < sched->prof.nodes.size(); ++i) {
        ggml_profile_node & r = sched->prof.nodes[i];
        r.backend = ggml_backend_name(sched->backends[sched->prof_backend[i]]);
        for (int k = r.node; k < r.node + r.n_nodes && k < gf->n_nodes; ++k) {
            const ggml_tensor * t = gf->nodes[k];
            if (k == r.node) {
                r.name = t->name;
                r.op = t->op;
                r.type = t->type;
                r.src0_type = t->src[0] ? t->src[0]->type : GGML_TYPE_COUNT;
                r.src1_type = t->src[1] ? t->src[1]->type : GGML_TYPE_COUNT;
                std::copy(t->ne, t->ne + GGML_MAX_DIMS, r.ne);
            }
            if (t->op == GGML_OP_NONE || ggml_is_view_op(t->op)) continue;
            const ggml_cost c = ggml_op_cost(t); // (input copies have their origin's shape and type)
            r.cost.bytes_read += c.bytes_read;
            r.cost.bytes_written += c.bytes_written;
            r.cost.flops += c.flops;
            if (c.peak != GGML_PEAK_F32 || r.label.empty()) r.cost.peak = c.peak;
            r.label += (r.label.empty() ? "" : "+") + std::string(ggml_op_symbol(t->op));
        }
    }
}

// As ggml_backend_sched_graph_compute, with every backend synchronised after its split and each split timed by
// its backend's graph_compute_profile (per node or fused group) or as a whole.
static ggml_status sched_compute_profiled(ggml_backend_sched_t sched, ggml_cgraph * gf) {
    ggml_profile & p = sched->prof;
    p = ggml_profile();
    p.nodes.reserve(gf->n_nodes);
    sched->prof_backend.clear();
    sched->has_prof = true;
    p.n_graph_nodes = gf->n_nodes;
    const double t0 = now_us();
    rewrites_apply(sched);
    ggml_status st = GGML_STATUS_SUCCESS;
    for (size_t si = 0; si < sched->splits.size() && st == GGML_STATUS_SUCCESS; ++si) {
        const auto & s = sched->splits[si];
        ggml_backend_t backend = sched->backends[s.backend_id];
        if (!s.inputs.empty()) {
            const double tc = now_us();
            ggml_backend_synchronize(backend);
            for (size_t k = 0; k < s.inputs.size(); ++k)
                copy_input(sched, backend, s.inputs[k], s.input_copies[k]);
            ggml_backend_synchronize(backend);
            p.copy_us += now_us() - tc;
        }
        sched_prof_split ps{sched, s.i_start, s.backend_id};
        ggml_cgraph * g = &sched->split_graphs[si];
        if (backend->iface.graph_compute_profile) {
            st = backend->iface.graph_compute_profile(backend, g, sched_prof_record, &ps);
        } else {
            const double ts = now_us();
            st = backend->iface.graph_compute(backend, g);
            ggml_backend_synchronize(backend);
            sched_prof_record(&ps, 0, g->n_nodes, now_us() - ts);
        }
        if (st != GGML_STATUS_SUCCESS)
            GGML_LOG_ERROR("%s: split %zu on %s failed (%d)\n", __func__, si, ggml_backend_name(backend), (int)st);
    }
    rewrites_undo(sched);
    for (auto * b : sched->backends)
        ggml_backend_synchronize(b);
    p.wall_us = now_us() - t0;
    sched_prof_fill(sched, gf);
    return st;
}

void ggml_backend_sched_set_profile(ggml_backend_sched_t sched, bool on) { sched->profile = on; }

const ggml_profile * ggml_backend_sched_get_profile(ggml_backend_sched_t sched) {
    return sched->has_prof ? &sched->prof : nullptr;
}

int ggml_backend_sched_get_n_splits(ggml_backend_sched_t sched) { return (int)sched->splits.size(); }
int ggml_backend_sched_get_n_copies(ggml_backend_sched_t sched) { return sched->n_copies; }

size_t ggml_backend_sched_get_buffer_size(ggml_backend_sched_t sched, ggml_backend_t backend) {
    for (size_t i = 0; i < sched->backends.size(); ++i) {
        if (sched->backends[i] == backend) return ggml_gallocr_get_buffer_size(sched->galloc[i]);
    }
    return 0;
}

void ggml_backend_sched_set_tensor_backend(ggml_backend_sched_t sched, ggml_tensor * t, ggml_backend_t backend) {
    for (size_t i = 0; i < sched->backends.size(); ++i) {
        if (sched->backends[i] == backend) {
            sched->user_backend[t] = (int)i;
            return;
        }
    }
    GGML_ABORT("%s: backend %s is not part of the scheduler", __func__, ggml_backend_name(backend));
}

ggml_backend_t ggml_backend_sched_get_tensor_backend(ggml_backend_sched_t sched, const ggml_tensor * t) {
    auto it = sched->assign.find(t);
    if (it != sched->assign.end() && it->second >= 0) return sched->backends[it->second];
    auto iu = sched->user_backend.find(t);
    return iu != sched->user_backend.end() ? sched->backends[iu->second] : nullptr;
}

ggml_backend_t ggml_backend_sched_get_buffer_backend(ggml_backend_sched_t sched, ggml_backend_buffer_t buf) {
    const int id = buffer_backend_id(sched, buf);
    return id >= 0 ? sched->backends[id] : nullptr;
}

// ---- introspection for the graph dump (ggml-backend-impl.h) ---------------------------------
int ggml_backend_sched_get_n_backends(ggml_backend_sched_t sched) { return (int)sched->backends.size(); }
ggml_backend_t ggml_backend_sched_get_backend(ggml_backend_sched_t sched, int i) { return sched->backends.at(i); }
ggml_gallocr_t ggml_backend_sched_get_gallocr(ggml_backend_sched_t sched, int backend_id) {
    return sched->galloc.at(backend_id);
}
const std::vector<ggml_sched_split_info> & ggml_backend_sched_get_splits(ggml_backend_sched_t sched) {
    return sched->splits;
}
int ggml_backend_sched_get_node_split(ggml_backend_sched_t sched, const ggml_tensor * t) {
    auto it = sched->node_split.find(t);
    return it == sched->node_split.end() ? -1 : it->second;
}
int ggml_backend_sched_get_tensor_backend_id(ggml_backend_sched_t sched, const ggml_tensor * t) {
    auto it = sched->assign.find(t);
    if (it != sched->assign.end()) return it->second;
    return mem_backend_id(sched, t);
}
ggml_tensor * ggml_backend_sched_get_node_src(ggml_backend_sched_t sched, const ggml_tensor * node, int j) {
    for (const auto & r : sched->rewrites) {
        if (r.node == node && r.j == j) return r.copy;
    }
    return node->src[j];
}
ggml_tensor * ggml_backend_sched_get_copy_origin(ggml_backend_sched_t sched, const ggml_tensor * t) {
    auto it = sched->copy_origin.find(t);
    return it == sched->copy_origin.end() ? nullptr : it->second;
}
