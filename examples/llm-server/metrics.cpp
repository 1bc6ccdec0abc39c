// metrics.cpp - GET /metrics in Prometheus' text format: request and token counters, throughput,
// slots busy and queued, KV cells in use.
#include "server.h"

#include <cstdio>
#include <string>

static void metric(std::string & out, const char * name, const char * type, const char * help, double value) {
    char buf[512];
    snprintf(buf, sizeof(buf), "# HELP llm_%s %s\n# TYPE llm_%s %s\nllm_%s %.17g\n", name, help, name, type, name, value);
    out += buf;
}

std::string srv_metrics_text(const srv_state & st) {
    const srv_stats & s = st.sched.stats();
    const double t_prompt = s.t_prompt_steps_ms.load(), t_decode = s.t_decode_steps_ms.load();
    const double n_prompt = (double) s.tokens_prompt_total.load(), n_pred = (double) s.tokens_predicted_total.load();
    std::string out;
    metric(out, "requests_total", "counter", "Completion requests finished (any way).", (double) s.requests_total.load());
    metric(out, "requests_cancelled_total", "counter", "Requests whose client went away first.",
           (double) s.requests_cancelled.load());
    metric(out, "requests_failed_total", "counter", "Requests that failed in the model.", (double) s.requests_failed.load());
    metric(out, "prompt_tokens_total", "counter", "Prompt tokens evaluated.", n_prompt);
    metric(out, "prompt_tokens_cached_total", "counter", "Prompt tokens reused from a slot's cache.",
           (double) s.tokens_cached_total.load());
    metric(out, "tokens_predicted_total", "counter", "Tokens generated.", n_pred);
    metric(out, "steps_total", "counter", "Batches decoded.", (double) s.steps_total.load());
    metric(out, "prompt_tokens_seconds", "gauge", "Prompt tokens per second over the steps that evaluated prompts.",
           t_prompt > 0 ? 1e3 * n_prompt / t_prompt : 0.0);
    metric(out, "predicted_tokens_seconds", "gauge", "Generated tokens per second over the steps that generated (all slots).",
           t_decode > 0 ? 1e3 * n_pred / t_decode : 0.0);
    metric(out, "requests_processing", "gauge", "Slots busy with a request.", s.requests_processing.load());
    metric(out, "requests_queued", "gauge", "Requests waiting for a slot.", s.requests_queued.load());
    metric(out, "slots_total", "gauge", "Slots (-np).", st.sched.n_slots());
    metric(out, "kv_cells_used", "gauge", "KV cache cells in use (idle slots keep their prompt cache).",
           s.kv_cells_used.load());
    metric(out, "kv_cells_total", "gauge", "KV cache cells (-c).", st.sched.n_ctx());
    return out;
}
