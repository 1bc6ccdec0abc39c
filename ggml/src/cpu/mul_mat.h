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
// thread's static range from p.split(). Fixed steps: `step` units per take. Guided (guided = true):
// each take is 1/(2 nth) of what is left, at least `step`, so threads start on long runs of
// consecutive rows and the phase ends on small takes (the last thread out waits at most `step`).
//
//   ggml_cpu_units it(p, n_units, 4);
//   for (int64_t u0, u1; it.next(u0, u1);) for (int64_t u = u0; u < u1; ++u) work(u);
class ggml_cpu_units {
  public:
    ggml_cpu_units(const ggml_cpu_params & p, int64_t n, int64_t step, bool guided = false)
        : counter_(p.counter), n_(n), step_(std::max<int64_t>(1, step)), div_(guided ? 2 * (int64_t)p.nth : 0) {
        if (!counter_) p.split(n, s0_, s1_);
    }
    bool next(int64_t & u0, int64_t & u1) {
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
    std::atomic<int64_t> * counter_;
    int64_t n_, step_, div_;
    int64_t s0_ = 0, s1_ = 0;
};
