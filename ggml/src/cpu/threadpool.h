// cpu/threadpool.h - persistent worker threads and a spin-then-yield barrier for the CPU backend.
//
// One job per graph: run() wakes the workers, every thread (the caller is thread 0) runs
// fn(ith), and run() returns when all are done. Inside fn, threads meet at barrier() between
// nodes; the barrier is two atomics and a short spin, so a decode step of a few hundred small
// nodes pays about a microsecond per node, not a futex round trip.
//
//   ggml_cpu_threadpool tp(4);
//   tp.run([&](int ith) { for (node : nodes) { compute(node, ith); tp.barrier(); } });
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

class ggml_cpu_threadpool {
  public:
    explicit ggml_cpu_threadpool(int n_threads);
    ~ggml_cpu_threadpool();
    ggml_cpu_threadpool(const ggml_cpu_threadpool &) = delete;
    ggml_cpu_threadpool & operator=(const ggml_cpu_threadpool &) = delete;

    int n_threads() const { return n_threads_; }
    // Run fn(ith) for ith in [0, n_threads) concurrently; the caller runs ith = 0. Not reentrant.
    void run(const std::function<void(int)> & fn);
    // All n_threads threads of the current run() meet here.
    void barrier();
    // Work counter shared by the threads, reset to 0 when run() starts and by the last thread to
    // arrive at each barrier (before any thread leaves it). Kernels use it to hand out work units
    // dynamically, so a thread that lost its core (an oversubscribed machine) does not hold up the rest.
    std::atomic<int64_t> * counter() { return &counter_; }

  private:
    void worker_main(int ith);

    const int n_threads_;
    std::vector<std::thread> workers_;
    const std::function<void(int)> * job_ = nullptr;

    std::mutex mutex_; // guards sleeping on cv_ (generation_ changes under it)
    std::condition_variable cv_;
    alignas(64) std::atomic<uint64_t> generation_{0}; // bumped once per run()
    alignas(64) std::atomic<int> n_done_{0};          // workers finished with the current job
    alignas(64) std::atomic<int> bar_count_{0};       // threads arrived at the barrier
    alignas(64) std::atomic<int> bar_phase_{0};       // bumped when the last one arrives
    alignas(64) std::atomic<int64_t> counter_{0};     // see counter()
    std::atomic<bool> stop_{false};
};
