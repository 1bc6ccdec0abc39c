// grammar.h - constrained sampling: GBNF grammars (llama.cpp's syntax) parsed to rules over Unicode code
// points, an incremental matcher (a pushdown automaton over code points, fed UTF-8 bytes that may stop in
// the middle of a character), per-token masks over a vocab through a trie of the tokens' output bytes, and
// a JSON schema -> GBNF converter. llm_sampler::set_grammar (sampling.h) wires it into sampling.
//
//   std::string err;
//   std::shared_ptr<const llm_grammar> g = llm_grammar_parse(text, &err);  // nullptr: err is one line,
//   if (!g) { fprintf(stderr, "%s\n", err.c_str()); return 1; }           // "grammar: line 3, col 14: ..."
//   llm_grammar_matcher m(g);
//   m.accept_bytes("{\"a\": 1");                       // false (state unchanged) if the grammar rejects them
//   bool done = m.is_complete();                       // the text so far is a whole sentence of the grammar
//
//   auto toks = llm_grammar_tokens_get(vocab);         // per-vocab token bytes + trie, built once and shared
//   std::vector<int32_t> ids;
//   m.valid_tokens(*toks, ids);                        // every token that can continue the parse (EOG when complete)
//   m.accept_token(*toks, ids[0]);
//
//   std::string gbnf;
//   if (!llm_json_schema_to_gbnf(R"({"type": "object", "properties": {"a": {"type": "integer"}}})", gbnf, &err)) ...
//
// GBNF, as llama.cpp reads it: `name ::= alternatives` rules (names of letters, digits, '-' and '_'), `|`,
// sequences, `( )`, postfix `* + ?` `{m}` `{m,}` `{m,n}` `{,n}`, "literals" and [classes] / [^classes] with
// the escapes \n \r \t \\ \" \[ \] \- \xHH \uHHHH \UHHHHHHHH, `.` (any code point), `#` comments, rule
// references; `root` is the start. A newline ends a rule except inside ( ) and after `::=` or `|` (a line
// may also begin with `|` to continue the rule above). Undefined rules, a missing root, a rule defined twice
// and left recursion (a rule that can reach itself before reading a character, including `x*` of an x that
// can be empty) are errors.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

struct llm_vocab;
struct llm_grammar_loop_index;

//
// the parsed grammar
//

enum llm_grammar_elem_type : uint8_t {
    LLM_GRAMMAR_ELEM_END = 0,  // end of an alternative
    LLM_GRAMMAR_ELEM_CHAR = 1, // one code point of a class: value = index in llm_grammar::classes
    LLM_GRAMMAR_ELEM_RULE = 2, // a rule reference: value = index in llm_grammar::rules
};

struct llm_grammar_elem {
    llm_grammar_elem_type type;
    uint32_t value;
};

// A set of code points: sorted, disjoint, non-adjacent inclusive ranges within [0, 0x10FFFF] (negation is
// resolved at parse time), plus a bitmap of its ASCII part for the common case.
struct llm_grammar_class {
    std::vector<std::pair<uint32_t, uint32_t>> ranges;
    uint64_t ascii[2] = {0, 0};

    bool contains(uint32_t cpt) const;
    bool intersects(uint32_t lo, uint32_t hi) const; // some code point of [lo, hi] is in the set
    bool covers(uint32_t lo, uint32_t hi) const;     // every code point of [lo, hi] is in the set
};

struct llm_grammar_rule {
    std::string name;           // generated helper rules: "<rule>-<n>" (a group or a repetition)
    std::vector<uint32_t> alts; // index in llm_grammar::elems of each alternative's first element
    int32_t line = 0, col = 0;  // where it is defined (helpers: the construct it stands for)
};

struct llm_grammar {
    std::vector<llm_grammar_rule> rules;
    std::vector<llm_grammar_elem> elems;    // all alternatives, each ended by LLM_GRAMMAR_ELEM_END
    std::vector<llm_grammar_class> classes; // distinct
    uint32_t root = 0;
};

// Parses GBNF text. On error returns nullptr and sets *err to one line, "grammar: line L, col C: what"
// (or "grammar: what" when no position applies, e.g. "grammar: no rule named 'root'"). Never aborts.
std::shared_ptr<const llm_grammar> llm_grammar_parse(std::string_view text, std::string * err);

// GBNF text of a parsed grammar (rules in order, helpers included); parsing it gives the same language.
std::string llm_grammar_to_gbnf(const llm_grammar & g);

// Appends bytes as the inside of a GBNF "literal", on one line: \" \\ \n \r \t, other control bytes as \xNN,
// everything else (UTF-8 included) as it is. Also how messages quote generated text.
void llm_grammar_escape_bytes(std::string & out, std::string_view bytes);

//
// per-vocab token bytes
//

// Every token's output bytes (llm_token_to_piece without rendering control tokens: SPM "▁" -> ' ' and
// <0xNN> -> the byte, BPE byte-level code points -> bytes) and a trie over them, in byte order. Built once per
// vocab: llm_grammar_tokens_get returns the shared copy while any user holds it.
struct llm_grammar_tokens {
    struct node {       // trie node, nodes in preorder; node 0 is the root (the empty prefix)
        uint8_t byte;   // the edge from the parent
        uint8_t flags;  // NODE_*
        uint16_t depth; // bytes from the root
        uint32_t end;   // one past the last node of the subtree
    };
    enum : uint8_t {
        NODE_NON_ASCII = 1, // some edge strictly below is a byte >= 0x80
        NODE_BAD_UTF8 = 2,  // read from a character boundary, some path below is not a UTF-8 prefix
    };

    int32_t n_vocab = 0;
    std::vector<std::string> bytes; // [n_vocab]
    std::vector<uint8_t> is_eog;    // [n_vocab]
    std::vector<int32_t> eog_ids;   // the end-of-generation tokens (no bytes, not in the trie)
    std::vector<int32_t> order;     // ids of the tokens with bytes, sorted by bytes
    std::vector<node> nodes;        // [n_nodes]
    std::vector<uint32_t> first;    // [n_nodes + 1] index in order of the first token at or below each node
    std::vector<uint64_t> below;    // [n_nodes * 2] ASCII bytes on edges strictly below (bit b of word b >> 6)
    uint32_t max_depth = 0;         // the longest token

    // per loop signature of a matcher state (the inside of a string...), the tokens that keep it: built on
    // demand by the matchers using this vocab, shared by all of them (grammar-match.cpp)
    mutable std::mutex mu;
    mutable std::vector<std::shared_ptr<const llm_grammar_loop_index>> loop_indexes;
};

std::shared_ptr<const llm_grammar_tokens> llm_grammar_tokens_get(const llm_vocab & vocab);
std::shared_ptr<const llm_grammar_tokens> llm_grammar_tokens_build(const std::vector<std::string> & bytes,
                                                                   const std::vector<int32_t> & eog_ids);

//
// the matcher
//

struct llm_grammar_matcher_impl;

// The parse state of one generation: the set of parse stacks after the bytes accepted so far, plus an
// incomplete UTF-8 character at the end. accept_* never half-applies: on false nothing changed. Not
// thread-safe (every call, const ones aside, may extend its memo tables).
class llm_grammar_matcher {
  public:
    explicit llm_grammar_matcher(std::shared_ptr<const llm_grammar> g);
    ~llm_grammar_matcher();
    llm_grammar_matcher(const llm_grammar_matcher &) = delete;
    llm_grammar_matcher & operator=(const llm_grammar_matcher &) = delete;

    bool accept(uint32_t cpt);                     // one code point (false if rejected or a character is pending)
    bool accept_bytes(std::string_view bytes);     // UTF-8, may begin or end inside a character
    bool can_accept_bytes(std::string_view bytes); // accept_bytes without the change
    bool is_complete() const;                      // a whole sentence of the grammar, no character pending
    void reset();                                  // back to the start

    // tokens: from llm_grammar_tokens_get of the vocab the ids belong to.
    // A token is valid when its bytes continue the parse; an end-of-generation token when is_complete();
    // other tokens without bytes (control tokens) never.
    bool token_valid(const llm_grammar_tokens & tokens, int32_t id);
    bool accept_token(const llm_grammar_tokens & tokens, int32_t id); // EOG: true when complete, no change
    void valid_tokens(const llm_grammar_tokens & tokens, std::vector<int32_t> & ids); // ids: trie order

    uint64_t n_bytes() const;                      // bytes accepted since the start
    std::string tail(size_t max_bytes = 32) const; // the last accepted bytes (for messages)
    const llm_grammar & grammar() const;

  private:
    std::unique_ptr<llm_grammar_matcher_impl> impl_;
};

//
// JSON schema -> GBNF
//

// Converts a JSON schema (text) to GBNF whose root rule matches the JSON documents the schema accepts,
// written compactly or with whitespace between tokens (bounded: at most 20 whitespace characters in a row).
// Supported: type (a name or a list) object/array/string/number/integer/boolean/null; properties + required
// (properties in schema order, optional ones may be left out), additionalProperties (false, true or a
// schema; default true: other keys, after the named ones), items (a schema), prefixItems, minItems/maxItems,
// enum, const, anyOf/oneOf (as anyOf), allOf (objects merged; a single schema), $ref to #/$defs/..,
// #/definitions/.. or #, string minLength/maxLength, pattern (a regex subset: literals, ., [classes],
// \d \w \s \D \W \S, escapes, groups, |, * + ? {m} {m,} {m,n}, anchored at ^ and $ if present), format
// date/time/date-time/uuid (other formats are annotations: any string), integer minimum/maximum (exclusive
// too; not for numbers), and the annotations title, description, $schema, $id, $comment, default, examples,
// readOnly, writeOnly, deprecated. {} or true is any JSON value. Anything else: false and one line in *err,
// "json-schema: <where, as a JSON pointer>: unsupported keyword 'x'" (e.g. "json-schema: #/properties/a: ...").
bool llm_json_schema_to_gbnf(std::string_view schema_json, std::string & gbnf, std::string * err);
