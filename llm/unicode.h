// unicode.h - the Unicode pieces the tokenizers need: UTF-8 decoding (as llama.cpp does it), general
// category classes, the GPT-2 byte <-> unicode mapping, and hand-written pre-tokenizer splitters.
//
//   std::vector<uint32_t> cpts = unicode_cpts_from_utf8(text);   // invalid bytes -> U+FFFD, one per byte
//   if (unicode_cpt_class(cpts[0]) == UNICODE_CLASS_LETTER) ...
//   std::vector<std::string> words = unicode_split_llama3(text);  // byte-level encoded words, ready for BPE
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

// General category, coarse: the first letter of the Unicode category (Cn kept apart as undefined).
enum unicode_class : uint8_t {
    UNICODE_CLASS_UNDEFINED   = 0,  // Cn
    UNICODE_CLASS_CONTROL     = 1,  // Cc Cf Co Cs
    UNICODE_CLASS_LETTER      = 2,  // \p{L}
    UNICODE_CLASS_MARK        = 3,  // \p{M}
    UNICODE_CLASS_NUMBER      = 4,  // \p{N}
    UNICODE_CLASS_PUNCTUATION = 5,  // \p{P}
    UNICODE_CLASS_SYMBOL      = 6,  // \p{S}
    UNICODE_CLASS_SEPARATOR   = 7,  // \p{Z}
};

// generated table (llm/unicode-data.cpp)
extern const char * const unicode_data_version;
extern const uint32_t     unicode_category_runs[];  // (first cpt << 3) | class, ascending
extern const size_t       unicode_category_runs_n;

unicode_class unicode_cpt_class(uint32_t cpt);  // cpt > 0x10FFFF -> UNDEFINED
bool unicode_cpt_is_whitespace(uint32_t cpt);   // the White_Space property (\s in the tokenizer regexes)

// Byte length of the UTF-8 sequence a lead byte announces (1 for continuation/invalid bytes), as llama.cpp.
size_t unicode_len_utf8(char c);
// Decode one code point at offs; false (offs unchanged) when the bytes there are not a valid sequence
// by llama.cpp's rules (lead byte + the right number of continuation bytes).
bool unicode_cpt_from_utf8(std::string_view s, size_t & offs, uint32_t & cpt);
std::vector<uint32_t> unicode_cpts_from_utf8(std::string_view s);  // invalid byte -> U+FFFD, skip 1 byte
void unicode_cpt_append_utf8(std::string & out, uint32_t cpt);     // cpt must be <= 0x10FFFF
std::string unicode_cpt_to_utf8(uint32_t cpt);

// GPT-2 byte-level mapping: every byte <-> one printable code point (' ' -> U+0120 'Ġ', ...).
const std::string & unicode_byte_to_utf8(uint8_t b);
int unicode_utf8_to_byte(uint32_t cpt);  // -1 if cpt is not one of the 256 mapped code points

// Pre-tokenizers. Each returns the words of text, each word byte-level encoded (unicode_byte_to_utf8 of
// its UTF-8 bytes), in order; concatenated and decoded they give back text (invalid UTF-8 as U+FFFD).
// Llama 3:  (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|
//           \s*[\r\n]+|\s+(?!\S)|\s+
std::vector<std::string> unicode_split_llama3(std::string_view text);
// GPT-2:    's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
std::vector<std::string> unicode_split_gpt2(std::string_view text);
// llama.cpp's "default" BPE pre-tokenizer: the four regexes [\p{P}\$\+<=>\^~\|]+, GPT-2, \p{N}+,
// [0-9][0-9][0-9] applied one after another, each splitting the pieces of the previous one.
std::vector<std::string> unicode_split_default(std::string_view text);
