// slots.h - the continuous-batching scheduler of llm-server: N slots (sequence ids 0..N-1 of one
// llm_context), a FIFO of waiting tasks, and one thread that runs the steps.
//
// Each step builds one llm_batch: the next token of every generating slot first, then chunks of
// waiting prompts until n_batch tokens are in it; one llm_decode_batch; then every slot whose token
// got logits samples with its own llm_sampler and sends the new text to its task's queue, which the
// HTTP thread of the request reads.
//
//   srv_scheduler sched(ctx, vocab, {.n_slots = 4, .n_batch = 512});
//   sched.start();
//   srv_request r;  r.prompt = tokens;  r.n_predict = 32;
//   std::shared_ptr<srv_task> t = sched.submit(std::move(r));
//   srv_event ev;
//   while (t->pop(ev, std::chrono::milliseconds(100)) || !ev.final) { ... ev.text ... }
//   sched.stop();
#pragma once

#include "llm.h"
#include "sampling.h"

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

// what one request asks the scheduler for
struct srv_request {
    std::vector<int32_t>     prompt;          // the whole prompt (BOS included)
    llm_sampler_params       sampling;
    int                      n_predict = -1;  // most tokens to generate (-1: until EOG or the slot is full)
    std::vector<std::string> stop;            // stop strings: not part of the output
    int                      n_probs = -1;    // log-probability of each generated token and its n_probs
                                              // most likely alternatives (-1: none)
};

struct srv_token_logprob {
    int32_t id;
    float   logprob;
};

// one generated token with its log-probability and the n_probs most likely alternatives
struct srv_token_info {
    int32_t                        id;
    float                          logprob;
    std::vector<srv_token_logprob> top;  // [n_probs], most likely first
};

struct srv_timings {
    int    prompt_n = 0;      // prompt tokens evaluated (after the reused prefix)
    int    cache_n = 0;       // prompt tokens reused from the slot's cache
    int    predicted_n = 0;   // tokens generated (an end-of-generation token included)
    double prompt_ms = 0;     // first prompt chunk in a batch .. logits of its last token
    double predicted_ms = 0;  // then until the last token
};

// one message from the scheduler to the request's thread
struct srv_event {
    std::string                 text;           // new output text (valid UTF-8; may be empty)
    std::vector<srv_token_info> tokens;         // the tokens that text completes (n_probs >= 0 only)
    bool                        final = false;  // last event of the task
    std::string                 finish_reason;  // final: "stop" or "length" ("" with error)
    std::string                 error;          // final: non-empty if the task failed
    srv_timings                 timings;        // final
    int                         n_prompt = 0;   // final: tokens of the whole prompt
    int                         slot = -1;      // final
};

// A submitted request: the scheduler pushes events, the HTTP thread pops them. cancel() (client gone)
// makes the scheduler drop the task and free its slot's cells at its next step.
class srv_task {
  public:
    srv_task(int id, srv_request req) : id(id), req(std::move(req)) {}
    const int         id;
    const srv_request req;

    void push(srv_event ev);
    // waits up to timeout for the next event; false on timeout
    bool pop(srv_event & ev, std::chrono::milliseconds timeout);
    void cancel() { cancelled_ = true; }
    bool cancelled() const { return cancelled_; }

  private:
    std::mutex            mu_;
    std::condition_variable cv_;
    std::deque<srv_event> events_;
    std::atomic<bool>     cancelled_{false};
};

// counters for /metrics (written by the scheduler thread, read by any)
struct srv_stats {
    std::atomic<uint64_t> requests_total{0};       // tasks finished (any way)
    std::atomic<uint64_t> requests_cancelled{0};   // client went away first
    std::atomic<uint64_t> requests_failed{0};      // decode errors
    std::atomic<uint64_t> tokens_prompt_total{0};  // prompt tokens evaluated
    std::atomic<uint64_t> tokens_cached_total{0};  // prompt tokens reused from a slot's cache
    std::atomic<uint64_t> tokens_predicted_total{0};
    std::atomic<uint64_t> steps_total{0};
    std::atomic<double>   t_prompt_steps_ms{0};    // wall time of steps that evaluated prompt tokens
    std::atomic<double>   t_decode_steps_ms{0};    // wall time of steps that decoded generated tokens
    std::atomic<int>      requests_processing{0};  // slots busy
    std::atomic<int>      requests_queued{0};      // waiting for a slot
    std::atomic<int>      kv_cells_used{0};
};

struct srv_scheduler_params {
    int n_slots = 1;
    int n_batch = 512;
};

class srv_scheduler {
  public:
    srv_scheduler(llm_context * ctx, const llm_vocab & vocab, const srv_scheduler_params & params);
    ~srv_scheduler();
    srv_scheduler(const srv_scheduler &) = delete;
    srv_scheduler & operator=(const srv_scheduler &) = delete;

    void start();
    void stop();  // finishes nothing: waiting requests get an error event
    std::shared_ptr<srv_task> submit(srv_request req);

    int n_slots() const { return (int) slots_.size(); }
    int n_slot_ctx() const { return n_slot_ctx_; }  // positions one slot may hold: n_ctx / n_slots
    int n_ctx() const { return llm_n_ctx(ctx_); }
    const srv_stats & stats() const { return stats_; }

  private:
    struct slot;
    void loop();
    void assign_waiting();                  // under mu_
    void begin(slot & s, std::shared_ptr<srv_task> task);
    void step();
    void on_token(slot & s, const float * logits);
    void finish(slot & s, const char * reason, const std::string & error = "");
    void drop(slot & s);                    // cancelled: forget the slot's cells

    llm_context *     ctx_;
    const llm_vocab & vocab_;
    int               n_batch_;
    int               n_slot_ctx_;
    std::vector<std::unique_ptr<slot>> slots_;
    llm_batch         batch_;

    std::mutex              mu_;
    std::condition_variable cv_;
    std::deque<std::shared_ptr<srv_task>> queue_;
    bool                    stop_ = false;
    int                     next_id_ = 1;
    uint64_t                use_counter_ = 0;
    std::thread             thread_;
    srv_stats               stats_;
};

// Earliest occurrence at or after `from` of any of stops in text (npos if none); *partial gets the length
// of the longest tail of text (after from) that begins one of the stop strings (held back while streaming).
size_t srv_find_stop(const std::string & text, size_t from, const std::vector<std::string> & stops,
                     size_t * partial);
