// vocab.h - Llama tokenizers from a GGUF's tokenizer.ggml.* keys, matching llama.cpp token for token:
// SPM ("llama": SentencePiece-style score merges + <0xXX> byte fallback) and byte-level BPE ("gpt2",
// pre-tokenizers llama3/llama-bpe, gpt-2 and default).
//
//   std::string err;
//   gguf_context * g = gguf_init_from_file("model.gguf", { /*no_alloc=*/true, nullptr }, &err);
//   llm_vocab vocab;
//   if (!g || !llm_vocab_load(vocab, g, &err)) { fprintf(stderr, "error: %s\n", err.c_str()); return 1; }
//   gguf_free(g);                                                   // the vocab keeps its own copies
//   std::vector<int32_t> ids = llm_tokenize(vocab, "Hello world", /*add_special=*/true, /*parse_special=*/false);
//   std::string text = llm_detokenize(vocab, ids);                 // BOS renders as "" unless unparse_special
//
//   llm_detok_stream stream(vocab);                                 // generation: valid UTF-8 chunks only
//   for (int32_t id : generated) fputs(stream.push(id).c_str(), stdout);
//   fputs(stream.flush().c_str(), stdout);
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

struct gguf_context;

enum llm_vocab_type : int32_t {
    LLM_VOCAB_TYPE_SPM = 0,  // tokenizer.ggml.model = "llama"
    LLM_VOCAB_TYPE_BPE = 1,  // tokenizer.ggml.model = "gpt2" (byte-level)
};

enum llm_vocab_pre : int32_t {  // BPE pre-tokenizer (tokenizer.ggml.pre)
    LLM_VOCAB_PRE_DEFAULT = 0,  // "default" or missing (and always for SPM)
    LLM_VOCAB_PRE_LLAMA3  = 1,  // "llama3", "llama-v3", "llama-bpe", "falcon3"
    LLM_VOCAB_PRE_GPT2    = 2,  // "gpt-2"
};

// GGUF tokenizer.ggml.token_type values (as llama.cpp's llama_token_type)
enum llm_token_type : int32_t {
    LLM_TOKEN_TYPE_UNDEFINED    = 0,
    LLM_TOKEN_TYPE_NORMAL       = 1,
    LLM_TOKEN_TYPE_UNKNOWN      = 2,
    LLM_TOKEN_TYPE_CONTROL      = 3,
    LLM_TOKEN_TYPE_USER_DEFINED = 4,
    LLM_TOKEN_TYPE_UNUSED       = 5,
    LLM_TOKEN_TYPE_BYTE         = 6,
};

struct llm_token_data {
    std::string    text;   // as stored in the GGUF (SPM: spaces as U+2581; BPE: byte-level code points)
    float          score = 0.0f;
    llm_token_type type  = LLM_TOKEN_TYPE_NORMAL;
};

// unordered_map<std::string, V> that can be searched with a std::string_view (no temporary strings)
struct llm_string_hash {
    using is_transparent = void;
    size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
};
template <typename V> using llm_string_map = std::unordered_map<std::string, V, llm_string_hash, std::equal_to<>>;

struct llm_vocab {
    llm_vocab_type type = LLM_VOCAB_TYPE_SPM;
    llm_vocab_pre  pre  = LLM_VOCAB_PRE_DEFAULT;
    std::string    model_name;  // tokenizer.ggml.model
    std::string    pre_name;    // tokenizer.ggml.pre ("" if absent)

    std::vector<llm_token_data>              tokens;       // [n_vocab]
    llm_string_map<int32_t>     token_to_id;
    llm_string_map<int32_t>     merge_rank;   // BPE: "left right" -> rank (index in tokenizer.ggml.merges)
    std::vector<int32_t>        byte_ids;     // [256] SPM: <0xXX> token; BPE: the byte-level char's token; -1

    // special ids, -1 if none
    int32_t bos = -1, eos = -1, eot = -1, eom = -1, unk = -1, pad = -1;
    std::vector<int32_t> eog_ids;         // sorted: ids that end generation
    std::vector<int32_t> special_tokens;  // control/user-defined/unknown ids, longest text first (partition order)

    bool add_bos          = false;  // tokenizer.ggml.add_bos_token (default: SPM true, llama3 true)
    bool add_eos          = false;  // tokenizer.ggml.add_eos_token
    bool add_space_prefix = false;  // tokenizer.ggml.add_space_prefix (default: SPM true, BPE false)
    bool clean_spaces     = false;  // detokenize removes " ," " ." etc. (BPE: true, as llama.cpp/HF)
    bool ignore_merges    = false;  // BPE llama3: a word that is itself a token is not merged
    std::string chat_template;      // tokenizer.chat_template, "" if absent

    std::vector<std::string> pieces;  // [n_vocab] token_to_piece(id, render_special=true), cached

    int32_t n_vocab() const { return (int32_t) tokens.size(); }
    bool    valid_id(int32_t id) const { return id >= 0 && id < n_vocab(); }
    const std::string & token_text(int32_t id) const;  // id must be valid
    llm_token_type token_type(int32_t id) const;
    bool    is_control(int32_t id) const;  // control (or unknown) token: rendered "" unless render_special
    bool    is_eog(int32_t id) const;
    int32_t find_token(std::string_view text) const;  // exact token text -> id, -1 if none
    int32_t token_bos() const { return bos; }
    int32_t token_eos() const { return eos; }
    int32_t token_eot() const { return eot; }
    const char * type_name() const { return type == LLM_VOCAB_TYPE_SPM ? "SPM" : "BPE"; }
};

// Reads and validates the tokenizer.ggml.* keys of g. On any problem returns false with one line in *err
// naming the key and what is wrong (vocab is then unspecified). Never aborts on bad input.
bool llm_vocab_load(llm_vocab & vocab, const gguf_context * g, std::string * err);

// Text -> ids, as llama.cpp's llama_tokenize:
//   add_special:   prepend BOS if vocab.add_bos (and append EOS if vocab.add_eos)
//   parse_special: control tokens written in the text ("<|eot_id|>", "<s>") become their ids; when false
//                  they are tokenized as plain text. User-defined tokens are always split out (as llama.cpp
//                  and HF tokenizers do).
// Invalid UTF-8: SPM passes the bytes through <0xXX> byte fallback; BPE sees U+FFFD per invalid byte
// (llama.cpp's behaviour). Never throws.
std::vector<int32_t> llm_tokenize(const llm_vocab & vocab, std::string_view text, bool add_special,
                                  bool parse_special);

// The raw bytes of one token: SPM "▁" -> " " and <0xXX> -> the byte; BPE byte-level code points -> bytes;
// control/unknown tokens give "" unless render_special (then their text). Invalid id -> "".
std::string llm_token_to_piece(const llm_vocab & vocab, int32_t id, bool render_special);

// Ids -> text, as llama.cpp's llama_detokenize: the first piece loses one leading space when
// vocab.add_space_prefix (SPM); remove_special drops a leading BOS (then keeping its space) and a trailing
// EOS when the vocab adds them; unparse_special renders control tokens; vocab.clean_spaces (BPE) applies
// HF's clean_up_tokenization (" ," -> ",", " 's" -> "'s", ...).
std::string llm_detokenize(const llm_vocab & vocab, const std::vector<int32_t> & ids, bool remove_special = false,
                           bool unparse_special = false);

// Streaming detokenizer for generation: push() returns only complete, valid UTF-8; a multi-byte character
// split over byte tokens is held back until its last byte arrives. Bytes that cannot be part of a valid
// sequence become U+FFFD at once; flush() turns a still-incomplete tail into U+FFFD (one per call).
// No leading-space stripping and no clean_spaces (the text continues a prompt).
struct llm_detok_stream {
    explicit llm_detok_stream(const llm_vocab & vocab, bool render_special = false) :
        vocab(vocab), render_special(render_special) {}
    std::string push(int32_t id);
    std::string flush();

  private:
    const llm_vocab & vocab;
    bool              render_special;
    std::string       pending;  // incomplete UTF-8 tail (< 4 bytes)
};

// Valid UTF-8 prefix handling used by llm_detok_stream: appends to out the valid part of buf, replaces
// invalid bytes with U+FFFD, and leaves in buf only an incomplete (but so far valid) trailing sequence.
void llm_utf8_take_complete(std::string & buf, std::string & out);

// internal: one tokenizer pass over a raw text fragment (no special tokens), appending to out
void llm_tokenize_spm(const llm_vocab & vocab, std::string_view text, std::vector<int32_t> & out);
void llm_tokenize_bpe(const llm_vocab & vocab, std::string_view text, std::vector<int32_t> & out);
int32_t llm_byte_to_token(const llm_vocab & vocab, uint8_t byte);
