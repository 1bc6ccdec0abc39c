// args-unsupported.cpp - the flags of llama.cpp's common/arg.cpp (its common, sampling, main/cli, server and
// speculative options, and a few older names) that `main` does not implement. The parser answers them with
// "not supported: FLAG" rather than "unknown argument: FLAG", so a llama.cpp command line fails plainly.
#include "args.h"

#include <string_view>
#include <unordered_set>

bool llm_cli_is_unsupported(const std::string & flag) {
    static const std::unordered_set<std::string_view> k_flags = {
        // information, logging
        "--version", "-cl", "--cache-list", "--completion-bash", "--list-devices", "--log-file", "--log-colors",
        "-lv", "--verbosity", "--log-verbosity", "--log-prefix", "--log-timestamps", "--offline", "--perf",
        "--no-perf", "--show-timings", "--no-show-timings", "--simple-io", "-ld", "--logdir",
        // threads and CPU placement
        "-tb", "--threads-batch", "-C", "--cpu-mask", "-Cr", "--cpu-range", "--cpu-strict", "--prio", "--poll",
        "-Cb", "--cpu-mask-batch", "-Crb", "--cpu-range-batch", "--cpu-strict-batch", "--prio-batch",
        "--poll-batch", "--numa",
        // context, KV cache, batching
        "-ub", "--ubatch-size", "--swa-full", "--ctx-checkpoints", "--swa-checkpoints", "--cache-ram", "-cram",
        "--kv-unified", "-kvu", "-kvo", "--kv-offload", "-nkvo", "--no-kv-offload", "-dt", "--defrag-thold",
        "-ns", "--sequences", "-cb", "--cont-batching", "-nocb", "--no-cont-batching", "--cache-reuse",
        "-gan", "--grp-attn-n", "-gaw", "--grp-attn-w", "-dkvc", "--dump-kv-cache",
        // RoPE scaling
        "--rope-scaling", "--rope-scale", "--rope-freq-base", "--rope-freq-scale", "--yarn-orig-ctx",
        "--yarn-ext-factor", "--yarn-attn-factor", "--yarn-beta-slow", "--yarn-beta-fast",
        // prompt sources and caches
        "--in-file", "-ptc", "--print-token-count", "--prompt-cache", "--prompt-cache-all", "--prompt-cache-ro",
        "--spm-infill", "--chat-template-kwargs", "--reasoning-format", "--reasoning-budget",
        "--cfg-negative-prompt", "--cfg-negative-prompt-file", "--cfg-scale",
        // samplers
        "--samplers", "--sampling-seq", "--sampler-seq", "--top-nsigma", "--xtc-probability", "--xtc-threshold",
        "--typical", "--presence-penalty", "--frequency-penalty", "--dry-multiplier", "--dry-base",
        "--dry-allowed-length", "--dry-penalty-last-n", "--dry-sequence-breaker", "--dynatemp-range",
        "--dynatemp-exp", "--mirostat", "--mirostat-lr", "--mirostat-ent", "-l", "--logit-bias", "--tfs",
        "--penalize-nl", "--no-penalize-nl",
        // embeddings
        "--pooling", "--attention", "--embedding", "--embeddings", "--reranking", "--rerank",
        // devices, offload, tensor placement
        "-dev", "--device", "-ot", "--override-tensor", "-cmoe",
        "--cpu-moe", "-ncmoe", "--n-cpu-moe", "--no-host", "--op-offload",
        "--no-op-offload", "-fit", "--fit", "-fitt", "--fit-target", "-fitc", "--fit-ctx", "--rpc",
        // model sources and edits
        "-mu", "--model-url", "-dr", "--docker-repo", "-hf", "-hfr", "--hf-repo", "-hff", "--hf-file", "-hfd",
        "-hfrd", "--hf-repo-draft", "-hfv", "-hfrv", "--hf-repo-v", "-hffv", "--hf-file-v", "-hft", "--hf-token",
        "--check-tensors", "--override-kv", "--lora", "--lora-scaled", "--lora-base", "--lora-init-without-apply",
        "--control-vector", "--control-vector-scaled", "--control-vector-layer-range",
        // multimodal, audio
        "-mm", "--mmproj", "-mmu", "--mmproj-url", "--mmproj-auto", "--no-mmproj", "--no-mmproj-auto",
        "--mmproj-offload", "--no-mmproj-offload", "--image", "--audio", "--image-min-tokens",
        "--image-max-tokens", "-mv", "--model-vocoder", "--tts-use-guide-tokens", "--tts-speaker-file",
        // speculative decoding, lookup
        "-md", "--model-draft", "--draft-max", "--draft", "--draft-n", "--draft-min", "--draft-n-min",
        "--draft-p-split", "--draft-p-min", "-ps", "--p-split", "-cd", "--ctx-size-draft", "-devd",
        "--device-draft", "-ngld", "--gpu-layers-draft", "--n-gpu-layers-draft", "--spec-replace", "-ctkd",
        "--cache-type-k-draft", "-ctvd", "--cache-type-v-draft", "-td", "--threads-draft", "-tbd",
        "--threads-batch-draft", "-Cd", "--cpu-mask-draft", "-Crd", "--cpu-range-draft", "--cpu-strict-draft",
        "--prio-draft", "--poll-draft", "-Cbd", "--cpu-mask-batch-draft", "-Crbd", "--cpu-range-batch-draft",
        "--cpu-strict-batch-draft", "--prio-batch-draft", "--poll-batch-draft", "-otd", "--override-tensor-draft",
        "-cmoed", "--cpu-moe-draft", "-ncmoed", "--n-cpu-moe-draft", "-lcs", "--lookup-cache-static", "-lcd",
        "--lookup-cache-dynamic",
        // server (llama-server's own flags)
        "-a", "--alias", "--host", "--port", "--path", "--api-prefix", "--webui", "--no-webui", "--api-key",
        "--api-key-file", "--ssl-key-file", "--ssl-cert-file", "-to", "--timeout", "--threads-http", "--metrics",
        "--props", "--slots", "--no-slots", "--slot-save-path", "--media-path", "--models-dir", "--models-preset",
        "--models-max", "--models-autoload", "--no-models-autoload", "--prefill-assistant",
        "--no-prefill-assistant", "-sps", "--slot-prompt-similarity",
    };
    return k_flags.count(flag) != 0;
}
