// ggml-comm.cpp - host communicators (ggml-comm.h) and the kind-independent part of the API.
#include "ggml-comm.h"

void ggml_comm::barrier() {
    std::unique_lock<std::mutex> lock(mu);
    const uint64_t gen = generation;
    if (++arrived == n_ranks) {
        arrived = 0;
        ++generation;
        cv.notify_all();
        return;
    }
    cv.wait(lock, [&] { return generation != gen; });
}

ggml_comm * ggml_comm_host_new(int n_ranks) {
    if (n_ranks < 1) return nullptr;
    auto * c = new ggml_comm;
    c->kind = GGML_COMM_HOST;
    c->n_ranks = n_ranks;
    c->src.assign(n_ranks, nullptr);
    return c;
}

void ggml_comm_free(ggml_comm * comm) {
    if (!comm) return;
    if (comm->free_impl) comm->free_impl(comm);
    delete comm;
}

int ggml_comm_n_ranks(const ggml_comm * comm) { return comm->n_ranks; }
ggml_comm_kind ggml_comm_get_kind(const ggml_comm * comm) { return comm->kind; }
