// workers.h - threads that run one job each, at the same time, and are kept between jobs: split mode row runs each
// device's graph of a step from a thread of its own (an all-reduce returns only once every rank has called it, and
// NCCL's captured graphs of several GPUs must not be launched from one thread).
//
//   llm_workers w(2);                        // threads for jobs 1 and 2; job 0 runs on the caller
//   w.run([&](int i) { compute(shard[i]); }); // jobs 0, 1, 2 at once; returns when all three are done
#pragma once

#include <condition_variable>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

class llm_workers {
public:
    explicit llm_workers(int n_threads);
    ~llm_workers();
    llm_workers(const llm_workers &) = delete;
    llm_workers & operator=(const llm_workers &) = delete;

    // f(0) on the calling thread and f(1..n_threads) on the workers, at once; returns when every call has returned.
    void run(const std::function<void(int)> & f);

private:
    void loop(int i);

    std::vector<std::thread> threads_;
    std::mutex mu_;
    std::condition_variable cv_start_, cv_done_;
    const std::function<void(int)> * job_ = nullptr;
    unsigned long generation_ = 0;
    int pending_ = 0;
    bool stop_ = false;
};
