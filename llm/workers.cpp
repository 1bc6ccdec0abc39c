// workers.cpp - llm_workers (workers.h).
#include "workers.h"

llm_workers::llm_workers(int n_threads) {
    for (int i = 1; i <= n_threads; ++i) threads_.emplace_back([this, i] { loop(i); });
}

llm_workers::~llm_workers() {
    {
        std::lock_guard<std::mutex> lock(mu_);
        stop_ = true;
    }
    cv_start_.notify_all();
    for (auto & t : threads_) t.join();
}

void llm_workers::run(const std::function<void(int)> & f) {
    {
        std::lock_guard<std::mutex> lock(mu_);
        job_ = &f;
        pending_ = (int) threads_.size();
        ++generation_;
    }
    cv_start_.notify_all();
    f(0);
    std::unique_lock<std::mutex> lock(mu_);
    cv_done_.wait(lock, [this] { return pending_ == 0; });
    job_ = nullptr;
}

void llm_workers::loop(int i) {
    unsigned long seen = 0;
    for (;;) {
        const std::function<void(int)> * f = nullptr;
        {
            std::unique_lock<std::mutex> lock(mu_);
            cv_start_.wait(lock, [&] { return stop_ || generation_ != seen; });
            if (stop_) return;
            seen = generation_;
            f = job_;
        }
        (*f)(i);
        std::lock_guard<std::mutex> lock(mu_);
        if (--pending_ == 0) cv_done_.notify_one();
    }
}
