// cpu/mul_mat.h - mul_mat's scratch size (used by ggml_cpu_op_work_size in work_size.cpp) and the
// work-unit dispenser its kernels (mul_mat.cpp, amx.cpp) share.
#pragma once

#include "cpu/ops.h"
#include "ggml.h"

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>

// Bytes of p.wdata ggml_cpu_op_mul_mat needs for dst (b rows converted to the dot's input type).
size_t ggml_cpu_mul_mat_work_size(const ggml_tensor * dst);

// Graph-executor hooks (ggml-cpu.cpp), so that a decode step's activation conversion runs on one thread
// ahead of the mat-vec without the kernel's internal barrier:
//  - bytes of b converted to the dot's activation type, 0 when b is read in place or AMX runs the node;
//  - this thread's rows of that conversion (p.split) into out (the layout p.pre_b then hands to the kernel);
//  - true when the kernel has no internal barrier as it is (b read in place, no AMX).
size_t ggml_cpu_mul_mat_preconvert_size(const ggml_tensor * dst);
void ggml_cpu_mul_mat_convert(const ggml_cpu_params & p, const ggml_tensor * dst, void * out);
bool ggml_cpu_mul_mat_barrier_free(const ggml_tensor * dst);

// Work units [0, n) of one kernel phase for this thread: taken from the shared p.counter when
// there is one (dynamic: a thread that lost its core leaves its share to the others), else this
// thread's static range from p.split(). Fixed steps: `step` units per take.
// Streaming (stream = true: the decode mat-vec, whose units are consecutive weight rows):
//  - with p.owned (decode steps of the graph executor): each thread owns the range p.split() gives it and takes it
//    front to back in chunks of a quarter of what is left (at least `step`), so in the common case every thread
//    reads one contiguous run of rows per mat-vec and its tiles' rows-ahead prefetch never starts over; a thread
//    done with its own range then takes `step` units at a time from the back of the others' (so one that lost its
//    core does not hold up the phase). Measured against the guided takes below (2-vCPU Zen 5, tg128, % of the
//    bandwidth roofline, alternating, 4 rounds): q4_0 81.0 -> 85.3, Q4_K_M 80.9 -> 85.1 (docs/cpu-notes.md).
//  - else guided on p.counter: each take is 1/(2 nth) of what is left, at least `step`.
//
//   ggml_cpu_units it(p, n_units, 4);
//   for (int64_t u0, u1; it.next(u0, u1);) for (int64_t u = u0; u < u1; ++u) work(u);
class ggml_cpu_units {
  public:
    ggml_cpu_units(const ggml_cpu_params & p, int64_t n, int64_t step, bool stream = false)
        : counter_(p.counter), own_(stream && n < (int64_t(1) << 31) ? p.owned : nullptr), n_(n),
          step_(std::max<int64_t>(1, step)), div_(stream ? 2 * (int64_t)p.nth : 0), ith_(p.ith), nth_(p.nth) {
        if (!counter_ || own_) p.split(n, s0_, s1_);
    }
    bool next(int64_t & u0, int64_t & u1) {
        if (own_) return next_owned(u0, u1);
        if (!counter_) {
            if (s0_ >= s1_) return false;
            u0 = s0_;
            u1 = s1_;
            s0_ = s1_;
            return true;
        }
        if (div_ == 0) {
            u0 = counter_->fetch_add(step_, std::memory_order_relaxed);
            if (u0 >= n_) return false;
            u1 = std::min(n_, u0 + step_);
            return true;
        }
        u0 = counter_->load(std::memory_order_relaxed);
        do {
            if (u0 >= n_) return false;
            u1 = std::min(n_, u0 + std::max(step_, (n_ - u0) / div_));
        } while (!counter_->compare_exchange_weak(u0, u1, std::memory_order_relaxed));
        return true;
    }

  private:
    // A take word: the units taken from the front (high half) and from the back (low half) of its range. The units
    // taken are disjoint because both ends move by compare-exchange of the one word; the results are published by
    // the barrier after the phase, so relaxed order suffices.
    // One take from the range [b, e) of word w: from its front a quarter of what is left (at least step_), or from
    // its back step_ units.
    bool take(std::atomic<uint64_t> & w, int64_t b, int64_t e, bool front, int64_t & u0, int64_t & u1) const {
        uint64_t x = w.load(std::memory_order_relaxed);
        for (;;) {
            const int64_t f = (int64_t)(x >> 32), k = (int64_t)(x & 0xFFFFFFFFu), left = e - b - f - k;
            if (left <= 0) return false;
            const int64_t c = std::min(left, std::max(step_, front ? left / 4 : 0));
            if (w.compare_exchange_weak(x, x + (front ? (uint64_t)c << 32 : (uint64_t)c), std::memory_order_relaxed)) {
                u0 = front ? b + f : e - k - c;
                u1 = u0 + c;
                return true;
            }
        }
    }
    bool next_owned(int64_t & u0, int64_t & u1) {
        if (take(own_[ith_].v, s0_, s1_, true, u0, u1)) return true;
        for (int o = 1; o < nth_; ++o) {
            const int t = (ith_ + o) % nth_;
            int64_t b, e;
            ggml_cpu_params::split_of(t, nth_, n_, b, e);
            if (take(own_[t].v, b, e, false, u0, u1)) return true;
        }
        return false;
    }

    std::atomic<int64_t> * counter_;
    ggml_cpu_take_word * own_;
    int64_t n_, step_, div_;
    int ith_, nth_;
    int64_t s0_ = 0, s1_ = 0;
};
