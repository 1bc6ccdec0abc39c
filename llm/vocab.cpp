// vocab.cpp - loading the vocab from GGUF, special-token partitioning, tokenize/detokenize, streaming.
#include "vocab.h"

#include "ggml.h"
#include "gguf.h"
#include "unicode.h"

#include <algorithm>
#include <cstdarg>
#include <cstdio>

//
// llm_vocab helpers
//

const std::string & llm_vocab::token_text(int32_t id) const { return tokens.at(id).text; }

llm_token_type llm_vocab::token_type(int32_t id) const {
    return valid_id(id) ? tokens[id].type : LLM_TOKEN_TYPE_UNDEFINED;
}

bool llm_vocab::is_control(int32_t id) const {
    const llm_token_type t = token_type(id);
    return valid_id(id) && (t == LLM_TOKEN_TYPE_CONTROL || t == LLM_TOKEN_TYPE_UNKNOWN);
}

bool llm_vocab::is_eog(int32_t id) const { return id >= 0 && std::binary_search(eog_ids.begin(), eog_ids.end(), id); }

int32_t llm_vocab::find_token(std::string_view text) const {
    const auto it = token_to_id.find(text);
    return it == token_to_id.end() ? -1 : it->second;
}

int32_t llm_byte_to_token(const llm_vocab & vocab, uint8_t byte) {
    return vocab.byte_ids.size() == 256 && vocab.byte_ids[byte] >= 0 ? vocab.byte_ids[byte] : vocab.unk;
}

//
// loading
//

namespace {

bool fail(std::string * err, const char * fmt, ...) {
    char buf[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof(buf), fmt, ap);
    va_end(ap);
    if (err) {
        *err = buf;
    }
    return false;
}

// key lookups that check the stored type first (the gguf getters assert it)
struct kv_reader {
    const gguf_context * g;
    std::string *        err;

    int64_t find(const char * key) const { return gguf_find_key(g, key); }

    // -1: absent, 0: type error (err set), 1: ok
    int get_str(const char * key, std::string & out) const {
        const int64_t k = find(key);
        if (k < 0) {
            return -1;
        }
        if (gguf_get_kv_type(g, k) != GGUF_TYPE_STRING) {
            return fail(err, "%s has type %s, expected string", key, gguf_type_name(gguf_get_kv_type(g, k)));
        }
        out = gguf_get_val_str(g, k);
        return 1;
    }

    int get_bool(const char * key, bool & out) const {
        const int64_t k = find(key);
        if (k < 0) {
            return -1;
        }
        if (gguf_get_kv_type(g, k) != GGUF_TYPE_BOOL) {
            return fail(err, "%s has type %s, expected bool", key, gguf_type_name(gguf_get_kv_type(g, k)));
        }
        out = gguf_get_val_bool(g, k);
        return 1;
    }

    int get_int(const char * key, int64_t & out) const {
        const int64_t k = find(key);
        if (k < 0) {
            return -1;
        }
        switch (gguf_get_kv_type(g, k)) {
            case GGUF_TYPE_UINT8:  out = gguf_get_val_u8(g, k); return 1;
            case GGUF_TYPE_INT8:   out = gguf_get_val_i8(g, k); return 1;
            case GGUF_TYPE_UINT16: out = gguf_get_val_u16(g, k); return 1;
            case GGUF_TYPE_INT16:  out = gguf_get_val_i16(g, k); return 1;
            case GGUF_TYPE_UINT32: out = gguf_get_val_u32(g, k); return 1;
            case GGUF_TYPE_INT32:  out = gguf_get_val_i32(g, k); return 1;
            case GGUF_TYPE_UINT64: out = (int64_t) std::min<uint64_t>(gguf_get_val_u64(g, k), INT64_MAX); return 1;
            case GGUF_TYPE_INT64:  out = gguf_get_val_i64(g, k); return 1;
            default:
                return fail(err, "%s has type %s, expected an integer", key, gguf_type_name(gguf_get_kv_type(g, k)));
        }
    }

    // array of elem type with n elements (n == 0: any length); -1 absent, 0 error, 1 ok
    int get_arr(const char * key, gguf_type elem, size_t n, int64_t & k) const {
        k = find(key);
        if (k < 0) {
            return -1;
        }
        if (gguf_get_kv_type(g, k) != GGUF_TYPE_ARRAY) {
            return fail(err, "%s has type %s, expected an array", key, gguf_type_name(gguf_get_kv_type(g, k)));
        }
        if (gguf_get_arr_type(g, k) != elem) {
            return fail(err, "%s is an array of %s, expected %s", key, gguf_type_name(gguf_get_arr_type(g, k)),
                        gguf_type_name(elem));
        }
        if (n != 0 && gguf_get_arr_n(g, k) != n) {
            return fail(err, "%s has %zu elements, expected %zu (one per token)", key, gguf_get_arr_n(g, k), n);
        }
        return 1;
    }
};

bool is_eog_text(const std::string & t) {
    static const char * const names[] = { "<|eot_id|>", "<|im_end|>",    "<|end|>", "<end_of_turn>",
                                          "<|endoftext|>", "<|eom_id|>", "<EOT>",   "<|end_of_text|>" };
    return std::any_of(std::begin(names), std::end(names), [&](const char * n) { return t == n; });
}

std::string piece_for_cache(const llm_vocab & v, int32_t id) {
    const llm_token_data & td = v.tokens[id];
    switch (td.type) {
        case LLM_TOKEN_TYPE_CONTROL:
        case LLM_TOKEN_TYPE_UNKNOWN:
        case LLM_TOKEN_TYPE_USER_DEFINED: return td.text;
        case LLM_TOKEN_TYPE_NORMAL: break;
        case LLM_TOKEN_TYPE_BYTE:
            if (v.type == LLM_VOCAB_TYPE_SPM && td.text.size() == 6 && td.text.compare(0, 3, "<0x") == 0) {
                return std::string(1, (char) strtol(td.text.substr(3, 2).c_str(), nullptr, 16));
            }
            return "";
        default: return "";  // undefined/unused: rendered as nothing (as llama.cpp)
    }
    std::string out;
    if (v.type == LLM_VOCAB_TYPE_SPM) {  // U+2581 -> ' '
        for (size_t i = 0; i < td.text.size(); ++i) {
            if (td.text.compare(i, 3, "\xe2\x96\x81") == 0) {
                out += ' ';
                i += 2;
            } else {
                out += td.text[i];
            }
        }
        return out;
    }
    for (const uint32_t c : unicode_cpts_from_utf8(td.text)) {  // byte-level code points -> bytes
        const int b = unicode_utf8_to_byte(c);
        if (b >= 0) {
            out += (char) b;
        } else {  // not a byte-level character: llama.cpp's marker
            const std::string u = unicode_cpt_to_utf8(c);
            out += "[UNK_BYTE_0x";
            for (const char ch : u) {
                char hex[3];
                snprintf(hex, sizeof(hex), "%02x", (uint8_t) ch);
                out += hex;
            }
            out += td.text + "]";
        }
    }
    return out;
}

}  // namespace

bool llm_vocab_load(llm_vocab & v, const gguf_context * g, std::string * err) {
    v = llm_vocab();
    const kv_reader kv{ g, err };
    int rc;

    if ((rc = kv.get_str("tokenizer.ggml.model", v.model_name)) <= 0) {
        return rc < 0 ? fail(err, "tokenizer.ggml.model is missing") : false;
    }
    if (v.model_name == "llama") {
        v.type = LLM_VOCAB_TYPE_SPM;
    } else if (v.model_name == "gpt2") {
        v.type = LLM_VOCAB_TYPE_BPE;
    } else {
        return fail(err, "unknown tokenizer model '%s' (tokenizer.ggml.model; supported: llama, gpt2)",
                    v.model_name.c_str());
    }
    if (kv.get_str("tokenizer.ggml.pre", v.pre_name) == 0) {
        return false;
    }

    // defaults by type (llama.cpp)
    int32_t def_bos = -1, def_eos = -1, def_unk = -1;
    if (v.type == LLM_VOCAB_TYPE_SPM) {
        v.pre              = LLM_VOCAB_PRE_DEFAULT;
        v.add_space_prefix = true;
        v.add_bos          = true;
        def_bos = 1, def_eos = 2, def_unk = 0;
    } else {
        v.clean_spaces = true;
        def_bos = 11, def_eos = 11;  // gpt2's defaults
        const std::string & p = v.pre_name;
        if (p.empty() || p == "default") {
            v.pre = LLM_VOCAB_PRE_DEFAULT;
        } else if (p == "llama3" || p == "llama-v3" || p == "llama-bpe" || p == "falcon3") {
            v.pre           = LLM_VOCAB_PRE_LLAMA3;
            v.ignore_merges = true;
            v.add_bos       = true;
        } else if (p == "gpt-2") {
            v.pre = LLM_VOCAB_PRE_GPT2;
        } else {
            return fail(err, "unknown pre-tokenizer '%s' (tokenizer.ggml.pre; supported: llama3, llama-bpe, "
                             "gpt-2, default)", p.c_str());
        }
    }
    if (kv.get_bool("tokenizer.ggml.add_space_prefix", v.add_space_prefix) == 0 ||
        kv.get_bool("tokenizer.ggml.add_bos_token", v.add_bos) == 0 ||
        kv.get_bool("tokenizer.ggml.add_eos_token", v.add_eos) == 0 ||
        kv.get_str("tokenizer.chat_template", v.chat_template) == 0) {
        return false;
    }

    // tokens, scores, types
    int64_t k_tok, k_score, k_type;
    if ((rc = kv.get_arr("tokenizer.ggml.tokens", GGUF_TYPE_STRING, 0, k_tok)) <= 0) {
        return rc < 0 ? fail(err, "tokenizer.ggml.tokens is missing") : false;
    }
    const size_t n = gguf_get_arr_n(g, k_tok);
    if (n == 0 || n > (size_t) INT32_MAX) {
        return fail(err, "tokenizer.ggml.tokens has %zu entries", n);
    }
    const int rc_score = kv.get_arr("tokenizer.ggml.scores", GGUF_TYPE_FLOAT32, n, k_score);
    const int rc_type  = kv.get_arr("tokenizer.ggml.token_type", GGUF_TYPE_INT32, n, k_type);
    if (rc_score == 0 || rc_type == 0) {
        return false;
    }
    const float *   scores = rc_score > 0 ? (const float *) gguf_get_arr_data(g, k_score) : nullptr;
    const int32_t * types  = rc_type > 0 ? (const int32_t *) gguf_get_arr_data(g, k_type) : nullptr;
    v.tokens.resize(n);
    v.token_to_id.reserve(n);
    for (size_t i = 0; i < n; ++i) {
        llm_token_data & td = v.tokens[i];
        td.text.assign(gguf_get_arr_str(g, k_tok, i), gguf_get_arr_str_len(g, k_tok, i));
        if (td.text.empty()) {  // as llama.cpp
            td.text = "[EMPTY_" + std::to_string(i) + "]";
        }
        td.score = scores ? scores[i] : 0.0f;
        td.type  = LLM_TOKEN_TYPE_NORMAL;
        if (types) {
            td.type = types[i] >= 0 && types[i] <= LLM_TOKEN_TYPE_BYTE ? (llm_token_type) types[i]
                                                                        : LLM_TOKEN_TYPE_UNDEFINED;
        }
        const auto [it, inserted] = v.token_to_id.emplace(td.text, (int32_t) i);
        if (!inserted) {
            return fail(err, "tokenizer.ggml.tokens: token %zu '%.64s' duplicates token %d", i, td.text.c_str(),
                        it->second);
        }
    }

    // byte tokens
    v.byte_ids.assign(256, -1);
    for (int b = 0; b < 256; ++b) {
        if (v.type == LLM_VOCAB_TYPE_SPM) {
            char buf[8];
            snprintf(buf, sizeof(buf), "<0x%02X>", b);
            v.byte_ids[b] = v.find_token(buf);
            if (v.byte_ids[b] < 0) {
                v.byte_ids[b] = v.find_token(std::string(1, (char) b));  // llama.cpp's fallback
            }
        } else {
            v.byte_ids[b] = v.find_token(unicode_byte_to_utf8((uint8_t) b));
        }
    }

    // merges
    if (v.type == LLM_VOCAB_TYPE_BPE) {
        int64_t k_merges;
        if ((rc = kv.get_arr("tokenizer.ggml.merges", GGUF_TYPE_STRING, 0, k_merges)) <= 0) {
            return rc < 0 ? fail(err, "tokenizer.ggml.merges is missing (required for a gpt2 tokenizer)") : false;
        }
        const size_t n_merges = gguf_get_arr_n(g, k_merges);
        v.merge_rank.reserve(n_merges);
        for (size_t i = 0; i < n_merges; ++i) {
            const std::string_view m(gguf_get_arr_str(g, k_merges, i), gguf_get_arr_str_len(g, k_merges, i));
            const size_t sp = m.size() > 1 ? m.find(' ', 1) : std::string_view::npos;
            if (sp == std::string_view::npos) {
                return fail(err, "tokenizer.ggml.merges[%zu] '%.*s' is not two tokens separated by a space", i,
                            (int) std::min<size_t>(m.size(), 64), m.data());
            }
            for (const std::string_view part : { m.substr(0, sp), m.substr(sp + 1) }) {
                if (v.find_token(part) < 0) {
                    return fail(err, "tokenizer.ggml.merges[%zu] '%.*s' refers to unknown token '%.*s'", i,
                                (int) std::min<size_t>(m.size(), 64), m.data(), (int) std::min<size_t>(part.size(), 64),
                                part.data());
                }
            }
            v.merge_rank.emplace(std::string(m), (int32_t) i);  // a repeated merge keeps its first rank
        }
    }

    // special ids
    v.bos = def_bos < (int32_t) n ? def_bos : -1;
    v.eos = def_eos < (int32_t) n ? def_eos : -1;
    v.unk = def_unk < (int32_t) n ? def_unk : -1;
    struct special_key {
        const char * key;
        int32_t &    id;
        bool         required_in_range;
    };
    const special_key keys[] = {
        { "tokenizer.ggml.bos_token_id", v.bos, true },       { "tokenizer.ggml.eos_token_id", v.eos, true },
        { "tokenizer.ggml.eot_token_id", v.eot, false },      { "tokenizer.ggml.eom_token_id", v.eom, false },
        { "tokenizer.ggml.unknown_token_id", v.unk, false },  { "tokenizer.ggml.padding_token_id", v.pad, false },
    };
    for (const special_key & sk : keys) {
        int64_t id = -1;
        if ((rc = kv.get_int(sk.key, id)) == 0) {
            return false;
        }
        if (rc < 0 || id == -1 || id == 0xFFFFFFFFll) {  // absent, or the usual "none" marker (-1 as u32)
            continue;
        }
        if (id < 0 || id >= (int64_t) n) {
            if (sk.required_in_range) {
                return fail(err, "%s = %lld is out of range (n_vocab = %zu)", sk.key, (long long) id, n);
            }
            GGML_LOG_WARN("%s: %s = %lld is out of range (n_vocab = %zu), ignored\n", __func__, sk.key,
                          (long long) id, n);
            continue;
        }
        sk.id = (int32_t) id;
    }
    if (v.add_bos && v.bos < 0) {
        return fail(err, "tokenizer.ggml.add_bos_token is set but the vocab has no BOS token");
    }
    if (v.add_eos && v.eos < 0) {
        return fail(err, "tokenizer.ggml.add_eos_token is set but the vocab has no EOS token");
    }

    // end-of-generation tokens, found by text where the GGUF does not say (as llama.cpp)
    for (int32_t id = 0; id < (int32_t) n; ++id) {
        const std::string & t = v.tokens[id].text;
        if (v.eot < 0 && (t == "<|eot_id|>" || t == "<|im_end|>" || t == "<|end|>" || t == "<end_of_turn>" ||
                          t == "<|endoftext|>" || t == "<EOT>")) {
            v.eot = id;
        }
        if (v.eom < 0 && t == "<|eom_id|>") {
            v.eom = id;
        }
        if (is_eog_text(t)) {
            v.eog_ids.push_back(id);
        }
    }
    for (const int32_t id : { v.eos, v.eot, v.eom }) {
        if (id >= 0) {
            v.eog_ids.push_back(id);
        }
    }
    std::sort(v.eog_ids.begin(), v.eog_ids.end());
    v.eog_ids.erase(std::unique(v.eog_ids.begin(), v.eog_ids.end()), v.eog_ids.end());
    for (const int32_t id : v.eog_ids) {  // llama.cpp forces control type on these
        if (id != v.eos && v.tokens[id].type != LLM_TOKEN_TYPE_CONTROL) {
            v.tokens[id].type = LLM_TOKEN_TYPE_CONTROL;
        }
    }

    // special tokens for partitioning: longest text first (ties by id, for determinism)
    for (int32_t id = 0; id < (int32_t) n; ++id) {
        const llm_token_type t = v.tokens[id].type;
        if (t == LLM_TOKEN_TYPE_CONTROL || t == LLM_TOKEN_TYPE_USER_DEFINED || t == LLM_TOKEN_TYPE_UNKNOWN) {
            v.special_tokens.push_back(id);
        }
    }
    std::stable_sort(v.special_tokens.begin(), v.special_tokens.end(),
                     [&](int32_t a, int32_t b) { return v.tokens[a].text.size() > v.tokens[b].text.size(); });

    v.pieces.resize(n);
    for (int32_t id = 0; id < (int32_t) n; ++id) {
        v.pieces[id] = piece_for_cache(v, id);
    }
    return true;
}

//
// tokenize
//

namespace {

struct fragment {
    int32_t token;  // -1: raw text [offs, offs + len)
    size_t  offs;
    size_t  len;
};

// llama.cpp's tokenizer_st_partition: split special-token texts out of the raw fragments, longest first
std::vector<fragment> partition(const llm_vocab & v, std::string_view text, bool parse_special) {
    std::vector<fragment> frags;
    if (!text.empty()) {
        frags.push_back({ -1, 0, text.size() });
    }
    std::vector<fragment> next;
    for (const int32_t id : v.special_tokens) {
        const llm_token_type t = v.tokens[id].type;
        if (!parse_special && (t == LLM_TOKEN_TYPE_CONTROL || t == LLM_TOKEN_TYPE_UNKNOWN)) {
            continue;  // user-defined tokens are split out even then
        }
        const std::string & s = v.tokens[id].text;
        next.clear();
        for (const fragment & f : frags) {
            if (f.token >= 0) {
                next.push_back(f);
                continue;
            }
            const std::string_view raw = text.substr(f.offs, f.len);
            size_t pos = 0;
            for (size_t m; (m = raw.find(s, pos)) != std::string_view::npos; pos = m + s.size()) {
                if (m > pos) {
                    next.push_back({ -1, f.offs + pos, m - pos });
                }
                next.push_back({ id, 0, 0 });
            }
            if (pos < raw.size()) {
                next.push_back({ -1, f.offs + pos, raw.size() - pos });
            }
        }
        frags.swap(next);
    }
    return frags;
}

}  // namespace

std::vector<int32_t> llm_tokenize(const llm_vocab & v, std::string_view text, bool add_special, bool parse_special) {
    std::vector<int32_t> out;
    if (v.tokens.empty()) {
        return out;
    }
    const std::vector<fragment> frags = partition(v, text, parse_special);
    if (add_special && v.add_bos && v.bos >= 0) {
        out.push_back(v.bos);
    }
    if (v.type == LLM_VOCAB_TYPE_SPM) {
        bool prev_special = true;  // the first fragment gets the space prefix
        std::string buf;
        for (const fragment & f : frags) {
            if (f.token >= 0) {
                out.push_back(f.token);
                prev_special = true;
                continue;
            }
            buf.clear();
            const std::string_view raw = text.substr(f.offs, f.len);
            if (v.add_space_prefix && prev_special) {
                buf += "\xe2\x96\x81";
            }
            for (const char c : raw) {
                if (c == ' ') {
                    buf += "\xe2\x96\x81";
                } else {
                    buf += c;
                }
            }
            llm_tokenize_spm(v, buf, out);
            prev_special = false;
        }
    } else {
        for (const fragment & f : frags) {
            if (f.token >= 0) {
                out.push_back(f.token);
            } else {
                llm_tokenize_bpe(v, text.substr(f.offs, f.len), out);
            }
        }
    }
    if (add_special && v.add_eos && v.eos >= 0) {
        out.push_back(v.eos);
    }
    return out;
}

//
// detokenize
//

std::string llm_token_to_piece(const llm_vocab & v, int32_t id, bool render_special) {
    if (!v.valid_id(id) || v.pieces.size() != v.tokens.size()) {
        return "";
    }
    const llm_token_type t = v.tokens[id].type;
    if (!render_special && (t == LLM_TOKEN_TYPE_CONTROL || t == LLM_TOKEN_TYPE_UNKNOWN)) {
        return "";
    }
    return v.pieces[id];
}

namespace {

// llama.cpp's clean_spaces passes (HF clean_up_tokenization), ported literally (in place)
void clean_spaces(std::string & s) {
    int32_t total = (int32_t) s.size();
    char * text = s.data();
    // " ?", " !", " .", " ,"
    const int32_t total1 = total;
    total = total ? 1 : 0;
    for (int32_t i = 1; i < total1; ++i) {
        const char x = text[i];
        if (text[i - 1] == ' ' && (x == '?' || x == '!' || x == '.' || x == ',')) {
            total--;
        }
        text[total++] = x;
    }
    // " ' " -> "'"
    const int32_t total2 = total;
    total = total ? 1 : 0;
    for (int32_t i = 1; i < total2; ++i) {
        const char x = text[i];
        if (x == '\'' && i + 1 < total2 && text[i - 1] == ' ' && text[i + 1] == ' ') {
            total--;
            text[++i] = '\0';
        }
        text[total++] = x;
    }
    // " 's" " 'm" " 're" " 've" -> no space
    const int32_t total3 = total;
    total = total ? 1 : 0;
    for (int32_t i = 1; i < total3; ++i) {
        const char x = text[i];
        if (text[i - 1] == ' ' && x == '\'' && i + 1 < total3) {
            const char x1 = text[i + 1];
            if (x1 == 's' || x1 == 'm') {
                total--;
            } else if (i + 2 < total3) {
                const char x2 = text[i + 2];
                if ((x1 == 'r' && x2 == 'e') || (x1 == 'v' && x2 == 'e')) {
                    total--;
                }
            }
        }
        text[total++] = x;
    }
    s.resize(total);
}

}  // namespace

std::string llm_detokenize(const llm_vocab & v, const std::vector<int32_t> & ids, bool remove_special,
                           bool unparse_special) {
    size_t first = 0, last = ids.size();
    bool remove_space = v.add_space_prefix;
    if (remove_special && v.add_bos && last > first && ids[first] == v.bos) {
        remove_space = false;  // (sic, llama.cpp) the space after a removed BOS is kept
        first++;
    }
    if (remove_special && v.add_eos && last > first && ids[last - 1] == v.eos) {
        last--;
    }
    std::string out;
    for (size_t i = first; i < last; ++i) {
        const std::string piece = llm_token_to_piece(v, ids[i], unparse_special);
        out.append(piece, remove_space && !piece.empty() && piece[0] == ' ' ? 1 : 0);
        remove_space = false;
    }
    if (v.clean_spaces) {
        clean_spaces(out);
    }
    return out;
}

//
// streaming
//

void llm_utf8_take_complete(std::string & buf, std::string & out) {
    static const char * const repl = "\xEF\xBF\xBD";
    size_t i = 0;
    const size_t n = buf.size();
    while (i < n) {
        const uint8_t b0 = (uint8_t) buf[i];
        size_t len;
        uint8_t lo = 0x80, hi = 0xBF;  // allowed range of the second byte
        if (b0 < 0x80) {
            len = 1;
        } else if (b0 >= 0xC2 && b0 <= 0xDF) {
            len = 2;
        } else if (b0 >= 0xE0 && b0 <= 0xEF) {
            len = 3;
            lo = b0 == 0xE0 ? 0xA0 : 0x80;  // no overlong forms
            hi = b0 == 0xED ? 0x9F : 0xBF;  // no surrogates
        } else if (b0 >= 0xF0 && b0 <= 0xF4) {
            len = 4;
            lo = b0 == 0xF0 ? 0x90 : 0x80;
            hi = b0 == 0xF4 ? 0x8F : 0xBF;  // <= U+10FFFF
        } else {
            out += repl;
            i++;
            continue;
        }
        size_t k = 1;
        for (; k < len && i + k < n; ++k) {
            const uint8_t c = (uint8_t) buf[i + k];
            if (k == 1 ? (c < lo || c > hi) : (c & 0xC0) != 0x80) {
                break;
            }
        }
        if (k == len) {
            out.append(buf, i, len);
            i += len;
        } else if (i + k == n) {
            break;  // valid so far but incomplete: keep for later
        } else {
            out += repl;  // broken sequence: replace the lead byte, resync on the next one
            i++;
        }
    }
    buf.erase(0, i);
}

std::string llm_detok_stream::push(int32_t id) {
    pending += llm_token_to_piece(vocab, id, render_special);
    std::string out;
    llm_utf8_take_complete(pending, out);
    return out;
}

std::string llm_detok_stream::flush() {
    std::string out;
    llm_utf8_take_complete(pending, out);
    if (!pending.empty()) {
        out += "\xEF\xBF\xBD";
        pending.clear();
    }
    return out;
}
