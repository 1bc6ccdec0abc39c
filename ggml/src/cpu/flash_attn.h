// cpu/flash_attn.h - how FLASH_ATTN_EXT (flash_attn.cpp) splits its work and how much scratch that takes;
// work_size.cpp sizes the shared scratch from the same plan.
//
//   const ggml_cpu_fa_plan pl = ggml_cpu_fa_plan_make(dst, nth);
//   size_t bytes = pl.work_size(nth);
//
// Work unit: one KV head and one block of up to bq query rows of its group (row r = token r / group, head
// kv_head * group + r % group), so the rows that share a KV head read each K/V tile once, not once per
// query head. Units go to threads through the pool's work counter (causal blocks differ in cost). When
// there are fewer units than threads (decode), each unit's KV range is cut into n_split chunks whose
// partial (max, sum, accumulator) are merged after a barrier (flash-decoding).
#pragma once

#include "ggml.h"

#include <cstddef>
#include <cstdint>

struct ggml_cpu_fa_plan {
    int64_t D = 0, n_tokens = 0, n_head = 0, n_head_kv = 0, n_kv = 0, group = 0;
    int64_t bq = 0;           // query rows per block
    int64_t bk = 0;           // keys per tile
    int64_t n_qb = 0;         // query blocks per KV head
    int64_t n_units = 0;      // n_head_kv * n_qb
    int64_t n_split = 1;      // KV chunks per unit
    int64_t kv_chunk = 0;     // keys per chunk (a multiple of bk)
    size_t q_row_bytes = 0;   // one query row in the K type's dot activation type (f32 for f32/f16 K)
    size_t thread_bytes = 0;  // scratch of one thread
    size_t partial_bytes = 0; // partial results of all (unit, chunk) pairs (n_split > 1)

    size_t work_size(int nth) const { return (size_t)nth * thread_bytes + partial_bytes + 64; }
};

ggml_cpu_fa_plan ggml_cpu_fa_plan_make(const ggml_tensor * dst, int nth);
