// kv-cells.cpp - bookkeeping of the KV cache's cells (see kv-cache.h): which cells a batch's tokens take,
// which cells each token's attention may see (the mask), and the per-sequence edits.
#include "kv-cache.h"

#include "llm-impl.h"

#include <algorithm>
#include <cmath>
#include <cstring>

void llm_kv_recount(llm_kv_cache & kv) {
    kv.used = 0;
    kv.used_end = 0;
    std::fill(kv.seq_pos_max.begin(), kv.seq_pos_max.end(), -1);
    for (int j = 0; j < kv.n_ctx; ++j) {
        const llm_kv_cell & c = kv.cells[j];
        if (!c.seq) continue;
        ++kv.used;
        kv.used_end = j + 1;
        for (uint64_t m = c.seq; m; m &= m - 1) {
            const int s = __builtin_ctzll(m);
            kv.seq_pos_max[s] = std::max(kv.seq_pos_max[s], c.pos);
        }
    }
}

// first free cell at or after `from`, wrapping around; -1 if none
static int find_free(const llm_kv_cache & kv, int from) {
    for (int j = from; j < kv.n_ctx; ++j) {
        if (!kv.cells[j].seq) return j;
    }
    for (int j = 0; j < from; ++j) {
        if (!kv.cells[j].seq) return j;
    }
    return -1;
}

bool llm_kv_place(llm_kv_cache & kv, int n, const int32_t * seq, const int32_t * pos, int32_t * cells,
                  std::string * err) {
    if (kv.n_ctx - kv.used < n) {
        if (err) {
            *err = "KV cache full: " + std::to_string(kv.used) + " of " + std::to_string(kv.n_ctx) + " cells used, " +
                   std::to_string(n) + " more asked";
        }
        return false;
    }
    for (int i = 0; i < n; ++i) {
        const int s = seq[i];
        const int j = find_free(kv, std::min(kv.seq_next[s], kv.n_ctx - 1));
        GGML_ASSERT(j >= 0);  // counted above
        kv.cells[j].pos = pos[i];
        kv.cells[j].seq = 1ull << s;
        kv.seq_next[s] = j + 1 < kv.n_ctx ? j + 1 : 0;
        kv.seq_pos_max[s] = std::max(kv.seq_pos_max[s], pos[i]);
        kv.used_end = std::max(kv.used_end, j + 1);
        ++kv.used;
        cells[i] = j;
    }
    return true;
}

int llm_kv_n_kv(const llm_kv_cache & kv) {
    return std::min(kv.n_ctx, std::max(1, (kv.used_end + LLM_KV_PAD - 1) / LLM_KV_PAD * LLM_KV_PAD));
}

void llm_kv_fill_cells(const llm_kv_cache & kv, int32_t * out, int n_kv) {
    const int n_used = std::min(n_kv, kv.used_end);
    for (int j = 0; j < n_used; ++j) {
        const llm_kv_cell & c = kv.cells[j];
        out[3 * j] = c.pos;
        out[3 * j + 1] = (int32_t) (uint32_t) c.seq;
        out[3 * j + 2] = (int32_t) (uint32_t) (c.seq >> 32);
    }
    std::fill(out + 3 * (size_t) n_used, out + 3 * (size_t) n_kv, 0);
}

// The counters after an edit are kept up to date as the edit goes, not by a recount of all n_ctx cells. Edits
// only clear or add sequence bits of used cells (cells at or above used_end stay free), so:
//   used         drops by one for each cell an edit frees (release);
//   used_end     walks down past the free cells at the top (shrink_used_end);
//   seq_pos_max  rises when a sequence gains a cell (seq_cp); a sequence that loses cells gets its highest kept
//                position from the edit's own pass over the used cells (seq_rm), -1 when it keeps none
//                (seq_keep), or one pass over the used cells when the edit named its cells (free_cells, seq_add).
// tests/test_kv_cells.cpp checks them against llm_kv_recount after random edits.

static void raise_pos_max(llm_kv_cache & kv, uint64_t seqs, int32_t pos) {
    for (uint64_t m = seqs; m; m &= m - 1) {
        const int s = __builtin_ctzll(m);
        kv.seq_pos_max[s] = std::max(kv.seq_pos_max[s], pos);
    }
}

// clear the bits `seqs` of cell c; a cell left with no sequence is free
static void release(llm_kv_cache & kv, llm_kv_cell & c, uint64_t seqs) {
    if (!(c.seq & seqs)) return;
    c.seq &= ~seqs;
    if (!c.seq) {
        c = llm_kv_cell();
        --kv.used;
    }
}

static void shrink_used_end(llm_kv_cache & kv) {
    while (kv.used_end > 0 && !kv.cells[kv.used_end - 1].seq)
        --kv.used_end;
}

void llm_kv_recount_pos_max(llm_kv_cache & kv, uint64_t seqs) {
    for (int s = 0; s < kv.n_seq_max; ++s) {
        if (seqs >> s & 1) kv.seq_pos_max[s] = -1;
    }
    for (int j = 0; j < kv.used_end; ++j)
        raise_pos_max(kv, kv.cells[j].seq & seqs, kv.cells[j].pos);
}

// the home region's first cell: where a sequence's cells start when it has none
static int home(const llm_kv_cache & kv, int s) { return (int) ((int64_t) kv.n_ctx * s / kv.n_seq_max); }

void llm_kv_seq_rm(llm_kv_cache & kv, int seq, int p0, int p1) {
    if (p1 < 0) p1 = INT32_MAX;
    const uint64_t mask = seq < 0 ? ~0ull : 1ull << seq;
    for (int s = 0; s < kv.n_seq_max; ++s) {
        if (!(mask >> s & 1)) continue;
        kv.seq_pos_max[s] = -1;       // raised again below by the cells the sequence keeps
        kv.seq_next[s] = home(kv, s); // refill from the home region's first free cell
    }
    for (int j = 0; j < kv.used_end; ++j) {
        llm_kv_cell & c = kv.cells[j];
        if (!(c.seq & mask)) continue;
        if (c.pos >= p0 && c.pos < p1) {
            release(kv, c, mask);
        } else {
            raise_pos_max(kv, c.seq & mask, c.pos);
        }
    }
    shrink_used_end(kv);
}

void llm_kv_seq_cp(llm_kv_cache & kv, int src, int dst, int p0, int p1) {
    if (src == dst) return;
    if (p1 < 0) p1 = INT32_MAX;
    for (int j = 0; j < kv.used_end; ++j) { // the cells are used already: only dst's highest position changes
        llm_kv_cell & c = kv.cells[j];
        if ((c.seq >> src & 1) && c.pos >= p0 && c.pos < p1) {
            c.seq |= 1ull << dst;
            kv.seq_pos_max[dst] = std::max(kv.seq_pos_max[dst], c.pos);
        }
    }
}

void llm_kv_seq_keep(llm_kv_cache & kv, int seq) {
    for (int j = 0; j < kv.used_end; ++j)
        release(kv, kv.cells[j], ~(1ull << seq));
    for (int s = 0; s < kv.n_seq_max; ++s) {
        if (s == seq) continue; // keeps all its cells, so its highest position
        kv.seq_pos_max[s] = -1;
        kv.seq_next[s] = home(kv, s);
    }
    shrink_used_end(kv);
}

void llm_kv_free_cells(llm_kv_cache & kv, const int32_t * cells, int n) {
    uint64_t lost_max = 0; // the sequences that lose the cell of their highest position
    for (int i = 0; i < n; ++i) {
        llm_kv_cell & c = kv.cells[cells[i]];
        for (uint64_t m = c.seq; m; m &= m - 1) {
            if (kv.seq_pos_max[__builtin_ctzll(m)] == c.pos) lost_max |= m & (~m + 1);
        }
        release(kv, c, ~0ull);
    }
    shrink_used_end(kv);
    if (lost_max) llm_kv_recount_pos_max(kv, lost_max);
}
