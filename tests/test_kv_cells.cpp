// test_kv_cells.cpp - the KV cache's cell bookkeeping (llm/kv-cells.cpp) without a model: after random
// sequences of placements and edits (seq_rm, seq_cp, seq_keep, free_cells) the counters the edits keep up to
// date (used, used_end, seq_pos_max) equal a full recount of the cells.
#include "kv-cache.h"

#include <algorithm>
#include "doctest_cstr.h"
#include <random>
#include <string>
#include <vector>

namespace {

llm_kv_cache make_cache(int n_ctx, int n_seq_max) {
    llm_kv_cache kv;
    kv.n_ctx = n_ctx;
    kv.n_seq_max = n_seq_max;
    llm_kv_cache_clear(kv); // no buffers: only the cells
    return kv;
}

// the counters equal those of llm_kv_recount; used_end is exact (1 + the highest used cell)
void check_counters(const llm_kv_cache & kv, const std::string & what) {
    llm_kv_cache ref = kv;
    llm_kv_recount(ref);
    CHECK_MESSAGE(kv.used == ref.used, what);
    CHECK_MESSAGE(kv.used_end == ref.used_end, what);
    CHECK_MESSAGE(kv.seq_pos_max == ref.seq_pos_max, what);
    for (int j = kv.used_end; j < kv.n_ctx; ++j)
        REQUIRE_MESSAGE(kv.cells[j].seq == 0, what);
}

} // namespace

TEST_CASE("cell counters kept by the edits equal a full recount after random edit sequences") {
    std::mt19937 rng(1234);
    auto pick = [&](int n) { return (int)(rng() % (unsigned)n); };
    for (int trial = 0; trial < 200; ++trial) {
        const int n_ctx = 1 + pick(96);
        const int n_seq_max = 1 + pick(trial % 4 == 0 ? 64 : 6);
        llm_kv_cache kv = make_cache(n_ctx, n_seq_max);
        std::vector<int32_t> next_pos(n_seq_max, 0); // each sequence's next position
        std::string log = "n_ctx " + std::to_string(n_ctx) + ", n_seq_max " + std::to_string(n_seq_max) + ":";
        for (int step = 0; step < 60; ++step) {
            const int op = pick(7);
            const int s = pick(n_seq_max);
            const int p0 = pick(40), p1 = pick(4) == 0 ? -1 : p0 + pick(20);
            if (op <= 1) { // place a batch (sometimes undone, as a failed step is)
                const int n = 1 + pick(8);
                std::vector<int32_t> seq(n), pos(n), cells(n);
                for (int i = 0; i < n; ++i) {
                    seq[i] = pick(n_seq_max);
                    pos[i] = pick(3) == 0 ? pick(50) : next_pos[seq[i]]++; // mostly in order, some repeats
                }
                const int n_free = n_ctx - kv.used;
                std::string err;
                const bool ok = llm_kv_place(kv, n, seq.data(), pos.data(), cells.data(), &err);
                log += " place " + std::to_string(n) + (ok ? "" : " (full)");
                CHECK(ok == (n <= n_free)); // and a refused batch marks nothing (the counters below)
                if (ok && op == 1) {
                    llm_kv_free_cells(kv, cells.data(), n);
                    log += " free";
                }
            } else if (op == 2) {
                llm_kv_seq_rm(kv, pick(5) == 0 ? -1 : s, p0, p1);
                log += " rm";
            } else if (op == 3 || op == 4) {
                llm_kv_seq_cp(kv, s, pick(n_seq_max), p0, p1);
                log += " cp";
            } else if (op == 5) {
                llm_kv_seq_keep(kv, s);
                log += " keep";
            } else { // free some used cells (a failed step's cells, out of order)
                std::vector<int32_t> cells;
                for (int j = 0; j < kv.used_end; ++j) {
                    if (kv.cells[j].seq && pick(3) == 0) cells.push_back(j);
                }
                std::shuffle(cells.begin(), cells.end(), rng);
                llm_kv_free_cells(kv, cells.data(), (int)cells.size());
                log += " free " + std::to_string(cells.size());
            }
            check_counters(kv, log);
        }
    }
}

TEST_CASE("cell edits: a shared prefix is stored once, freed when its last sequence lets go") {
    llm_kv_cache kv = make_cache(16, 2);
    std::vector<int32_t> seq(6, 0), pos = {0, 1, 2, 3, 4, 5}, cells(6);
    REQUIRE(llm_kv_place(kv, 6, seq.data(), pos.data(), cells.data(), nullptr));
    llm_kv_seq_cp(kv, 0, 1, 0, 4);
    CHECK(kv.used == 6);
    CHECK(kv.seq_pos_max == std::vector<int32_t>{5, 3});
    llm_kv_seq_rm(kv, 0, 2, -1); // cells of 2, 3 stay for seq 1; 4, 5 are freed
    CHECK(kv.used == 4);
    CHECK(kv.used_end == 4);
    CHECK(kv.seq_pos_max == std::vector<int32_t>{1, 3});
    llm_kv_seq_keep(kv, 0);
    CHECK(kv.used == 2);
    CHECK(kv.used_end == 2);
    CHECK(kv.seq_pos_max == std::vector<int32_t>{1, -1});
    llm_kv_seq_rm(kv, -1, 0, -1);
    CHECK(kv.used == 0);
    CHECK(kv.used_end == 0);
    CHECK(kv.seq_pos_max == std::vector<int32_t>{-1, -1});
}
