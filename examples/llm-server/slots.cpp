// slots.cpp - the continuous-batching scheduler (see slots.h).
#include "slots.h"

#include "vocab.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

using srv_clock = std::chrono::steady_clock;

static double ms_between(srv_clock::time_point a, srv_clock::time_point b) {
    return std::chrono::duration<double, std::milli>(b - a).count();
}

// ---- srv_task ----------------------------------------------------------------------------------------

void srv_task::push(srv_event ev) {
    {
        std::lock_guard<std::mutex> lk(mu_);
        events_.push_back(std::move(ev));
    }
    cv_.notify_one();
}

bool srv_task::pop(srv_event & ev, std::chrono::milliseconds timeout) {
    std::unique_lock<std::mutex> lk(mu_);
    if (!cv_.wait_for(lk, timeout, [&] { return !events_.empty(); })) return false;
    ev = std::move(events_.front());
    events_.pop_front();
    return true;
}

// ---- stop strings ------------------------------------------------------------------------------------

size_t srv_find_stop(const std::string & text, size_t from, const std::vector<std::string> & stops,
                     size_t * partial) {
    size_t best = std::string::npos;
    for (const auto & s : stops) {
        if (s.empty()) continue;
        const size_t p = text.find(s, from);
        if (p < best) best = p;
    }
    *partial = 0;
    if (best != std::string::npos) return best;
    const size_t n_tail = text.size() > from ? text.size() - from : 0;
    for (const auto & s : stops) {
        for (size_t k = std::min(s.size() - (s.empty() ? 0 : 1), n_tail); k > *partial; --k) {
            if (text.compare(text.size() - k, k, s, 0, k) == 0) {
                *partial = k;
                break;
            }
        }
    }
    return std::string::npos;
}

// ---- slots -------------------------------------------------------------------------------------------

struct srv_scheduler::slot {
    int id = 0;  // its sequence id
    enum state_t { IDLE, PROMPT, GEN } state = IDLE;
    std::vector<int32_t>      cache;  // tokens in the KV cache, positions 0 .. size-1 (kept while idle)
    std::shared_ptr<srv_task> task;
    std::unique_ptr<llm_sampler>      smp;
    std::unique_ptr<llm_detok_stream> detok;
    int32_t  next = -1;     // GEN: sampled, goes into the next batch
    int      i_batch = -1;  // row of this step's batch whose logits are this slot's
    int      n_decoded = 0;
    std::string text;       // output so far (cut at a stop string)
    size_t   n_sent = 0;    // bytes of text already sent
    struct pending_token {
        size_t         begin, end;  // its bytes in text
        srv_token_info info;
    };
    std::vector<pending_token> pending;  // n_probs: tokens not sent yet
    srv_timings t;
    bool     prompt_started = false;
    srv_clock::time_point t_prompt_start, t_prompt_end;
    uint64_t last_used = 0;
};

srv_scheduler::srv_scheduler(llm_context * ctx, const llm_vocab & vocab, const srv_scheduler_params & params) :
    ctx_(ctx), vocab_(vocab), n_batch_(std::max(1, params.n_batch)) {
    const int n = std::max(1, params.n_slots);
    n_slot_ctx_ = llm_n_ctx(ctx) / n;
    for (int i = 0; i < n; ++i) {
        slots_.push_back(std::make_unique<slot>());
        slots_.back()->id = i;
    }
}

srv_scheduler::~srv_scheduler() { stop(); }

void srv_scheduler::start() {
    if (!thread_.joinable()) thread_ = std::thread([this] { loop(); });
}

void srv_scheduler::stop() {
    {
        std::lock_guard<std::mutex> lk(mu_);
        if (stop_ && !thread_.joinable()) return;
        stop_ = true;
    }
    cv_.notify_all();
    if (thread_.joinable()) thread_.join();
    std::lock_guard<std::mutex> lk(mu_);
    for (auto & t : queue_) {
        srv_event ev;
        ev.final = true;
        ev.error = "the server is shutting down";
        t->push(std::move(ev));
    }
    queue_.clear();
    for (auto & s : slots_) {
        if (s->task) finish(*s, "", "the server is shutting down");
    }
}

std::shared_ptr<srv_task> srv_scheduler::submit(srv_request req) {
    std::shared_ptr<srv_task> t;
    {
        std::lock_guard<std::mutex> lk(mu_);
        t = std::make_shared<srv_task>(next_id_++, std::move(req));
        if (stop_) {
            srv_event ev;
            ev.final = true;
            ev.error = "the server is shutting down";
            t->push(std::move(ev));
            return t;
        }
        queue_.push_back(t);
        stats_.requests_queued = (int) queue_.size();
    }
    cv_.notify_one();
    return t;
}

void srv_scheduler::loop() {
    for (;;) {
        {
            std::unique_lock<std::mutex> lk(mu_);
            for (;;) {
                if (stop_) return;
                assign_waiting();
                const bool busy = std::any_of(slots_.begin(), slots_.end(), [](const auto & s) { return s->task != nullptr; });
                if (busy) break;
                cv_.wait(lk);
            }
        }
        step();
    }
}

static size_t common_prefix(const std::vector<int32_t> & a, const std::vector<int32_t> & b) {
    size_t n = 0;
    while (n < a.size() && n < b.size() && a[n] == b[n]) ++n;
    return n;
}

void srv_scheduler::assign_waiting() {
    for (auto it = queue_.begin(); it != queue_.end();) {
        std::shared_ptr<srv_task> t = *it;
        if (t->cancelled()) {  // the client left while waiting
            it = queue_.erase(it);
            stats_.requests_total++;
            stats_.requests_cancelled++;
            fprintf(stderr, "llm-server: task %d cancelled while queued\n", t->id);
            continue;
        }
        // the idle slot with the longest cached prefix of this prompt; the least recently used on ties
        slot * best = nullptr;
        size_t best_n = 0;
        for (auto & s : slots_) {
            if (s->task) continue;
            const size_t n = common_prefix(s->cache, t->req.prompt);
            if (!best || n > best_n || (n == best_n && s->last_used < best->last_used)) {
                best = s.get();
                best_n = n;
            }
        }
        if (!best) break;  // every slot busy: the rest wait, in order
        it = queue_.erase(it);
        begin(*best, std::move(t));
    }
    stats_.requests_queued = (int) queue_.size();
    stats_.requests_processing =
        (int) std::count_if(slots_.begin(), slots_.end(), [](const auto & s) { return s->task != nullptr; });
}

void srv_scheduler::begin(slot & s, std::shared_ptr<srv_task> task) {
    const std::vector<int32_t> & prompt = task->req.prompt;
    s.task = std::move(task);
    s.last_used = ++use_counter_;
    s.t = srv_timings{};
    s.n_decoded = 0;
    s.text.clear();
    s.n_sent = 0;
    s.pending.clear();
    s.next = -1;
    s.i_batch = -1;
    s.prompt_started = false;
    if (prompt.empty() || (int) prompt.size() > n_slot_ctx_) {  // the HTTP side checks this first
        finish(s, "", "the prompt does not fit in a slot");
        return;
    }
    // keep the cached prefix; at least the prompt's last token is evaluated again (its logits are needed)
    const size_t n_keep = std::min(common_prefix(s.cache, prompt), prompt.size() - 1);
    if (n_keep < s.cache.size()) {
        llm_kv_seq_rm(ctx_, s.id, (int) n_keep, -1);
        s.cache.resize(n_keep);
    }
    s.t.cache_n = (int) n_keep;
    s.t.prompt_n = (int) (prompt.size() - n_keep);
    s.smp = std::make_unique<llm_sampler>(s.task->req.sampling);
    for (int32_t tok : prompt) s.smp->accept(tok);  // the repetition penalty sees the prompt, as main does
    s.detok = std::make_unique<llm_detok_stream>(vocab_);
    s.state = slot::PROMPT;
}

void srv_scheduler::drop(slot & s) {
    fprintf(stderr, "llm-server: task %d slot %d: cancelled by the client after %d tokens; its cells freed\n",
            s.task->id, s.id, s.n_decoded);
    llm_kv_seq_rm(ctx_, s.id, 0, -1);
    s.cache.clear();
    s.task.reset();
    s.smp.reset();
    s.detok.reset();
    s.pending.clear();
    s.state = slot::IDLE;
    stats_.requests_total++;
    stats_.requests_cancelled++;
}

void srv_scheduler::step() {
    for (auto & s : slots_) {
        if (s->task && s->task->cancelled()) drop(*s);
    }
    batch_.clear();
    // 1. one token for every generating slot
    int n_gen = 0;
    for (auto & s : slots_) {
        s->i_batch = -1;
        if (!s->task || s->state != slot::GEN) continue;
        s->i_batch = batch_.size();
        batch_.add(s->next, (int32_t) s->cache.size(), s->id, true);
        s->cache.push_back(s->next);
        ++n_gen;
    }
    // 2. prompt chunks, oldest request first, until n_batch tokens
    std::vector<slot *> prompting;
    for (auto & s : slots_) {
        if (s->task && s->state == slot::PROMPT) prompting.push_back(s.get());
    }
    std::sort(prompting.begin(), prompting.end(), [](slot * a, slot * b) { return a->task->id < b->task->id; });
    const auto t0 = srv_clock::now();
    int n_prompt = 0;
    for (slot * s : prompting) {
        const std::vector<int32_t> & prompt = s->task->req.prompt;
        int budget = n_batch_ - batch_.size();
        if (budget <= 0) break;
        if (!s->prompt_started) {
            s->prompt_started = true;
            s->t_prompt_start = t0;
        }
        while (budget-- > 0 && s->cache.size() < prompt.size()) {
            const bool last = s->cache.size() + 1 == prompt.size();
            if (last) s->i_batch = batch_.size();
            batch_.add(prompt[s->cache.size()], (int32_t) s->cache.size(), s->id, last);
            s->cache.push_back(prompt[s->cache.size()]);
            ++n_prompt;
        }
    }
    if (batch_.size() == 0) return;

    std::string err;
    const bool ok = llm_decode_batch(ctx_, batch_, &err);
    const auto t1 = srv_clock::now();
    const double dt = ms_between(t0, t1);
    stats_.steps_total++;
    if (n_prompt > 0) stats_.t_prompt_steps_ms.fetch_add(dt);
    if (n_gen > 0) stats_.t_decode_steps_ms.fetch_add(dt);
    stats_.tokens_prompt_total += n_prompt;
    if (!ok) {
        fprintf(stderr, "llm-server: decode of %d tokens failed: %s\n", batch_.size(), err.c_str());
        for (auto & s : slots_) {
            if (!s->task) continue;
            const bool in_batch = std::find(batch_.seq_id.begin(), batch_.seq_id.end(), s->id) != batch_.seq_id.end();
            if (!in_batch) continue;
            llm_kv_seq_rm(ctx_, s->id, 0, -1);  // what the failed step wrote is unknown: start over
            s->cache.clear();
            finish(*s, "", "decode failed: " + err);
        }
    } else {
        for (auto & s : slots_) {
            if (!s->task || s->i_batch < 0) continue;
            if (s->state == slot::PROMPT) {
                s->state = slot::GEN;
                s->t_prompt_end = t1;
                s->t.prompt_ms = ms_between(s->t_prompt_start, t1);
                stats_.tokens_cached_total += s->t.cache_n;
            }
            on_token(*s, llm_get_logits_batch(ctx_, s->i_batch));
        }
    }
    stats_.kv_cells_used = llm_kv_cells_used(ctx_);
    std::lock_guard<std::mutex> lk(mu_);
    stats_.requests_processing =
        (int) std::count_if(slots_.begin(), slots_.end(), [](const auto & s) { return s->task != nullptr; });
}

void srv_scheduler::on_token(slot & s, const float * logits) {
    const int32_t n_vocab = vocab_.n_vocab();
    const srv_request & req = s.task->req;
    const int32_t id = s.smp->sample(logits, n_vocab);
    s.smp->accept(id);
    s.n_decoded++;
    stats_.tokens_predicted_total++;

    if (vocab_.is_eog(id)) {  // not part of the text
        finish(s, "stop");
        return;
    }
    const size_t begin = s.text.size();
    s.text += s.detok->push(id);
    if (req.n_probs >= 0) {
        // log-softmax of the model's distribution (before the sampler's top-k/top-p/temperature)
        float mx = logits[0];
        for (int32_t i = 1; i < n_vocab; ++i) mx = std::max(mx, logits[i]);
        double sum = 0;
        for (int32_t i = 0; i < n_vocab; ++i) sum += std::exp((double) (logits[i] - mx));
        const float lse = mx + (float) std::log(sum);
        srv_token_info info{id, logits[id] - lse, {}};
        const int n_top = std::min<int>(req.n_probs, n_vocab);
        std::vector<int32_t> idx(n_vocab);
        for (int32_t i = 0; i < n_vocab; ++i) idx[i] = i;
        std::partial_sort(idx.begin(), idx.begin() + n_top, idx.end(), [&](int32_t a, int32_t b) {
            return logits[a] > logits[b] || (logits[a] == logits[b] && a < b);
        });
        for (int i = 0; i < n_top; ++i) info.top.push_back({idx[i], logits[idx[i]] - lse});
        s.pending.push_back({begin, s.text.size(), std::move(info)});
    }
    size_t partial = 0;
    if (!req.stop.empty()) {
        const size_t at = srv_find_stop(s.text, s.n_sent, req.stop, &partial);
        if (at != std::string::npos) {
            s.text.resize(at);
            s.detok.reset();  // what it still holds comes after the stop string
            finish(s, "stop");
            return;
        }
    }
    if (req.n_predict >= 0 && s.n_decoded >= req.n_predict) {
        finish(s, "length");
        return;
    }
    if ((int) s.cache.size() >= n_slot_ctx_) {  // no room to evaluate this token: the slot is full
        finish(s, "length");
        return;
    }
    s.next = id;
    // send what can no longer turn out to start a stop string
    const size_t upto = s.text.size() - partial;
    if (upto > s.n_sent || (!s.pending.empty() && s.pending.front().end <= upto)) {
        srv_event ev;
        ev.text = s.text.substr(s.n_sent, upto - s.n_sent);
        s.n_sent = upto;
        size_t k = 0;
        while (k < s.pending.size() && s.pending[k].end <= upto) {
            ev.tokens.push_back(std::move(s.pending[k].info));
            ++k;
        }
        s.pending.erase(s.pending.begin(), s.pending.begin() + k);
        s.task->push(std::move(ev));
    }
}

void srv_scheduler::finish(slot & s, const char * reason, const std::string & error) {
    const auto t_end = srv_clock::now();
    srv_event ev;
    ev.final = true;
    ev.error = error;
    if (error.empty()) {
        ev.finish_reason = reason;
        bool stopped = false;
        if (s.detok) {  // an unfinished UTF-8 tail becomes U+FFFD; it may complete a stop string too
            s.text += s.detok->flush();
            size_t partial = 0;
            const size_t at = s.task->req.stop.empty()
                                  ? std::string::npos
                                  : srv_find_stop(s.text, s.n_sent, s.task->req.stop, &partial);
            if (at != std::string::npos) {
                s.text.resize(at);
                stopped = true;
            }
        }
        if (stopped) ev.finish_reason = "stop";
        ev.text = s.text.size() > s.n_sent ? s.text.substr(s.n_sent) : std::string();
        for (auto & p : s.pending) {
            if (p.begin < s.text.size()) ev.tokens.push_back(std::move(p.info));
        }
    }
    s.t.predicted_n = s.n_decoded;
    if (s.state == slot::GEN) s.t.predicted_ms = ms_between(s.t_prompt_end, t_end);
    ev.timings = s.t;
    ev.n_prompt = (int) s.task->req.prompt.size();
    ev.slot = s.id;
    const double tps = s.t.predicted_ms > 0 ? 1e3 * s.t.predicted_n / s.t.predicted_ms : 0.0;
    fprintf(stderr,
            "llm-server: task %d slot %d: prompt %d tokens (%d cached, %d evaluated in %.1f ms), %d generated in %.1f "
            "ms (%.1f t/s), %s%s\n",
            s.task->id, s.id, ev.n_prompt, s.t.cache_n, s.t.prompt_n, s.t.prompt_ms, s.t.predicted_n,
            s.t.predicted_ms, tps, error.empty() ? ev.finish_reason.c_str() : "error: ", error.c_str());
    stats_.requests_total++;
    if (!error.empty()) stats_.requests_failed++;
    s.task->push(std::move(ev));
    s.task.reset();
    s.smp.reset();
    s.detok.reset();
    s.pending.clear();
    s.text.clear();
    s.n_sent = 0;
    s.state = slot::IDLE;  // the cache stays: a later prompt with the same prefix reuses it
}
