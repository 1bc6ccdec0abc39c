// cpu/threadpool.cpp - see threadpool.h.
#include "threadpool.h"

#include <chrono>

#if defined(__x86_64__) || defined(_M_X64)
#include <immintrin.h>
static inline void cpu_relax() { _mm_pause(); }
#elif defined(__aarch64__)
static inline void cpu_relax() { __asm__ __volatile__("yield"); }
#else
static inline void cpu_relax() {}
#endif

// Spins before a barrier waiter starts yielding its core (the machine may be oversubscribed).
static constexpr int k_barrier_spins = 256;
// How long an idle worker polls for the next run() before it sleeps on the condition variable:
// long enough to cover the host work between two decode steps.
static constexpr int64_t k_idle_spin_us = 2000;

ggml_cpu_threadpool::ggml_cpu_threadpool(int n_threads) : n_threads_(n_threads < 1 ? 1 : n_threads) {
    workers_.reserve(n_threads_ - 1);
    for (int i = 1; i < n_threads_; ++i)
        workers_.emplace_back(&ggml_cpu_threadpool::worker_main, this, i);
}

ggml_cpu_threadpool::~ggml_cpu_threadpool() {
    {
        std::lock_guard<std::mutex> lock(mutex_);
        stop_.store(true, std::memory_order_release);
        generation_.fetch_add(1, std::memory_order_acq_rel);
    }
    cv_.notify_all();
    for (auto & t : workers_)
        t.join();
}

void ggml_cpu_threadpool::worker_main(int ith) {
    uint64_t seen = 0;
    for (;;) {
        uint64_t g = generation_.load(std::memory_order_acquire);
        if (g == seen) {
            const auto t0 = std::chrono::steady_clock::now();
            for (int i = 0; (g = generation_.load(std::memory_order_acquire)) == seen; ++i) {
                if ((i & 1023) != 1023) {
                    cpu_relax();
                    continue;
                }
                const auto us =
                    std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now() - t0);
                if (us.count() < k_idle_spin_us) {
                    std::this_thread::yield();
                    continue;
                }
                std::unique_lock<std::mutex> lock(mutex_);
                cv_.wait(lock, [&] { return generation_.load(std::memory_order_acquire) != seen; });
            }
        }
        seen = g;
        if (stop_.load(std::memory_order_acquire)) return;
        (*job_)(ith);
        n_done_.fetch_add(1, std::memory_order_acq_rel);
    }
}

void ggml_cpu_threadpool::run(const std::function<void(int)> & fn) {
    if (n_threads_ == 1) {
        fn(0);
        return;
    }
    job_ = &fn;
    n_done_.store(0, std::memory_order_relaxed);
    counter_.store(0, std::memory_order_relaxed);
    {
        std::lock_guard<std::mutex> lock(mutex_);
        generation_.fetch_add(1, std::memory_order_acq_rel); // publishes job_ to the workers
    }
    cv_.notify_all();
    fn(0);
    for (int i = 0; n_done_.load(std::memory_order_acquire) != n_threads_ - 1; ++i) {
        if (i < k_barrier_spins)
            cpu_relax();
        else
            std::this_thread::yield();
    }
    job_ = nullptr;
}

void ggml_cpu_threadpool::barrier() {
    if (n_threads_ == 1) return;
    // The phase cannot advance before this thread arrives, so reading it first is safe.
    const int phase = bar_phase_.load(std::memory_order_acquire);
    if (bar_count_.fetch_add(1, std::memory_order_acq_rel) == n_threads_ - 1) {
        bar_count_.store(0, std::memory_order_relaxed);
        counter_.store(0, std::memory_order_relaxed); // published by the release below
        bar_phase_.store(phase + 1, std::memory_order_release);
        return;
    }
    for (int i = 0; bar_phase_.load(std::memory_order_acquire) == phase; ++i) {
        if (i < k_barrier_spins)
            cpu_relax();
        else
            std::this_thread::yield();
    }
}
