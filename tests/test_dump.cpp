// test_dump.cpp - graph dumps: the JSON parses and holds every node with its shape, strides,
// buffer offset and in-place mark as the allocator/scheduler planned them; the DOT renders with
// graphviz (when `dot` is installed); files are written whole or not at all.
#include "ggml-alloc.h"
#include "ggml-backend-impl.h"
#include "ggml-backend.h"
#include "ggml-dump.h"
#include "ggml-impl.h"
#include "ggml.h"

#include <cstdio>
#include <cstdlib>
#include "doctest_cstr.h"
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <unistd.h>

namespace {

size_t meta_size() { return ggml_tensor_overhead() * 512 + ggml_graph_overhead_custom(GGML_DEFAULT_GRAPH_SIZE); }

struct fixture {
    ggml_backend_t cpu = ggml_backend_cpu_init();
    ggml_context * wctx = ggml_init({meta_size(), nullptr, true});
    ggml_context * gctx = ggml_init({meta_size(), nullptr, true});
    ggml_backend_buffer_t wbuf = nullptr;
    ggml_tensor * w = nullptr;
    ggml_tensor * x = nullptr;
    ggml_cgraph * gf = nullptr;

    fixture() {
        w = ggml_new_tensor_2d(wctx, GGML_TYPE_F32, 16, 16); // [16, 16]
        ggml_set_name(w, "w \"quoted\" \\ name");
        wbuf = ggml_backend_alloc_ctx_tensors(wctx, cpu);
        ggml_backend_buffer_set_usage(wbuf, GGML_BACKEND_BUFFER_USAGE_WEIGHTS);
        ggml_backend_buffer_clear(wbuf, 0);
        x = ggml_new_tensor_2d(gctx, GGML_TYPE_F32, 16, 6); // [16, 6]
        ggml_set_name(x, "x");
        ggml_set_input(x);
        ggml_tensor * pos = ggml_new_tensor_1d(gctx, GGML_TYPE_I32, 6);
        ggml_set_input(pos);
        ggml_tensor * n = ggml_rms_norm(gctx, x, 1e-5f);
        ggml_tensor * q = ggml_reshape_3d(gctx, ggml_mul_mat(gctx, w, n), 4, 4, 6); // [4, 4, 6]
        q = ggml_rope_ext(gctx, q, pos, nullptr, 4, GGML_ROPE_TYPE_NEOX, 10000.0f, 1.0f);
        ggml_tensor * qp = ggml_permute(gctx, q, 0, 2, 1, 3);               // [4, 6, 4] view
        ggml_tensor * kq = ggml_soft_max(gctx, ggml_mul_mat(gctx, qp, qp)); // [6, 6, 4]
        ggml_tensor * y = ggml_silu(gctx, ggml_cont(gctx, ggml_transpose(gctx, kq)));
        ggml_set_output(y);
        gf = ggml_new_graph(gctx);
        ggml_build_forward_expand(gf, y);
    }
    ~fixture() {
        ggml_backend_buffer_free(wbuf);
        ggml_free(gctx);
        ggml_free(wctx);
        ggml_backend_free(cpu);
    }
};

bool have_dot() { return std::system("command -v dot > /dev/null 2>&1") == 0; }

std::string read_file(const std::string & path) {
    std::ifstream f(path, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
}

std::filesystem::path temp_dir(const char * tag) {
    auto d =
        std::filesystem::temp_directory_path() / (std::string("test_dump_") + tag + "_" + std::to_string(::getpid()));
    std::filesystem::create_directories(d);
    return d;
}

} // namespace

TEST_CASE("JSON has every node with shape, strides, offsets and in-place marks from the allocator") {
    fixture f;
    ggml_gallocr_t galloc = ggml_gallocr_new(ggml_backend_cpu_buffer_type());
    REQUIRE(ggml_gallocr_alloc_graph(galloc, f.gf));
    ggml_dump_info info;
    info.galloc = galloc;
    info.title = "test";
    const auto j = nlohmann::json::parse(ggml_graph_dump_json(f.gf, &info));
    REQUIRE(j["nodes"].size() == (size_t)ggml_graph_n_nodes(f.gf));
    CHECK(j["n_nodes"] == ggml_graph_n_nodes(f.gf));
    CHECK(j["n_splits"] == 1);
    const char * base = (const char *)ggml_backend_buffer_get_base(ggml_gallocr_get_buffer(galloc));
    int n_edges = 0, n_inplace = 0, n_views = 0;
    for (int i = 0; i < ggml_graph_n_nodes(f.gf); ++i) {
        const ggml_tensor * t = ggml_graph_node(f.gf, i);
        const auto & n = j["nodes"][i];
        CAPTURE(i);
        CHECK(n["index"] == i);
        CHECK(n["op"] == ggml_op_symbol(t->op));
        CHECK(n["name"] == t->name);
        CHECK(n["type"] == "f32");
        for (int d = 0; d < 4; ++d) {
            CHECK(n["ne"][d] == t->ne[d]);
            CHECK(n["nb"][d] == t->nb[d]);
        }
        CHECK(n["contiguous"] == ggml_is_contiguous(t));
        CHECK(n["view"] == (t->view_src != nullptr));
        CHECK(n["offset"] == (long long)((const char *)t->data - base));
        CHECK(n["size"] == ggml_nbytes(t));
        CHECK(n["inplace"] == ggml_gallocr_is_inplace(galloc, t));
        CHECK(n["buffer"] == "CPU compute");
        n_inplace += ggml_gallocr_is_inplace(galloc, t);
        n_views += t->view_src != nullptr;
        for (auto * s : t->src)
            n_edges += s != nullptr;
    }
    CHECK(n_inplace > 0);
    CHECK(n_views > 0);
    CHECK(j["edges"].size() == (size_t)n_edges);
    // leafs: the weight (with its weights-buffer offset) and the two inputs
    std::map<std::string, int> kinds;
    for (const auto & l : j["leafs"])
        kinds[l["kind"]]++;
    CHECK(kinds["weight"] == 1);
    CHECK(kinds["input"] == 2);
    CHECK(j["alloc"]["planned_size"] == ggml_gallocr_get_buffer_size(galloc));
    CHECK(j["buffers"].size() == 2);
    ggml_gallocr_free(galloc);
}

TEST_CASE("JSON and DOT from the scheduler: backend, split and copies per node") {
    fixture f;
    ggml_backend_t c1 = ggml_backend_cpu_init();
    ggml_backend_t bk[2] = {f.cpu, c1}; // the weight is in f.cpu's buffer; the softmax forced onto c1
    ggml_backend_sched_t sched = ggml_backend_sched_new(bk, 2, GGML_DEFAULT_GRAPH_SIZE);
    for (int i = 0; i < ggml_graph_n_nodes(f.gf); ++i) {
        if (ggml_graph_node(f.gf, i)->op == GGML_OP_SOFT_MAX)
            ggml_backend_sched_set_tensor_backend(sched, ggml_graph_node(f.gf, i), c1);
    }
    REQUIRE(ggml_backend_sched_alloc_graph(sched, f.gf));
    const int n_splits = ggml_backend_sched_get_n_splits(sched);
    CHECK(n_splits >= 2);
    ggml_dump_info info;
    info.sched = sched;
    const auto j = nlohmann::json::parse(ggml_graph_dump_json(f.gf, &info));
    CHECK(j["n_splits"] == n_splits);
    REQUIRE(j["splits"].size() == (size_t)n_splits);
    size_t n_inputs = 0;
    for (const auto & s : j["splits"])
        n_inputs += s["inputs"].size();
    CHECK(n_inputs == (size_t)ggml_backend_sched_get_n_copies(sched));
    for (int i = 0; i < ggml_graph_n_nodes(f.gf); ++i) {
        const auto & n = j["nodes"][i];
        CHECK(n["split"] >= 0);
        CHECK(n["split"] < n_splits);
        CHECK(n["backend"] == "CPU");
        CHECK(n["offset"] >= 0);
    }
    int n_copy_leafs = 0;
    for (const auto & l : j["leafs"])
        n_copy_leafs += l["kind"] == "copy";
    CHECK(n_copy_leafs == ggml_backend_sched_get_n_copies(sched));
    const std::string dot = ggml_graph_dump_dot(f.gf, &info);
    CHECK(dot.find("cluster_1") != std::string::npos);
    CHECK(dot.find("label=\"copy\"") != std::string::npos);
    if (have_dot()) {
        auto dir = temp_dir("sched");
        std::string err;
        REQUIRE(ggml_graph_dump_files(f.gf, &info, (dir / "g").string(), &err));
        const std::string cmd = "dot -Tsvg '" + (dir / "g.dot").string() + "' -o '" + (dir / "g.svg").string() + "'";
        CHECK(std::system(cmd.c_str()) == 0);
        CHECK(read_file((dir / "g.svg").string()).find("<svg") != std::string::npos);
        std::filesystem::remove_all(dir);
    }
    ggml_backend_sched_free(sched);
    ggml_backend_free(c1);
}

TEST_CASE("DOT renders with graphviz; files are written via temp + rename") {
    fixture f;
    ggml_gallocr_t galloc = ggml_gallocr_new(ggml_backend_cpu_buffer_type());
    REQUIRE(ggml_gallocr_alloc_graph(galloc, f.gf));
    ggml_dump_info info;
    info.galloc = galloc;
    info.title = "a \"title\"";
    const std::string dot = ggml_graph_dump_dot(f.gf, &info);
    CHECK(dot.rfind("digraph", 0) == 0);
    for (int i = 0; i < ggml_graph_n_nodes(f.gf); ++i)
        CHECK(dot.find(" n" + std::to_string(i) + " [label=") != std::string::npos);
    CHECK(dot.find("w \\\"quoted\\\" \\\\ name") != std::string::npos); // escaped

    auto dir = temp_dir("files");
    std::string err;
    REQUIRE(ggml_graph_dump_files(f.gf, &info, (dir / "step").string(), &err));
    CHECK(read_file((dir / "step.dot").string()) == dot);
    CHECK(nlohmann::json::parse(read_file((dir / "step.json").string()))["nodes"].size() ==
          (size_t)ggml_graph_n_nodes(f.gf));
    CHECK(!std::filesystem::exists(dir / "step.dot.tmp"));
    CHECK(!std::filesystem::exists(dir / "step.json.tmp"));
    if (have_dot()) {
        const std::string cmd =
            "dot -Tsvg '" + (dir / "step.dot").string() + "' -o '" + (dir / "step.svg").string() + "'";
        CHECK(std::system(cmd.c_str()) == 0);
        CHECK(read_file((dir / "step.svg").string()).find("<svg") != std::string::npos);
    } else {
        MESSAGE("graphviz 'dot' not found: rendering SKIPPED");
    }
    // a directory that does not exist: false, a one-line reason naming the path, nothing written
    err.clear();
    CHECK(!ggml_graph_dump_files(f.gf, &info, (dir / "missing" / "step").string(), &err));
    CHECK(err.find("missing") != std::string::npos);
    CHECK(err.find('\n') == std::string::npos);
    CHECK(!ggml_graph_dump_files(f.gf, &info, "", &err));
    std::filesystem::remove_all(dir);

    // no info at all: shapes and edges only, still valid
    const auto j = nlohmann::json::parse(ggml_graph_dump_json(f.gf, nullptr));
    CHECK(j["nodes"].size() == (size_t)ggml_graph_n_nodes(f.gf));
    ggml_gallocr_free(galloc);
}
