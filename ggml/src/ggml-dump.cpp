// ggml-dump.cpp - graph dumps: DOT (Graphviz) and JSON, from one list of tensor records.
#include "ggml-dump.h"

#include "ggml-backend-impl.h"
#include "ggml-impl.h"

#include <nlohmann/json.hpp>

using json = nlohmann::ordered_json;

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <sstream>
#include <unordered_map>
#include <vector>

namespace {

struct tensor_rec {
    const ggml_tensor * t = nullptr;
    std::string id; // "n3" node, "l2" leaf, "x0" tensor outside the graph (e.g. an input copy)
    int index = -1;
    std::string kind; // node | weight | input | constant | copy
    std::string backend;
    int backend_id = -1;
    int split = -1;
    std::string buffer; // buffer type name + usage, "" if none
    long long offset = -1;
    size_t size = 0;
    bool inplace = false;
};

struct dump_ctx {
    const ggml_cgraph * gf;
    const ggml_dump_info * info;
    std::vector<tensor_rec> recs;
    std::unordered_map<const ggml_tensor *, size_t> by_tensor;
    std::vector<const ggml_backend_buffer *> buffers;
    std::vector<int> prof_rec; // per graph node: its profile record, -1: none
    double prof_max_us = 0;    // the longest record
};

const ggml_profile * profile_of(const dump_ctx & d) { return d.info ? d.info->profile : nullptr; }

// the record of graph node i (a fused group's record for each of its nodes), or nullptr
const ggml_profile_node * node_prof(const dump_ctx & d, int i) {
    if (i < 0 || i >= (int)d.prof_rec.size() || d.prof_rec[i] < 0) return nullptr;
    return &profile_of(d)->nodes[d.prof_rec[i]];
}

void map_profile(dump_ctx & d) {
    const ggml_profile * p = profile_of(d);
    if (!p) return;
    d.prof_rec.assign(d.gf->n_nodes, -1);
    for (size_t r = 0; r < p->nodes.size(); ++r) {
        const ggml_profile_node & n = p->nodes[r];
        for (int k = std::max(n.node, 0); k < n.node + n.n_nodes && k < d.gf->n_nodes; ++k)
            d.prof_rec[k] = (int)r;
        d.prof_max_us = std::max(d.prof_max_us, n.us);
    }
}

const char * usage_name(ggml_backend_buffer_usage u) {
    switch (u) {
        case GGML_BACKEND_BUFFER_USAGE_WEIGHTS:
            return "weights";
        case GGML_BACKEND_BUFFER_USAGE_COMPUTE:
            return "compute";
        default:
            return "any";
    }
}

std::string buffer_name(const ggml_backend_buffer * b) {
    return std::string(ggml_backend_buft_name(b->buft)) + " " + usage_name(b->usage);
}

ggml_backend_buffer_t tensor_buffer(const ggml_tensor * t) {
    return t->view_src && t->view_src->buffer ? t->view_src->buffer : t->buffer;
}

void fill_memory(dump_ctx & d, tensor_rec & r) {
    const ggml_tensor * t = r.t;
    ggml_gallocr_t ga = d.info ? d.info->galloc : nullptr;
    ggml_backend_sched_t sched = d.info ? d.info->sched : nullptr;
    if (sched) {
        r.backend_id = ggml_backend_sched_get_tensor_backend_id(sched, t);
        if (r.backend_id >= 0) {
            r.backend = ggml_backend_name(ggml_backend_sched_get_backend(sched, r.backend_id));
            ga = ggml_backend_sched_get_gallocr(sched, r.backend_id);
        }
        r.split = ggml_backend_sched_get_node_split(sched, t);
    }
    ggml_backend_buffer_t buf = tensor_buffer(t);
    if (buf && t->data) {
        r.buffer = buffer_name(buf);
        r.offset = (long long)((uintptr_t)t->data - (uintptr_t)ggml_backend_buffer_get_base(buf));
        if (std::find(d.buffers.begin(), d.buffers.end(), buf) == d.buffers.end()) d.buffers.push_back(buf);
        if (r.backend.empty()) r.backend = ggml_backend_buft_name(buf->buft);
    } else if (ga) {
        const size_t off = ggml_gallocr_get_offset(ga, t);
        if (off != SIZE_MAX) {
            r.offset = (long long)off;
            r.buffer = "planned";
        }
    } else if (t->data) {
        r.buffer = "host";
    }
    if (ga) r.inplace = ggml_gallocr_is_inplace(ga, t);
    r.size = ggml_nbytes(t);
}

// the tensor node reads as src[j]: with a scheduler, its input copy when there is one
const ggml_tensor * node_src(const dump_ctx & d, const ggml_tensor * node, int j) {
    if (d.info && d.info->sched) return ggml_backend_sched_get_node_src(d.info->sched, node, j);
    return node->src[j];
}

std::string make_id(char prefix, int i) {
    char buf[24];
    std::snprintf(buf, sizeof(buf), "%c%d", prefix, i);
    return buf;
}

void collect(dump_ctx & d) {
    auto add = [&](const ggml_tensor * t, const std::string & id, int index, const std::string & kind) {
        tensor_rec r;
        r.t = t;
        r.id = id;
        r.index = index;
        r.kind = kind;
        fill_memory(d, r);
        d.by_tensor[t] = d.recs.size();
        d.recs.push_back(r);
    };
    auto leaf_kind = [&](const ggml_tensor * t) -> std::string {
        if (d.info && d.info->sched && ggml_backend_sched_get_copy_origin(d.info->sched, t)) return "copy";
        const ggml_backend_buffer * b = tensor_buffer(t);
        if ((t->flags & GGML_TENSOR_FLAG_PARAM) || (b && b->usage == GGML_BACKEND_BUFFER_USAGE_WEIGHTS))
            return "weight";
        if (t->flags & GGML_TENSOR_FLAG_INPUT) return "input";
        return (t->data || b) ? "constant" : "input";
    };
    for (int i = 0; i < d.gf->n_nodes; ++i)
        add(d.gf->nodes[i], make_id('n', i), i, "node");
    for (int i = 0; i < d.gf->n_leafs; ++i) {
        if (!d.by_tensor.count(d.gf->leafs[i])) add(d.gf->leafs[i], make_id('l', i), i, leaf_kind(d.gf->leafs[i]));
    }
    int n_extra = 0;
    for (int i = 0; i < d.gf->n_nodes; ++i) {
        for (int j = 0; j < GGML_MAX_SRC; ++j) {
            const ggml_tensor * s = node_src(d, d.gf->nodes[i], j);
            if (s && !d.by_tensor.count(s)) add(s, make_id('x', n_extra), n_extra, leaf_kind(s)), n_extra++;
        }
    }
    // origins of input copies that are not in the graph (rare) are added too, so edges resolve
    if (d.info && d.info->sched) {
        for (const auto & s : ggml_backend_sched_get_splits(d.info->sched)) {
            for (const ggml_tensor * o : s.inputs) {
                if (!d.by_tensor.count(o)) add(o, make_id('x', n_extra), n_extra, leaf_kind(o)), n_extra++;
            }
        }
    }
}

// white (no time) to red (the longest record), on a square-root scale (a step's nodes span orders of magnitude)
std::string heat_color(double share) {
    const int gb = (int)std::lround(255.0 * (1.0 - std::sqrt(std::clamp(share, 0.0, 1.0))));
    char buf[16];
    std::snprintf(buf, sizeof(buf), "#ff%02x%02x", gb, gb);
    return buf;
}

std::string dims(const int64_t * v) {
    std::string s = "[";
    for (int i = 0; i < GGML_MAX_DIMS; ++i)
        s += (i ? ", " : "") + std::to_string(v[i]);
    return s + "]";
}
std::string dims(const size_t * v) {
    std::string s = "[";
    for (int i = 0; i < GGML_MAX_DIMS; ++i)
        s += (i ? ", " : "") + std::to_string(v[i]);
    return s + "]";
}

std::string dot_escape(const std::string & s) {
    std::string o;
    for (char c : s) {
        if (c == '"' || c == '\\') o += '\\';
        if (c == '\n') {
            o += "\\n";
            continue;
        }
        if ((unsigned char)c < 0x20) continue;
        o += c;
    }
    return o;
}

json tensor_json(const dump_ctx & d, const tensor_rec & r) {
    const ggml_tensor * t = r.t;
    json j;
    j["id"] = r.id;
    j["index"] = r.index;
    j["name"] = t->name;
    j["op"] = ggml_op_symbol(t->op);
    j["kind"] = r.kind;
    j["type"] = ggml_type_name(t->type);
    j["ne"] = std::vector<int64_t>(t->ne, t->ne + GGML_MAX_DIMS);
    j["nb"] = std::vector<uint64_t>(t->nb, t->nb + GGML_MAX_DIMS);
    j["contiguous"] = ggml_is_contiguous(t);
    j["view"] = t->view_src != nullptr;
    if (t->view_src) {
        auto it = d.by_tensor.find(t->view_src);
        j["view_src"] = it != d.by_tensor.end() ? d.recs[it->second].id : std::string(t->view_src->name);
        j["view_offs"] = t->view_offs;
    }
    j["inplace"] = r.inplace;
    j["flags"] = {{"input", (t->flags & GGML_TENSOR_FLAG_INPUT) != 0},
                  {"output", (t->flags & GGML_TENSOR_FLAG_OUTPUT) != 0},
                  {"param", (t->flags & GGML_TENSOR_FLAG_PARAM) != 0}};
    j["backend"] = r.backend;
    j["split"] = r.split;
    j["buffer"] = r.buffer;
    j["offset"] = r.offset;
    j["size"] = r.size;
    json srcs = json::array();
    for (int k = 0; k < GGML_MAX_SRC; ++k) {
        const ggml_tensor * s = node_src(d, t, k);
        if (!s) continue;
        auto it = d.by_tensor.find(s);
        srcs.push_back(it != d.by_tensor.end() ? d.recs[it->second].id : std::string("?"));
    }
    j["src"] = srcs;
    if (profile_of(d) && r.kind == "node") {
        const ggml_profile_node * p = node_prof(d, r.index);
        const bool first = p && p->node == r.index;
        if (p && !first) j["fused_into"] = make_id('n', p->node);
        j["us"] = first ? json(p->us) : json(nullptr);
        j["gbs"] = first ? json(p->gbs()) : json(nullptr);
        j["tflops"] = first ? json(p->tflops()) : json(nullptr);
        j["roofline_pct"] = first && p->roof_us > 0 ? json(p->roofline_pct()) : json(nullptr);
        j["bytes"] = first ? json(p->cost.bytes()) : json(nullptr);
        j["flops"] = first ? json(p->cost.flops) : json(nullptr);
    }
    return j;
}

} // namespace

std::string ggml_graph_dump_json(const ggml_cgraph * gf, const ggml_dump_info * info) {
    dump_ctx d{gf, info, {}, {}, {}, {}, 0};
    collect(d);
    map_profile(d);
    json j;
    j["title"] = info && info->title ? info->title : "";
    j["n_nodes"] = gf->n_nodes;
    j["n_leafs"] = gf->n_leafs;
    j["nodes"] = json::array();
    j["leafs"] = json::array();
    j["edges"] = json::array();
    for (const auto & r : d.recs)
        (r.kind == "node" ? j["nodes"] : j["leafs"]).push_back(tensor_json(d, r));
    for (int i = 0; i < gf->n_nodes; ++i) {
        for (int k = 0; k < GGML_MAX_SRC; ++k) {
            const ggml_tensor * s = node_src(d, gf->nodes[i], k);
            if (s) j["edges"].push_back({{"from", d.recs[d.by_tensor.at(s)].id}, {"to", make_id('n', i)}, {"slot", k}});
        }
    }
    j["buffers"] = json::array();
    for (const ggml_backend_buffer * b : d.buffers) {
        j["buffers"].push_back({{"name", buffer_name(b)},
                                {"buft", ggml_backend_buft_name(b->buft)},
                                {"usage", usage_name(b->usage)},
                                {"size", b->size},
                                {"host", ggml_backend_buft_is_host(b->buft)}});
    }
    j["splits"] = json::array();
    int n_splits = 1;
    if (info && info->sched) {
        const auto & splits = ggml_backend_sched_get_splits(info->sched);
        n_splits = (int)splits.size();
        for (size_t si = 0; si < splits.size(); ++si) {
            const auto & s = splits[si];
            json inputs = json::array();
            for (size_t k = 0; k < s.inputs.size(); ++k) {
                const std::string from = d.recs[d.by_tensor.at(s.inputs[k])].id;
                auto ic = d.by_tensor.find(s.input_copies[k]);
                const std::string copy = ic != d.by_tensor.end() ? d.recs[ic->second].id : s.input_copies[k]->name;
                inputs.push_back({{"from", from}, {"copy", copy}});
                if (ic != d.by_tensor.end()) j["edges"].push_back({{"from", from}, {"to", copy}, {"slot", -1}});
            }
            j["splits"].push_back(
                {{"index", si},
                 {"backend", ggml_backend_name(ggml_backend_sched_get_backend(info->sched, s.backend_id))},
                 {"i_start", s.i_start},
                 {"i_end", s.i_end},
                 {"inputs", inputs}});
        }
    }
    j["n_splits"] = n_splits;
    if (const ggml_profile * p = profile_of(d)) {
        json roofs = json::array();
        for (const auto & [backend, r] : p->rooflines) {
            roofs.push_back({{"backend", backend},
                             {"bw_gbs", r.bw_gbs},
                             {"peak_tflops",
                              {{"f32", r.peak_tflops[GGML_PEAK_F32]},
                               {"f16", r.peak_tflops[GGML_PEAK_F16]},
                               {"int8", r.peak_tflops[GGML_PEAK_INT8]}}},
                             {"source", r.source}});
        }
        j["profile"] = {{"wall_us", p->wall_us},       {"step_us", p->step_us},
                        {"step_what", p->step_what},   {"kernels_us", p->kernel_us()},
                        {"copy_us", p->copy_us},       {"outside_us", p->ref_us() - p->kernel_us()},
                        {"n_records", p->nodes.size()}, {"rooflines", roofs}};
    }
    if (info && info->galloc) {
        j["alloc"] = {{"planned_size", ggml_gallocr_get_buffer_size(info->galloc)},
                      {"naive_size",
                       ggml_gallocr_naive_size(const_cast<ggml_cgraph *>(gf),
                                               ggml_backend_buffer_get_type(ggml_gallocr_get_buffer(info->galloc)))}};
    }
    return j.dump(1);
}

std::string ggml_graph_dump_dot(const ggml_cgraph * gf, const ggml_dump_info * info) {
    dump_ctx d{gf, info, {}, {}, {}, {}, 0};
    collect(d);
    map_profile(d);
    std::ostringstream o;
    o << "digraph ggml_graph {\n  rankdir=TB;\n  node [fontname=\"monospace\", fontsize=10];\n"
      << "  edge [fontname=\"monospace\", fontsize=8];\n";
    if (info && info->title) o << "  label=\"" << dot_escape(info->title) << "\";\n  labelloc=t;\n";
    auto node_line = [&](const tensor_rec & r) {
        const ggml_tensor * t = r.t;
        std::string label;
        if (r.kind == "node")
            label = "#" + std::to_string(r.index) + " " + ggml_op_symbol(t->op);
        else
            label = r.kind;
        if (t->name[0]) label += "\n" + std::string(t->name);
        label += "\n" + std::string(ggml_type_name(t->type)) + " " + dims(t->ne);
        label += "\nnb " + dims(t->nb);
        if (!ggml_is_contiguous(t)) label += " (non-contig)";
        if (!r.backend.empty()) label += "\n" + r.backend;
        if (r.offset >= 0) label += " @" + std::to_string(r.offset) + " +" + std::to_string(r.size) + "B";
        if (r.inplace) label += "\nin-place";
        if (t->view_src) label += "\nview of " + std::string(t->view_src->name) + " +" + std::to_string(t->view_offs);
        if (t->flags & GGML_TENSOR_FLAG_OUTPUT) label += "\nOUTPUT";
        const ggml_profile_node * prof = r.kind == "node" ? node_prof(d, r.index) : nullptr;
        if (prof && prof->node == r.index) {
            const double ref = profile_of(d)->ref_us();
            char buf[96];
            std::snprintf(buf, sizeof(buf), "\n%.1f us (%.1f%%)", prof->us, ref > 0 ? 100.0 * prof->us / ref : 0.0);
            label += buf;
            if (prof->roof_us > 0) {
                std::snprintf(buf, sizeof(buf), ", %.0f%% of roofline", prof->roofline_pct());
                label += buf;
            }
            if (prof->n_nodes > 1) label += "\nfused: " + prof->label;
        } else if (prof) {
            label += "\nin #" + std::to_string(prof->node) + "'s group";
        }
        std::string style;
        if (r.kind == "weight")
            style = "shape=box, style=filled, fillcolor=\"#f5deb3\"";
        else if (r.kind == "input")
            style = "shape=invhouse, style=filled, fillcolor=\"#bde0fe\"";
        else if (r.kind == "constant")
            style = "shape=box, style=\"filled,dashed\", fillcolor=\"#eeeeee\"";
        else if (r.kind == "copy")
            style = "shape=cds, style=filled, fillcolor=\"#ffd6a5\"";
        else if (t->view_src && ggml_is_view_op(t->op))
            style = "shape=note, style=filled, fillcolor=\"#e0e0e0\"";
        else if (r.inplace)
            style = "shape=box, style=\"rounded,filled,bold\", fillcolor=\"#caffbf\"";
        else
            style = "shape=box, style=\"rounded,filled\", fillcolor=\"#ffffff\"";
        if (prof) {
            const double share = d.prof_max_us > 0 ? prof->us / d.prof_max_us : 0;
            style = "shape=box, style=\"rounded,filled" + std::string(r.inplace ? ",bold" : "") +
                    "\", fillcolor=\"" + heat_color(share) + "\"" + (share > 0.4 ? ", fontcolor=\"white\"" : "");
        }
        o << "    " << r.id << " [label=\"" << dot_escape(label) << "\", " << style << "];\n";
    };
    // clusters: one per split with a scheduler, else one per backend/buffer name
    std::map<std::string, std::vector<size_t>> clusters;
    std::vector<size_t> loose;
    ggml_backend_sched_t sched = info ? info->sched : nullptr;
    std::unordered_map<const ggml_tensor *, int> copy_split;
    if (sched) {
        const auto & splits = ggml_backend_sched_get_splits(sched);
        for (size_t si = 0; si < splits.size(); ++si) {
            for (const ggml_tensor * c : splits[si].input_copies)
                copy_split[c] = (int)si;
        }
    }
    for (size_t i = 0; i < d.recs.size(); ++i) {
        const tensor_rec & r = d.recs[i];
        int split = r.split;
        if (sched && split < 0 && copy_split.count(r.t)) split = copy_split[r.t];
        if (sched && split >= 0) {
            char key[32];
            std::snprintf(key, sizeof(key), "%06d", split);
            clusters[key].push_back(i);
        } else if (!sched && r.kind == "node" && !r.backend.empty()) {
            clusters[r.backend].push_back(i);
        } else {
            loose.push_back(i);
        }
    }
    int ci = 0;
    for (const auto & [key, members] : clusters) {
        std::string label = key;
        if (sched) {
            const int si = std::atoi(key.c_str());
            const auto & s = ggml_backend_sched_get_splits(sched)[si];
            label = "split " + std::to_string(si) + ": " +
                    ggml_backend_name(ggml_backend_sched_get_backend(sched, s.backend_id));
        }
        o << "  subgraph cluster_" << ci++ << " {\n    label=\"" << dot_escape(label)
          << "\";\n    style=rounded;\n    color=\"#888888\";\n";
        for (size_t i : members)
            node_line(d.recs[i]);
        o << "  }\n";
    }
    for (size_t i : loose)
        node_line(d.recs[i]);
    for (int i = 0; i < gf->n_nodes; ++i) {
        for (int k = 0; k < GGML_MAX_SRC; ++k) {
            const ggml_tensor * s = node_src(d, gf->nodes[i], k);
            if (!s) continue;
            o << "  " << d.recs[d.by_tensor.at(s)].id << " -> n" << i << " [label=\"src" << k << "\"];\n";
        }
    }
    if (sched) {
        for (const auto & s : ggml_backend_sched_get_splits(sched)) {
            for (size_t k = 0; k < s.inputs.size(); ++k) {
                auto ic = d.by_tensor.find(s.input_copies[k]);
                if (ic == d.by_tensor.end()) continue;
                o << "  " << d.recs[d.by_tensor.at(s.inputs[k])].id << " -> " << d.recs[ic->second].id
                  << " [label=\"copy\", style=dashed, color=\"#d9480f\"];\n";
            }
        }
    }
    o << "}\n";
    return o.str();
}

static bool write_atomic(const std::string & path, const std::string & text, std::string * err) {
    const std::string tmp = path + ".tmp";
    {
        std::ofstream f(tmp, std::ios::binary | std::ios::trunc);
        if (!f) {
            if (err) *err = "cannot open " + tmp + " for writing: " + std::strerror(errno);
            return false;
        }
        f.write(text.data(), (std::streamsize)text.size());
        f.flush();
        if (!f) {
            if (err) *err = "failed to write " + tmp;
            std::remove(tmp.c_str());
            return false;
        }
    }
    if (std::rename(tmp.c_str(), path.c_str()) != 0) {
        if (err) *err = "cannot rename " + tmp + " to " + path + ": " + std::strerror(errno);
        std::remove(tmp.c_str());
        return false;
    }
    return true;
}

bool ggml_graph_dump_files(const ggml_cgraph * gf, const ggml_dump_info * info, const std::string & prefix,
                           std::string * err) {
    if (!gf) {
        if (err) *err = "ggml_graph_dump_files: no graph";
        return false;
    }
    if (prefix.empty()) {
        if (err) *err = "ggml_graph_dump_files: empty output prefix";
        return false;
    }
    return write_atomic(prefix + ".dot", ggml_graph_dump_dot(gf, info), err) &&
           write_atomic(prefix + ".json", ggml_graph_dump_json(gf, info), err);
}
