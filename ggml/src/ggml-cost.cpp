// ggml-cost.cpp - see ggml-cost.h: the cost model (one function per op), the roofline time, and the text
// reports of a profile.
#include "ggml-cost.h"

#include "ggml-impl.h"

#include <algorithm>
#include <cmath>
#include <cstdarg>
#include <cstdio>
#include <map>

static_assert(GGML_OP_COUNT == 24, "a new op needs its cost here (ggml_op_cost)");

const char * ggml_peak_class_name(ggml_peak_class c) {
    switch (c) {
        case GGML_PEAK_F16:
            return "f16";
        case GGML_PEAK_INT8:
            return "int8";
        default:
            return "f32";
    }
}

double ggml_cost_tensor_bytes(const ggml_tensor * t) {
    if (!t) return 0;
    const double row = (double)t->ne[0] * (double)ggml_type_size(t->type) / (double)ggml_blck_size(t->type);
    return row * (double)t->ne[1] * (double)t->ne[2] * (double)t->ne[3];
}

namespace {

double n_elements(const ggml_tensor * t) { return (double)ggml_nelements(t); }

// bytes of n rows of ne0 elements of type
double rows_bytes(ggml_type type, int64_t ne0, double n_rows) {
    return (double)ne0 * (double)ggml_type_size(type) / (double)ggml_blck_size(type) * n_rows;
}

ggml_peak_class peak_of(ggml_type weight) {
    if (weight == GGML_TYPE_F16) return GGML_PEAK_F16;
    if (ggml_is_quantized(weight)) return GGML_PEAK_INT8;
    return GGML_PEAK_F32;
}

// elementwise and row ops: every source read whole (a broadcast source once), the result written, `per`
// FLOPs per result element
ggml_cost cost_map(const ggml_tensor * t, double per) {
    ggml_cost c;
    for (int j = 0; j < GGML_MAX_SRC; ++j)
        c.bytes_read += ggml_cost_tensor_bytes(t->src[j]);
    c.bytes_written = ggml_cost_tensor_bytes(t);
    c.flops = per * n_elements(t);
    return c;
}

// a [K, M, A2, A3] x b [K, N, B2, B3] -> [M, N, B2, B3]: each a matrix is read once however many b batches
// share it (broadcast), b once
ggml_cost cost_mul_mat(const ggml_tensor * t) {
    const ggml_tensor * a = t->src[0];
    const ggml_tensor * b = t->src[1];
    ggml_cost c;
    c.flops = 2.0 * (double)a->ne[0] * (double)a->ne[1] * (double)b->ne[1] * (double)b->ne[2] * (double)b->ne[3];
    c.bytes_read = ggml_cost_tensor_bytes(a) + ggml_cost_tensor_bytes(b);
    c.bytes_written = ggml_cost_tensor_bytes(t);
    c.peak = peak_of(a->type);
    return c;
}

// q [D, n_q, n_head, 1], k [D, n_kv, n_head_kv], v [Dv, n_kv, n_head_kv], mask [n_kv, >= n_q]
ggml_cost cost_flash_attn(const ggml_tensor * t) {
    const ggml_tensor * q = t->src[0];
    const ggml_tensor * k = t->src[1];
    const ggml_tensor * v = t->src[2];
    const ggml_tensor * mask = t->src[3];
    const double n_q = (double)q->ne[1], n_head = (double)q->ne[2] * (double)q->ne[3], n_kv = (double)k->ne[1];
    ggml_cost c;
    c.flops = 2.0 * (double)(q->ne[0] + v->ne[0]) * n_kv * n_q * n_head; // q.k and p.v
    c.bytes_read = ggml_cost_tensor_bytes(q) + ggml_cost_tensor_bytes(k) + ggml_cost_tensor_bytes(v);
    if (mask) c.bytes_read += rows_bytes(mask->type, mask->ne[0], std::min<double>((double)mask->ne[1], n_q));
    c.bytes_written = ggml_cost_tensor_bytes(t);
    c.peak = peak_of(k->type);
    return c;
}

// softmax over rows of a with an optional mask [ne0, >= ne1] broadcast over dims 2, 3 (read once)
ggml_cost cost_soft_max(const ggml_tensor * t) {
    const ggml_tensor * a = t->src[0];
    const ggml_tensor * mask = t->src[1];
    ggml_cost c;
    c.bytes_read = ggml_cost_tensor_bytes(a);
    if (mask) c.bytes_read += rows_bytes(mask->type, mask->ne[0], (double)a->ne[1] * mask->ne[2] * mask->ne[3]);
    c.bytes_written = ggml_cost_tensor_bytes(t);
    c.flops = 5.0 * n_elements(t); // scale, + mask, - max, exp, / sum
    return c;
}

// rows of src0 picked by the i32 indices src1
ggml_cost cost_get_rows(const ggml_tensor * t) {
    const ggml_tensor * a = t->src[0];
    const ggml_tensor * idx = t->src[1];
    ggml_cost c;
    c.bytes_read = rows_bytes(a->type, a->ne[0], n_elements(idx)) + ggml_cost_tensor_bytes(idx);
    c.bytes_written = ggml_cost_tensor_bytes(t);
    return c;
}

// rows of src1 written into src0 (the result views src0) at the i32 rows src2, in src0's type
ggml_cost cost_set_rows(const ggml_tensor * t) {
    const ggml_tensor * dst = t->src[0];
    const ggml_tensor * b = t->src[1];
    ggml_cost c;
    c.bytes_read = ggml_cost_tensor_bytes(b) + ggml_cost_tensor_bytes(t->src[2]);
    c.bytes_written = rows_bytes(dst->type, b->ne[0], (double)ggml_nrows(b));
    return c;
}

// src0 converted into the result's type (CPY: the result views src1, which is only written)
ggml_cost cost_copy(const ggml_tensor * t) {
    ggml_cost c;
    c.bytes_read = ggml_cost_tensor_bytes(t->src[0]);
    c.bytes_written = rows_bytes(t->type, t->src[0]->ne[0], (double)ggml_nrows(t->src[0]));
    return c;
}

} // namespace

ggml_cost ggml_op_cost(const ggml_tensor * t) {
    switch (t->op) {
        case GGML_OP_NONE:
        case GGML_OP_RESHAPE:
        case GGML_OP_VIEW:
        case GGML_OP_PERMUTE:
        case GGML_OP_TRANSPOSE:
            return ggml_cost();
        case GGML_OP_DUP:
        case GGML_OP_CONT:
        case GGML_OP_CPY:
            return cost_copy(t);
        case GGML_OP_ADD:
        case GGML_OP_MUL:
        case GGML_OP_SCALE:
            return cost_map(t, 1);
        case GGML_OP_DIAG_MASK_INF:
            return cost_map(t, 0);
        case GGML_OP_ALL_REDUCE: // the local input and result; what crosses the link is not counted
            return cost_map(t, 1);
        case GGML_OP_KQ_MASK: // (cells and tokens read whole: each thread's part is cached)
            return cost_map(t, 2);
        case GGML_OP_RMS_NORM:
            return cost_map(t, 3); // square-accumulate (2), scale (1)
        case GGML_OP_ROPE:
            return cost_map(t, 3); // per pair: 4 mul + 2 add
        case GGML_OP_SILU:
            return cost_map(t, 4); // exp, add, div, (mul)
        case GGML_OP_SWIGLU:
            return cost_map(t, 5); // silu(a) * b
        case GGML_OP_ARGMAX: {
            ggml_cost c = cost_map(t, 0);
            c.flops = n_elements(t->src[0]); // one compare per input element
            return c;
        }
        case GGML_OP_SOFT_MAX:
            return cost_soft_max(t);
        case GGML_OP_GET_ROWS:
            return cost_get_rows(t);
        case GGML_OP_SET_ROWS:
            return cost_set_rows(t);
        case GGML_OP_MUL_MAT:
            return cost_mul_mat(t);
        case GGML_OP_FLASH_ATTN_EXT:
            return cost_flash_attn(t);
        case GGML_OP_COUNT:
            break;
    }
    GGML_ABORT("ggml_op_cost: op %d has no cost model", (int)t->op);
}

double ggml_roofline_us(const ggml_roofline & r, const ggml_cost & c) {
    double us = 0;
    if (r.bw_gbs > 0) us = std::max(us, c.bytes() / (r.bw_gbs * 1e3));
    const double peak = r.peak_tflops[c.peak];
    if (peak > 0) us = std::max(us, c.flops / (peak * 1e6));
    return us;
}

// ---- profile ---------------------------------------------------------------------------------------------
ggml_type ggml_profile_node::main_type() const {
    if (op == GGML_OP_MUL_MAT && src0_type != GGML_TYPE_COUNT) return src0_type;
    if (op == GGML_OP_FLASH_ATTN_EXT && src1_type != GGML_TYPE_COUNT) return src1_type;
    return type;
}

double ggml_profile::kernel_us() const {
    double s = 0;
    for (const auto & n : nodes)
        s += n.us;
    return s;
}

void ggml_profile_set_roofline(ggml_profile & p, const std::string & backend, const ggml_roofline & r) {
    for (auto & n : p.nodes) {
        if (n.backend == backend) n.roof_us = ggml_roofline_us(r, n.cost);
    }
    for (auto & br : p.rooflines) {
        if (br.first == backend) {
            br.second = r;
            return;
        }
    }
    p.rooflines.emplace_back(backend, r);
}

const ggml_roofline * ggml_profile_get_roofline(const ggml_profile & p, const std::string & backend) {
    for (const auto & br : p.rooflines) {
        if (br.first == backend) return &br.second;
    }
    return nullptr;
}

static double median_of(std::vector<double> v) {
    if (v.empty()) return 0;
    std::sort(v.begin(), v.end());
    const size_t n = v.size();
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

ggml_profile ggml_profile_median(const std::vector<ggml_profile> & runs) {
    if (runs.empty()) return ggml_profile();
    ggml_profile m = runs[0];
    auto same = [&](const ggml_profile & r) {
        if (r.nodes.size() != m.nodes.size()) return false;
        for (size_t i = 0; i < r.nodes.size(); ++i) {
            if (r.nodes[i].node != m.nodes[i].node || r.nodes[i].n_nodes != m.nodes[i].n_nodes) return false;
        }
        return true;
    };
    std::vector<const ggml_profile *> ok;
    for (const auto & r : runs) {
        if (same(r)) ok.push_back(&r);
    }
    std::vector<double> v;
    for (size_t i = 0; i < m.nodes.size(); ++i) {
        v.clear();
        for (const auto * r : ok)
            v.push_back(r->nodes[i].us);
        m.nodes[i].us = median_of(v);
    }
    v.clear();
    for (const auto * r : ok)
        v.push_back(r->wall_us);
    m.wall_us = median_of(v);
    v.clear();
    for (const auto * r : ok)
        v.push_back(r->copy_us);
    m.copy_us = median_of(v);
    return m;
}

// ---- text reports ------------------------------------------------------------------------------------------
namespace {

std::string fmt(const char * f, ...) __attribute__((format(printf, 1, 2)));
std::string fmt(const char * f, ...) {
    char buf[512];
    va_list ap;
    va_start(ap, f);
    std::vsnprintf(buf, sizeof(buf), f, ap);
    va_end(ap);
    return buf;
}

std::string shape_str(const int64_t * ne) {
    int n = GGML_MAX_DIMS;
    while (n > 1 && ne[n - 1] == 1)
        --n;
    std::string s = "[";
    for (int i = 0; i < n; ++i)
        s += (i ? "," : "") + std::to_string(ne[i]);
    return s + "]";
}

// "mul_mat q8_0", "flash_attn_ext f16", "rms_norm+mul"
std::string op_key(const ggml_profile_node & n) {
    std::string k = n.label;
    if (n.op == GGML_OP_MUL_MAT || n.op == GGML_OP_FLASH_ATTN_EXT)
        k += std::string(" ") + ggml_type_name(n.main_type());
    return k;
}

std::string pct_or_dash(double pct) { return pct > 0 ? fmt("%.1f", pct) : std::string("-"); }

} // namespace

std::string ggml_profile_table(const ggml_profile & p, int top_n) {
    std::vector<const ggml_profile_node *> rows;
    for (const auto & n : p.nodes)
        rows.push_back(&n);
    std::stable_sort(rows.begin(), rows.end(), [](auto * a, auto * b) { return a->us > b->us; });
    if (top_n > 0 && (int)rows.size() > top_n) rows.resize(top_n);
    const double ref = p.ref_us();
    std::string o = fmt("%-28s %-20s %-16s %-5s %-6s %9s %6s %8s %8s %6s\n", "op", "name", "shape", "type", "backend",
                        "us", "%step", "GB/s", "TFLOP/s", "%roof");
    for (const auto * n : rows) {
        o += fmt("%-28.28s %-20.20s %-16.16s %-5s %-6.6s %9.2f %6.1f %8.1f %8.3f %6s\n", n->label.c_str(),
                 n->name.c_str(), shape_str(n->ne).c_str(), ggml_type_name(n->main_type()), n->backend.c_str(), n->us,
                 ref > 0 ? 100.0 * n->us / ref : 0.0, n->gbs(), n->tflops(), pct_or_dash(n->roofline_pct()).c_str());
    }
    return o;
}

std::string ggml_profile_op_totals(const ggml_profile & p) {
    struct total {
        double us = 0, roof_us = 0, bytes = 0, flops = 0;
        int count = 0;
        bool roof_known = true;
    };
    std::map<std::string, total> by;
    for (const auto & n : p.nodes) {
        total & t = by[op_key(n) + "\t" + n.backend];
        t.us += n.us;
        t.roof_us += n.roof_us;
        t.roof_known = t.roof_known && n.roof_us > 0;
        t.bytes += n.cost.bytes();
        t.flops += n.cost.flops;
        t.count++;
    }
    std::vector<std::pair<std::string, total>> rows(by.begin(), by.end());
    std::stable_sort(rows.begin(), rows.end(), [](auto & a, auto & b) { return a.second.us > b.second.us; });
    const double ref = p.ref_us();
    std::string o = fmt("%-34s %-6s %5s %10s %6s %10s %8s %8s %6s\n", "op (totals)", "backend", "count", "us", "%step",
                        "us/call", "GB/s", "TFLOP/s", "%roof");
    for (const auto & [key, t] : rows) {
        const size_t tab = key.find('\t');
        o += fmt("%-34.34s %-6.6s %5d %10.2f %6.1f %10.2f %8.1f %8.3f %6s\n", key.substr(0, tab).c_str(),
                 key.substr(tab + 1).c_str(), t.count, t.us, ref > 0 ? 100.0 * t.us / ref : 0.0, t.us / t.count,
                 t.us > 0 ? t.bytes / t.us * 1e-3 : 0.0, t.us > 0 ? t.flops / t.us * 1e-6 : 0.0,
                 pct_or_dash(t.roof_known && t.us > 0 ? 100.0 * t.roof_us / t.us : 0).c_str());
    }
    return o;
}

std::string ggml_profile_summary(const ggml_profile & p) {
    const double k = p.kernel_us(), ref = p.ref_us();
    double roof = 0;
    bool roof_known = !p.nodes.empty();
    for (const auto & n : p.nodes) {
        roof += n.roof_us;
        roof_known = roof_known && n.roof_us > 0;
    }
    std::string o;
    if (p.step_us > 0) o += fmt("step wall time:           %10.2f us (%s)\n", p.step_us, p.step_what.c_str());
    o += fmt("profiled compute wall:    %10.2f us (%d graph nodes, %zu timed records)\n", p.wall_us, p.n_graph_nodes,
             p.nodes.size());
    o += fmt("kernels (sum of records): %10.2f us (%.1f%% of the step)\n", k, ref > 0 ? 100.0 * k / ref : 0.0);
    if (p.copy_us > 0) o += fmt("copies between backends:  %10.2f us (within the profiled wall)\n", p.copy_us);
    o += fmt("outside kernels:          %10.2f us (%.1f%%: launch gaps, host work, copies between backends)\n", ref - k,
             ref > 0 ? 100.0 * (ref - k) / ref : 0.0);
    if (roof_known) {
        o += fmt("kernels at the roofline:  %10.2f us (%.1f%% of the kernels' time, %.1f%% of the step)\n", roof,
                 k > 0 ? 100.0 * roof / k : 0.0, ref > 0 ? 100.0 * roof / ref : 0.0);
    }
    for (const auto & [backend, r] : p.rooflines) {
        o += fmt("roofline %s: %.1f GB/s, peak TFLOP/s f32 %.3f, f16 %.3f, int8 %.3f (%s)\n", backend.c_str(), r.bw_gbs,
                 r.peak_tflops[GGML_PEAK_F32], r.peak_tflops[GGML_PEAK_F16], r.peak_tflops[GGML_PEAK_INT8],
                 r.source.c_str());
    }
    return o;
}
