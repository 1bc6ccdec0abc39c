// test_grammar.cpp - constrained sampling: the GBNF parser (grammars/*.gbnf, every construct llama.cpp's
// example grammars use, malformed input with line/col), the matcher (accepted/rejected strings, partial
// UTF-8), token masks against a per-token check (fake vocabs and the real Llama 3 / Llama 2 vocabs),
// the JSON schema converter (documents that must and must not validate) and the sampler with a grammar.
#include "gguf.h"
#include "grammar.h"
#include "sampling.h"
#include "test_util.h"
#include "vocab.h"
#include "vocab_test_util.h"

#include <algorithm>
#include "doctest_cstr.h"
#include <fstream>
#include <iterator>
#include <map>
#include <memory>
#include <random>
#include <set>
#include <string>
#include <vector>

namespace {

std::string read_text(const std::string & path) {
    std::ifstream f(path, std::ios::binary);
    REQUIRE_MESSAGE(f.good(), "cannot read " << path);
    return std::string(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
}

std::string grammar_file(const std::string & name) {
    return read_text(std::string(LLM_SOURCE_DIR) + "/grammars/" + name + ".gbnf");
}

std::shared_ptr<const llm_grammar> parse_ok(const std::string & text) {
    std::string err;
    auto g = llm_grammar_parse(text, &err);
    REQUIRE_MESSAGE(g, err << "\n" << text);
    return g;
}

std::string parse_err(const std::string & text) {
    std::string err;
    auto g = llm_grammar_parse(text, &err);
    CHECK_MESSAGE(!g, "parsed: " << text);
    return err;
}

// the whole text is a sentence of g
bool matches(const std::shared_ptr<const llm_grammar> & g, const std::string & text) {
    llm_grammar_matcher m(g);
    return m.accept_bytes(text) && m.is_complete();
}

void check_strings(const std::shared_ptr<const llm_grammar> & g, const std::vector<std::string> & good,
                   const std::vector<std::string> & bad) {
    for (const std::string & s : good)
        CHECK_MESSAGE(matches(g, s), "should match: " << s);
    for (const std::string & s : bad)
        CHECK_MESSAGE(!matches(g, s), "should not match: " << s);
}

std::shared_ptr<const llm_grammar> schema_grammar(const std::string & schema) {
    std::string gbnf, err;
    REQUIRE_MESSAGE(llm_json_schema_to_gbnf(schema, gbnf, &err), err);
    auto g = llm_grammar_parse(gbnf, &err);
    REQUIRE_MESSAGE(g, err << "\n" << gbnf);
    return g;
}

std::string schema_err(const std::string & schema) {
    std::string gbnf, err;
    CHECK_MESSAGE(!llm_json_schema_to_gbnf(schema, gbnf, &err), "converted: " << schema);
    return err;
}

// every token id whose check says it is valid, sorted
std::vector<int32_t> brute_valid(llm_grammar_matcher & m, const llm_grammar_tokens & t) {
    std::vector<int32_t> v;
    for (int32_t id = 0; id < t.n_vocab; ++id) {
        if (m.token_valid(t, id)) v.push_back(id);
    }
    return v;
}

std::vector<int32_t> trie_valid(llm_grammar_matcher & m, const llm_grammar_tokens & t) {
    std::vector<int32_t> v;
    m.valid_tokens(t, v);
    std::sort(v.begin(), v.end());
    return v;
}

// a vocab made by hand: normal tokens with the given output bytes, then one EOS control token
llm_vocab fake_vocab(const std::vector<std::string> & pieces) {
    llm_vocab v;
    v.type = LLM_VOCAB_TYPE_BPE;
    for (const std::string & p : pieces) {
        v.tokens.push_back({p, 0.0f, LLM_TOKEN_TYPE_NORMAL});
        v.pieces.push_back(p);
    }
    v.eos = (int32_t)v.tokens.size();
    v.tokens.push_back({"</s>", 0.0f, LLM_TOKEN_TYPE_CONTROL});
    v.pieces.push_back("</s>");
    v.eog_ids = {v.eos};
    return v;
}

std::vector<std::string> small_pieces() {
    std::vector<std::string> p;
    for (int c = 0x20; c < 0x7F; ++c)
        p.push_back(std::string(1, (char)c));
    for (const char * s :
         {"\n",   "\t",   "{\"", "\":",      "\": ", "\",",  "\", \"", "\"}",      "true",     "false", "null",
          "12",   "3.",   "e+",  "  ",       " {",   "}\n",  "[]",     "ab",       "abc",      "\\n",   "\\u00",
          "\xC3", "\xA9", "é",   "\xE6\x97", "\xA5", "日本", "語\"",   "\xF0\x9F", "\x8E\x89", "🎉",     "\x80",
          "\xFF", "- ",   "x =", " + ",      "(",    "))",   "int",    "ret",      "urn"}) {
        p.push_back(s);
    }
    return p;
}

} // namespace

//
// parser
//

TEST_CASE("the grammar files parse, and print back to an equivalent grammar") {
    const std::map<std::string, std::vector<std::string>> samples = {
        {"json", {"{}", "{\"a\": [1, 2.5e-3, \"x\\n\"]}"}},
        {"arithmetic", {"1 = 1\n", "(x + 2) * 3 = 21\n"}},
        {"list", {"- a\n- b\n"}},
        {"c", {"int f(int a) { return a * 2; }"}},
    };
    for (const auto & [name, good] : samples) {
        INFO(name);
        auto g = parse_ok(grammar_file(name));
        const std::string text = llm_grammar_to_gbnf(*g);
        auto g2 = parse_ok(text);
        CHECK(g2->rules.size() == g->rules.size());
        const auto lines = [](const std::string & t) { // the same rules, maybe in another order
            std::multiset<std::string> out;
            for (size_t p = 0, e; p < t.size(); p = e + 1) {
                e = t.find('\n', p);
                out.insert(t.substr(p, e - p));
            }
            return out;
        };
        CHECK(lines(llm_grammar_to_gbnf(*g2)) == lines(text));
        for (const std::string & s : good) {
            CHECK(matches(g, s));
            CHECK(matches(g2, s));
            CHECK(!matches(g2, s + "@"));
        }
    }
}

TEST_CASE("every GBNF construct of llama.cpp's example grammars") {
    // an empty first alternative, bounded repetition
    check_strings(parse_ok("root ::= \"a\" ws \"b\"\nws ::= | \" \" | \"\\n\" [ \\t]{0,3}\n"),
                  {"ab", "a b", "a\n\t\t\tb"}, {"a  b", "a\n\t\t\t\tb"});
    // a group over several lines with comments and blank lines inside, postfix on groups
    check_strings(parse_ok("# moves\nroot ::= (\n    # first\n    \"1. \" mv \"\\n\"\n\n    ([1-9] [0-9]? \". \" mv "
                           "\"\\n\")+ # more\n)\nmv ::= [a-h] [1-8] [+#]?\n"),
                  {"1. e4\n2. d5+\n", "1. e4\n2. d5\n10. a1#\n"}, {"1. e4\n", "1. e4\n0. a1\n", "1. e9\n2. a1\n"});
    // alternatives continued after a trailing '|', and on a line beginning with '|'
    check_strings(parse_ok("root ::= \"a\" |\n  \"b\" |\n  \"c\"\n     | \"d\"\nother ::= \"x\"\n"),
                  {"a", "b", "c", "d"}, {"x", ""});
    // no space before '(', upper-case and underscore names, a rule referenced before its definition
    check_strings(parse_ok("root ::= Term((\"*\" | \"/\") Term)*\nTerm ::= my_digit+\nmy_digit ::= [0-9]\n"),
                  {"1", "2*3/45"}, {"*", "1*"});
    // {m} {m,} {m,n} {,n}
    check_strings(parse_ok("root ::= \"a\"{2} \"b\"{2,} \"c\"{1,2} \"d\"{,1}\n"), {"aabbc", "aabbbccd", "aabbcd"},
                  {"aabb", "abbc", "aabc", "aabbccc", "aabbcdd"});
    // a multi-character literal repeats as a whole
    check_strings(parse_ok("root ::= \"ab\"* \"ab\"?\n"), {"", "ab", "ababab"}, {"a", "aba", "b"});
    // escapes in literals and classes, ranges with raw UTF-8, '.', classes with [ ] \ ^ - inside
    check_strings(
        parse_ok(
            "root ::= \"\\x41\\u00e9\\U0001F389\\t\\\"\\\\\" [ぁ-ゟ]+ . [!\"#$%&'()*+,-./:;<=>?@[\\\\\\]^_`{|}~]\n"),
        {"Aé🎉\t\"\\あいz[", "Aé🎉\t\"\\ゟ日]", "Aé🎉\t\"\\あx\\", "Aé🎉\t\"\\あx^"}, {"Aé🎉\t\"\\a x[", "Aé🎉\t\"\\あ xa"});
    check_strings(parse_ok("root ::= [^\\n\\x0B\\u2028]+ \"\\n\"\n"), {"abc\n", "日本\n"},
                  {"a\x0B\n", "a\u2028\n", "\n"});
    check_strings(parse_ok("root ::= [a-]+ [-z] [\\-]\n"), {"a-z-", "--z-"}, {"b-z-"});
    // an empty rule prints back as "" (not as a line ending in ::=, which would continue on the next line)
    const std::string printed = llm_grammar_to_gbnf(*parse_ok("root ::= x \"a\" y\nx ::= \"\" \"\"\ny ::= \"b\"?\n"));
    check_strings(parse_ok(printed), {"a", "ab"}, {"", "b"});
    // "" is the empty string
    check_strings(parse_ok("root ::= \"\" \"x\" \"\"\n"), {"x"}, {""});
}

TEST_CASE("malformed grammars: one line with line and column") {
    CHECK(parse_err("root ::= \"a\"\nfoo ::= \"b\"\nbar = \"c\"\n") == "grammar: line 3, col 5: expected ::=");
    CHECK(parse_err("root ::= \"abc\n") == "grammar: line 1, col 10: unterminated string literal");
    CHECK(parse_err("root ::= [a-z\n") == "grammar: line 1, col 10: unterminated character class");
    CHECK(parse_err("root ::= ( \"a\" | \"b\"\n") == "grammar: line 1, col 10: unclosed '('");
    CHECK(parse_err("root ::= \"a\" )\n") == "grammar: line 1, col 14: unexpected ')'");
    CHECK(parse_err("root ::= item\n") == "grammar: line 1, col 10: undefined rule 'item'");
    CHECK(parse_err("item ::= \"a\"\n") == "grammar: no rule named 'root'");
    CHECK(parse_err("") == "grammar: no rule named 'root'");
    CHECK(parse_err("root ::= \"a\"\nroot ::= \"b\"\n") ==
          "grammar: line 2, col 1: rule 'root' defined twice (first at line 1)");
    CHECK(parse_err("root ::= \"\\q\"\n") == "grammar: line 1, col 11: unknown escape '\\q'");
    CHECK(parse_err("root ::= \"\\xZZ\"\n") == "grammar: line 1, col 13: expected 2 hex digits");
    CHECK(parse_err("root ::= [z-a]\n") == "grammar: line 1, col 11: character range out of order");
    CHECK(parse_err("root ::= \"a\"{3,2}\n") == "grammar: line 1, col 13: repetition {m,n} with n < m");
    CHECK(parse_err("root ::= \"a\"{99999}\n") == "grammar: line 1, col 13: repetition count above 10000");
    CHECK(parse_err("root ::= * \"a\"\n") == "grammar: line 1, col 10: unexpected '*'");
    CHECK(parse_err("root ::= <think>\n") == "grammar: line 1, col 10: token references (<...>) are not supported");
    CHECK(parse_err("  ::= \"a\"\n") == "grammar: line 1, col 3: expected a rule name, got ':'");
    CHECK(parse_err("root ::= \"日本\" @\n") == "grammar: line 1, col 15: unexpected '@'");
    CHECK(parse_err("root ::= \"a\" é\n") == "grammar: line 1, col 14: unexpected 'é'");
    CHECK(parse_err("root ::= \"a\\\n\"\n") ==
          "grammar: line 1, col 12: a backslash must be followed by an escape letter");
    CHECK(parse_err("root ::= (\"a\"\x01)\n") == "grammar: line 1, col 14: expected ')', got byte 0x01");
}

TEST_CASE("left recursion is rejected at parse time") {
    CHECK(parse_err("root ::= expr\nexpr ::= expr \"+\" num | num\nnum ::= [0-9]+\n") ==
          "grammar: line 2, col 1: rule 'expr' is left-recursive (expr -> expr)");
    CHECK(parse_err("root ::= a\na ::= b? c\nb ::= \"x\"\nc ::= a \"y\" | \"z\"\n") ==
          "grammar: line 2, col 1: rule 'a' is left-recursive (a -> c -> a)");
    CHECK(parse_err("root ::= ( \"a\"? )* \"b\"\n") ==
          "grammar: line 1, col 18: the repeated item can match the empty string (it would repeat forever)");
    CHECK(parse_err("root ::= x+\nx ::= \"a\" | \"\"\n") ==
          "grammar: line 1, col 11: the repeated item can match the empty string (it would repeat forever)");
    // right recursion and bounded repetition of something empty are fine
    check_strings(parse_ok("root ::= \"(\" root \")\" | \"\"\n"), {"", "()", "((()))"}, {"(()"});
    check_strings(parse_ok("root ::= ( \"a\"? ){0,3} \"b\"\n"), {"b", "aaab"}, {"aaaab"});
    // many nullable copies with two empty ways each: expanded once per position, not 2^200 times
    check_strings(parse_ok("root ::= ( \"\" | \"a\"? ){0,200} \"b\"\n"), {"b", "aaab"}, {"c", ""});
}

//
// matcher
//

TEST_CASE("json.gbnf accepts JSON objects and rejects the rest") {
    auto g = parse_ok(grammar_file("json"));
    check_strings(g,
                  {"{}", "{ }", "{\"a\":1}", "{\"a\": [1, -2.5e+10, true, false, null, \"x\"], \"b\": {\"c\": {}}}",
                   "{\"esc\": \"\\\"\\\\\\/\\b\\f\\n\\r\\t\\u00e9\"}", "{\"u\": \"日本語 🎉\"}",
                   "{\n  \"a\": 0,\n  \"b\": 0.5\n}", "{\"n\": -0}"},
                  {"", "[]", "{", "{\"a\"}", "{\"a\":}", "{\"a\":1,}", "{'a':1}", "{\"a\":01}", "{\"a\":1.}",
                   "{\"a\":\"\x01\"}", "{\"a\":\"\\x\"}", "{\"a\":tru}", "{\"a\":1} x", "{a:1}", "{\"a\":\"\xC3\"}",
                   "{\"a\" :1}x"});
    llm_grammar_matcher m(g);
    CHECK(m.accept_bytes("{\"key\": [1, 2"));
    CHECK(!m.is_complete());
    CHECK(!m.accept_bytes("}")); // rejected bytes change nothing
    CHECK(m.accept_bytes("]}"));
    CHECK(m.is_complete());
    CHECK(m.n_bytes() == 15);
    CHECK(m.tail(3) == "2]}");
    m.reset();
    CHECK(!m.is_complete());
    CHECK(m.n_bytes() == 0);
    CHECK(m.accept(U'{'));
    CHECK(m.accept(U'}'));
    CHECK(m.is_complete());
}

TEST_CASE("arithmetic.gbnf, list.gbnf and c.gbnf") {
    check_strings(parse_ok(grammar_file("arithmetic")), {"1 = 1\n", "(x + 2) * 3 = 21\n", "a=b\n-x / 2.5 = y_1 - 3\n"},
                  {"1 = 1", "= 1\n", "1 + = 2\n", "(1 = 1\n", "X = 1\n", "1 == 1\n"});
    check_strings(parse_ok(grammar_file("list")), {"- a\n", "- milk\n- eggs, 12\n- 日本\n"},
                  {"", "- \n", "* a\n", "- a", "- a\rb\n", "- a\u2028b\n"});
    check_strings(parse_ok(grammar_file("c")),
                  {"", "int main() {}", "int main(void x) { return 0; }",
                   "int add(int a, int b) {\n  int c = a + b;\n  return c;\n}\n",
                   "void f() { // note\n  for (i = 0; i < 10; i = i + 1) { g(i, 'x'); }\n  while (x) { x = x - 1; }\n  "
                   "if (a == b) { } else if (a) { } else { }\n  /* done */\n}\n",
                   "char *s(char **p) { return p; }"},
                  {"int main()", "int main() { return 0 }", "main() {}", "int main() { int 3x; }",
                   "int main() { /* open }", "intmain() {}"});
}

TEST_CASE("llm_grammar_escape_bytes: one line, and a literal of it matches exactly the bytes") {
    const std::string bytes = std::string("a\"b\\c\nd\re\tf\x01g\x7Fh \xC3\xA9 \xF0\x9F\x8E\x89 ") + '\0' + "z";
    std::string out;
    llm_grammar_escape_bytes(out, bytes);
    CHECK(out == "a\\\"b\\\\c\\nd\\re\\tf\\x01g\\x7Fh \xC3\xA9 \xF0\x9F\x8E\x89 \\x00z");
    CHECK(out.find('\n') == std::string::npos);
    const auto g = parse_ok("root ::= \"" + out + "\"\n");
    CHECK(matches(g, bytes));
    CHECK(!matches(g, bytes.substr(0, bytes.size() - 1)));
}

TEST_CASE("partial UTF-8: characters split over calls, bad bytes refused early") {
    auto g = parse_ok("root ::= [ぁ-ゟ]+ \"!\"\n"); // hiragana: 3-byte characters E3 81 81 .. E3 82 9F
    llm_grammar_matcher m(g);
    const std::string a = "あ"; // E3 81 82
    CHECK(m.accept_bytes(a.substr(0, 1)));
    CHECK(!m.is_complete());
    CHECK(m.accept_bytes(a.substr(1, 1)));
    CHECK(!m.accept_bytes("!")); // not a continuation byte
    CHECK(m.accept_bytes(a.substr(2) + "い" + a.substr(0, 2)));
    CHECK(m.accept_bytes(a.substr(2) + "!"));
    CHECK(m.is_complete());
    CHECK(!m.accept(U'!'));

    llm_grammar_matcher k(g);
    CHECK(!k.can_accept_bytes("\xC3"));     // no 2-byte character can follow
    CHECK(!k.can_accept_bytes("\xE4"));     // U+4000..U+4FFF: none in the class
    CHECK(!k.can_accept_bytes("\xE3\x80")); // U+3000..U+303F: none either
    CHECK(k.can_accept_bytes("\xE3\x81"));
    CHECK(!k.can_accept_bytes("\x81")); // a continuation byte with no lead
    CHECK(!k.can_accept_bytes("\xFF"));
    CHECK(!k.accept(U'x'));
    CHECK(k.accept(U'ぁ'));
    CHECK(!k.accept(0x110000));

    // a lead byte is admitted only for the code points it can begin: E0 begins U+0800.., F0 U+10000.. (not
    // U+0000.. as their value bits alone say) and ED stops at U+D7FF (regression: an ASCII-only grammar took
    // the byte token <0xE0> / <0xF0>, and then no token could continue the parse)
    llm_grammar_matcher ascii(parse_ok("root ::= \"{\" [a-z]+ \"}\"\n"));
    for (const char * lead : {"\xC2", "\xE0", "\xED", "\xF0", "\xF4"})
        CHECK_MESSAGE(!ascii.can_accept_bytes(lead), "lead byte " << (unsigned)(uint8_t)lead[0]);
    CHECK(!llm_grammar_matcher(parse_ok("root ::= [\\u0100-\\u07FF]\n")).can_accept_bytes("\xE0"));
    CHECK(!llm_grammar_matcher(parse_ok("root ::= [\\u0100-\\uFFFF]\n")).can_accept_bytes("\xF0"));
    CHECK(llm_grammar_matcher(parse_ok("root ::= [\\u0800]\n")).can_accept_bytes("\xE0"));
    CHECK(llm_grammar_matcher(parse_ok("root ::= [\\U00010000]\n")).can_accept_bytes("\xF0"));
    CHECK(matches(parse_ok("root ::= [\\uD7FF]\n"), "\xED\x9F\xBF"));

    // overlong forms and surrogates are not UTF-8
    auto any = parse_ok("root ::= .*\n");
    CHECK(matches(any, "a\xC3\xA9\xF0\x9F\x8E\x89"));
    for (const char * bad : {"\xC0\x80", "\xE0\x80\x80", "\xED\xA0\x80", "\xF0\x80\x80\x80", "\xF4\x90\x80\x80"}) {
        CHECK_MESSAGE(!matches(any, bad), "accepted an invalid sequence");
    }
}

TEST_CASE("token masks equal the per-token check (fake vocab, partial UTF-8 tokens)") {
    const std::vector<std::string> pieces = small_pieces();
    const llm_vocab v = fake_vocab(pieces);
    auto toks = llm_grammar_tokens_get(v);
    REQUIRE(toks->n_vocab == v.n_vocab());
    CHECK(llm_grammar_tokens_get(v).get() == toks.get()); // shared while held
    CHECK(toks->is_eog[v.eos]);

    struct walk {
        const char * grammar;
        std::vector<std::string> steps; // token pieces to accept in order
    };
    const std::vector<walk> walks = {
        {"json", {"{\"",   "a", "\": ", "\"",  "\xC3", "\xA9", "日本", "\xE6\x97", "\xA5", "\\n",
                  "\\u00", "e", "9",    "\",", " ",    "\"",   "b",    "\":",      "[]",   "}"}},
        {"arithmetic", {"x =", " ", "(", "1", "2", " + ", "3", ")", "\n"}},
        {"list", {"- ", "ab", "é", "\xF0\x9F", "\x8E\x89", "\n"}},
        {"c", {"int", " ", "f", "(", ")", " {", "ret", "urn", " ", "1", ";", "}"}},
    };
    for (const walk & w : walks) {
        INFO(std::string(w.grammar));
        llm_grammar_matcher m(parse_ok(grammar_file(w.grammar)));
        for (size_t i = 0; i <= w.steps.size(); ++i) {
            INFO("step " << i);
            const std::vector<int32_t> a = trie_valid(m, *toks), b = brute_valid(m, *toks);
            CHECK(a == b);
            if (i == w.steps.size()) break;
            const int32_t id = (int32_t)(std::find(pieces.begin(), pieces.end(), w.steps[i]) - pieces.begin());
            REQUIRE(id < (int32_t)pieces.size());
            CHECK(std::binary_search(a.begin(), a.end(), id));
            REQUIRE(m.accept_token(*toks, id));
        }
        CHECK(m.is_complete());
        const std::vector<int32_t> a = trie_valid(m, *toks);
        CHECK(std::binary_search(a.begin(), a.end(), v.eos)); // EOS once complete
    }
}

//
// JSON schema
//

TEST_CASE("json schema: objects, required and optional properties in schema order") {
    auto g = schema_grammar(R"({"type": "object", "properties": {"name": {"type": "string"}, "age": {"type": "integer"},
                                "tags": {"type": "array", "items": {"type": "string"}}},
                                "required": ["name"], "additionalProperties": false})");
    check_strings(g,
                  {R"({"name":"x"})", R"({"name": "x", "age": -3})", R"({ "name" : "x" , "tags" : [ "a" , "b" ] })",
                   R"({"name":"x","age":1,"tags":[]})"},
                  {R"({})", R"({"age":3})", R"({"name":"x","extra":1})", R"({"name":1})", R"({"name":"x",})",
                   R"({"name":"x","age":1.5})", R"({"name":"x","tags":[1]})", R"({"name":"x"}x)"});

    // additionalProperties absent (= true): other keys with any value, but a named key keeps its schema
    auto open =
        schema_grammar(R"({"type": "object", "properties": {"a": {"type": "integer"}, "ab": {"type": "null"}}})");
    check_strings(open,
                  {R"({})", R"({"a":1,"b":"x"})", R"({"abc":[1]})", R"({"b":true,"c":{}})", R"({"":1})",
                   R"({"a":1,"ab":null,"x":1,"y":2})"},
                  {R"({"a":"x"})", R"({"b":1,"a":1})", R"({"ab":1})", R"({"a":1,"b"})"});
    // additionalProperties as a schema
    check_strings(schema_grammar(R"({"type": "object", "additionalProperties": {"type": "number"}})"),
                  {R"({})", R"({"x": 1.5, "y": -2})"}, {R"({"x": "s"})"});
    // no type, only properties: an object
    check_strings(schema_grammar(R"({"properties": {"a": {"const": 1}}, "required": ["a"]})"), {R"({"a":1})"},
                  {R"({"a":2})", R"([])"});
}

TEST_CASE("json schema: arrays, enum, const, anyOf, type lists") {
    auto a = schema_grammar(R"({"type": "array", "items": {"type": "boolean"}, "minItems": 1, "maxItems": 3})");
    check_strings(a, {"[true]", "[true, false,true]", "[ false ]"}, {"[]", "[true,true,true,true]", "[1]", "[true,]"});
    auto p = schema_grammar(R"({"prefixItems": [{"type": "integer"}, {"type": "string"}], "items": false})");
    check_strings(p, {"[]", "[1]", "[1, \"a\"]"}, {"[1,\"a\",2]", "[\"a\"]"});
    auto p2 = schema_grammar(R"({"prefixItems": [{"type": "integer"}], "items": {"type": "null"}, "minItems": 2})");
    check_strings(p2, {"[1,null]", "[1,null,null]"}, {"[1]", "[]", "[1,2]"});
    check_strings(schema_grammar(R"({"type": "array", "maxItems": 0})"), {"[]", "[ ]"}, {"[1]"});

    check_strings(schema_grammar(R"({"enum": ["red", "green", 3, null, {"a": [1]}]})"),
                  {"\"red\"", "\"green\"", "3", "null", "{\"a\":[1]}"}, {"\"blue\"", "\"red \"", "4"});
    check_strings(schema_grammar(R"({"const": "x\"y"})"), {R"("x\"y")"}, {R"("xy")"});
    check_strings(schema_grammar(R"({"anyOf": [{"type": "string"}, {"type": "null"}]})"), {"\"s\"", "null"}, {"1"});
    check_strings(schema_grammar(R"({"oneOf": [{"type": "integer"}, {"type": "boolean"}]})"), {"1", "true"}, {"\"1\""});
    check_strings(schema_grammar(R"({"type": ["integer", "null"]})"), {"-1", "null"}, {"1.5", "\"\""});
    check_strings(schema_grammar(R"({})"), {"1", "\"x\"", "[1, {\"a\": null}]", "-1.5e+3", "true"}, {"", "x", "[1,]"});
    check_strings(schema_grammar(R"({"type": "number"})"), {"0", "-1.25", "3e7"}, {"01", "1.", ".5"});
}

TEST_CASE("json schema: $ref, $defs, definitions, recursion and allOf") {
    auto list = schema_grammar(R"({
        "$defs": {"node": {"type": "object", "additionalProperties": false, "required": ["v", "next"],
                  "properties": {"v": {"type": "integer"}, "next": {"anyOf": [{"$ref": "#/$defs/node"}, {"type": "null"}]}}}},
        "$ref": "#/$defs/node"})");
    check_strings(list, {R"({"v":1,"next":null})", R"({"v":1,"next":{"v":2,"next":{"v":3,"next":null}}})"},
                  {R"({"v":1})", R"({"v":1,"next":{"v":2}})"});
    check_strings(
        schema_grammar(
            R"({"definitions": {"x": {"type": "integer"}}, "type": "array", "items": {"$ref": "#/definitions/x"}})"),
        {"[1,2]"}, {"[\"a\"]"});
    check_strings(
        schema_grammar(R"({"type": "object", "properties": {"kids": {"type": "array", "items": {"$ref": "#"}}},
                                     "additionalProperties": false})"),
        {R"({})", R"({"kids":[{},{"kids":[]}]})"}, {R"({"kids":[1]})"});
    auto all =
        schema_grammar(R"({"allOf": [{"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]},
                                            {"$ref": "#/$defs/b"}],
                                  "$defs": {"b": {"properties": {"b": {"type": "string"}}, "required": ["b"]}},
                                  "additionalProperties": false})");
    check_strings(all, {R"({"a":1,"b":"x"})"}, {R"({"a":1})", R"({"b":"x"})", R"({"a":1,"b":"x","c":1})"});
}

TEST_CASE("json schema: string lengths, patterns and formats") {
    check_strings(schema_grammar(R"({"type": "string", "minLength": 2, "maxLength": 3})"),
                  {R"("ab")", R"("abc")", R"("a\nb")", R"("日本")"}, {R"("a")", R"("abcd")", R"("")"});
    check_strings(schema_grammar(R"({"type": "string", "pattern": "^[A-Z]{2}-\\d{3}$"})"), {R"("AB-123")"},
                  {R"("AB-12")", R"("ab-123")", R"("AB-1234")"});
    check_strings(schema_grammar(R"({"type": "string", "pattern": "abc"})"), {R"("abc")", R"("xxabcyy")"},
                  {R"("xxab")", R"("")"});
    check_strings(schema_grammar(R"({"type": "string", "pattern": "^(cat|dog)s?( [0-9]+)*\\.?$"})"),
                  {R"("cat")", R"("dogs 1 22.")"}, {R"("cow")", R"("cats  1")"});
    check_strings(schema_grammar(R"({"type": "string", "pattern": "^[^a-z\"]+$"})"), {R"("A1 ")", R"("\\")"},
                  {R"("a")", R"("\"")"});
    check_strings(schema_grammar(R"({"type": "string", "pattern": "^\"\\w+\\s\\.$"})"),
                  {R"("\"ab_1 .")", R"("\"x\t.")"}, {R"("x .")", R"("\"- .")"});
    check_strings(schema_grammar(R"({"type": "string", "format": "date"})"), {R"("2024-02-29")"},
                  {R"("2024-13-01")", R"("24-01-01")"});
    check_strings(schema_grammar(R"({"type": "string", "format": "time"})"),
                  {R"("23:59:59Z")", R"("01:02:03.5+05:30")"}, {R"("24:00:00Z")", R"("12:00:00")"});
    check_strings(schema_grammar(R"({"type": "string", "format": "date-time"})"), {R"("2024-01-31T10:00:00Z")"},
                  {R"("2024-01-31 10:00:00Z")"});
    check_strings(schema_grammar(R"({"format": "uuid"})"), {R"("123e4567-e89b-12d3-a456-426614174000")"},
                  {R"("123e4567e89b12d3a456426614174000")"});
    check_strings(schema_grammar(R"({"type": "string", "format": "email"})"), {R"("anything")"}, {"1"});
}

TEST_CASE("json schema: integer ranges equal a direct check") {
    struct range_case {
        const char * schema;
        long lo, hi; // the expected admitted range
    };
    const range_case cases[] = {
        {R"({"type": "integer", "minimum": -5, "maximum": 120})", -5, 120},
        {R"({"type": "integer", "minimum": 0, "maximum": 1000})", 0, 1000},
        {R"({"type": "integer", "exclusiveMinimum": 0, "maximum": 99})", 1, 99},
        {R"({"type": "integer", "minimum": 17, "exclusiveMaximum": 318})", 17, 317},
        {R"({"type": "integer", "minimum": -1234, "maximum": -18})", -1234, -18},
        {R"({"type": "integer", "minimum": 7})", 7, 1000000},
        {R"({"type": "integer", "maximum": 42})", -1000000, 42},
        {R"({"type": "integer", "minimum": -42})", -42, 1000000},
        {R"({"type": "integer", "minimum": 1.5, "maximum": 3.5})", 2, 3},
    };
    for (const range_case & c : cases) {
        INFO(c.schema);
        auto g = schema_grammar(c.schema);
        for (long x = -2000; x <= 2000; ++x) {
            const bool want = x >= c.lo && x <= c.hi;
            if (matches(g, std::to_string(x)) != want) {
                FAIL_CHECK(x << (want ? " rejected" : " accepted"));
                break;
            }
        }
        CHECK(matches(g, std::to_string(c.hi == 1000000 ? 123456789 : c.hi)) == true);
        CHECK(!matches(g, "01"));
        CHECK(!matches(g, "-0"));
    }
}

TEST_CASE("json schema: errors name the keyword and where it is") {
    CHECK(schema_err(R"({"type": "object", "patternProperties": {}})") ==
          "json-schema: #: unsupported keyword 'patternProperties'");
    CHECK(schema_err(R"({"properties": {"a/b": {"items": {"multipleOf": 2}}}})") ==
          "json-schema: #/properties/a~1b/items: unsupported keyword 'multipleOf'");
    CHECK(schema_err(R"({"type": "number", "minimum": 0})") ==
          "json-schema: #: unsupported keyword 'minimum' for type number");
    CHECK(schema_err(R"({"$ref": "#/$defs/nope"})") == "json-schema: #: unresolved $ref '#/$defs/nope'");
    CHECK(schema_err(R"({"$ref": "http://x/y.json"})") ==
          "json-schema: #: only local $refs (#/...) are supported: 'http://x/y.json'");
    CHECK(schema_err(R"({"type": "string", "pattern": "^(?=a)$"})") ==
          "json-schema: #: pattern: unsupported group (?...) at offset 1");
    CHECK(schema_err(R"({"type": "string", "pattern": "^(x|)*$"})") ==
          "json-schema: #: pattern: a repeated item can match the empty string at offset 5");
    CHECK(schema_err(R"({"properties": {"a\nb": {"nope": 1}}})") ==
          "json-schema: #/properties/a\\x0Ab: unsupported keyword 'nope'");
    CHECK(schema_err(R"({"type": "strin"})") == "json-schema: #: unknown type 'strin'");
    CHECK(schema_err(R"({"type": "array", "minItems": 3, "maxItems": 2})") ==
          "json-schema: #: minItems is above maxItems");
    CHECK(schema_err("{\"type\": ").rfind("json-schema: invalid JSON: ", 0) == 0);
    CHECK(schema_err("{\"not\": {}}") == "json-schema: #: unsupported keyword 'not'");
}

//
// sampler
//

TEST_CASE("sampler with a grammar: every sampled sequence is accepted (fake vocab, random logits)") {
    const llm_vocab v = fake_vocab(small_pieces());
    std::mt19937 rng(1234);
    for (const char * name : {"json", "arithmetic", "list"}) {
        const std::string text = grammar_file(name);
        for (int run = 0; run < 8; ++run) {
            INFO(name << " run " << run);
            llm_sampler_params p;
            p.seed = 100 + run;
            p.temp = run % 4 == 3 ? 0.0f : 0.5f + 0.25f * (float)run; // greedy too
            if (run % 2) p.top_k = 0;
            llm_sampler s(p);
            std::string err;
            REQUIRE(s.set_grammar(text, v, &err));
            std::string out;
            bool ended = false;
            std::vector<float> logits(v.n_vocab());
            for (int step = 0; step < 200 && !ended; ++step) {
                for (float & l : logits)
                    l = std::normal_distribution<float>(0.0f, 3.0f)(rng);
                logits[v.eos] = step > 40 ? 6.0f : -5.0f; // push towards an end after a while
                const int32_t id = s.sample(logits.data(), v.n_vocab());
                REQUIRE_MESSAGE(id >= 0, s.last_error());
                s.accept(id);
                REQUIRE(s.last_error().empty());
                if (id == v.eos) {
                    ended = true;
                } else {
                    out += v.pieces[id];
                }
            }
            llm_grammar_matcher check(parse_ok(text));
            CHECK_MESSAGE(check.accept_bytes(out), out);
            if (ended) CHECK_MESSAGE(check.is_complete(), out);
        }
    }
}

TEST_CASE("sampler without a grammar is unchanged; clear_grammar restores it") {
    const llm_vocab v = fake_vocab(small_pieces());
    std::vector<float> logits(v.n_vocab(), 0.0f);
    logits[v.find_token("Z") >= 0 ? v.find_token("Z") : 0] = 10.0f;
    llm_sampler_params p;
    p.temp = 0;
    llm_sampler s(p);
    const int32_t free_pick = s.sample(logits.data(), v.n_vocab());
    std::string err;
    REQUIRE(s.set_grammar("root ::= \"ab\"\n", v, &err));
    CHECK(s.has_grammar());
    const int32_t id = s.sample(logits.data(), v.n_vocab());
    CHECK((v.pieces[id] == "a" || v.pieces[id] == "ab"));
    s.clear_grammar();
    CHECK(s.sample(logits.data(), v.n_vocab()) == free_pick);
    // a bad grammar leaves the sampler as it was
    CHECK(!s.set_grammar("root ::= (\n", v, &err));
    CHECK(err == "grammar: line 1, col 10: unclosed '('");
    CHECK(!s.has_grammar());
    CHECK(!s.set_json_schema("{\"type\": \"integer\", \"uniqueItems\": true}", v, &err));
    CHECK(err == "json-schema: #: unsupported keyword 'uniqueItems'");
}

TEST_CASE("sampler: no token can continue the parse") {
    const llm_vocab v = fake_vocab({"a", "b", "ab", "{", "}"});
    llm_sampler_params p;
    p.seed = 7;
    llm_sampler s(p);
    std::string err;
    REQUIRE(s.set_grammar("root ::= \"ab\" [x-z]\n", v, &err));
    std::vector<float> logits(v.n_vocab(), 0.0f);
    logits[0] = 5.0f; // "a" is the favourite
    int32_t id = s.sample(logits.data(), v.n_vocab());
    REQUIRE(id >= 0);
    s.accept(id);
    if (v.pieces[id] == "a") {
        id = s.sample(logits.data(), v.n_vocab());
        CHECK(v.pieces[id] == "b");
        s.accept(id);
    }
    CHECK(s.sample(logits.data(), v.n_vocab()) == -1);
    CHECK(s.last_error() == "grammar: no token can continue the parse at byte 2 (\"ab\")");
    // accepting a token the grammar rejects leaves it in place and says so
    s.accept(3);
    CHECK(s.last_error() == "grammar: token 3 does not continue the parse at byte 2 (\"ab\")");
    s.reset();
    CHECK(s.last_error().empty());
    CHECK(s.sample(logits.data(), v.n_vocab()) == 0);

    // EOS only when complete, and then it is the only choice left
    llm_sampler t(p);
    REQUIRE(t.set_grammar("root ::= \"a\"\n", v, &err));
    logits.assign(v.n_vocab(), 0.0f);
    logits[v.eos] = 9.0f;
    id = t.sample(logits.data(), v.n_vocab());
    CHECK(id == 0);
    t.accept(id);
    CHECK(t.sample(logits.data(), v.n_vocab()) == v.eos);
    logits[v.eos] = -9.0f;
    CHECK(t.sample(logits.data(), v.n_vocab()) == v.eos);
}

//
// the real vocabs
//

TEST_CASE("Llama 3 vocab: masks on real tokens equal the per-token check along a JSON document") {
    const llm_vocab * v = shared_vocab("models/ggml-vocab-llama-bpe.gguf");
    if (!v) return;
    REQUIRE(v->n_vocab() == 128256);
    auto toks = llm_grammar_tokens_get(*v);
    CHECK(toks->order.size() + toks->eog_ids.size() <= (size_t)v->n_vocab());
    const std::string doc =
        "{\"name\": \"Zoë 日本語 🎉\", \"n\": [1, -2.5e3, true, null],\n  \"nested\": {\"k\": \"v\\n\\u00e9\"}}";
    const std::vector<int32_t> ids = llm_tokenize(*v, doc, /*add_special=*/false, /*parse_special=*/false);
    REQUIRE(ids.size() > 10);
    llm_grammar_matcher m(parse_ok(grammar_file("json")));
    std::string seen;
    for (size_t i = 0; i <= ids.size(); ++i) {
        INFO("token " << i << " after \"" << seen << "\"");
        std::vector<int32_t> a = trie_valid(m, *toks);
        if (i % 3 == 0 || i == ids.size()) CHECK(a == brute_valid(m, *toks));
        if (i == ids.size()) {
            CHECK(m.is_complete());
            CHECK(std::binary_search(a.begin(), a.end(), v->eos));
            break;
        }
        CHECK(std::binary_search(a.begin(), a.end(), ids[i]));
        if (std::binary_search(a.begin(), a.end(), v->eos)) FAIL_CHECK("EOS allowed before the end");
        REQUIRE(m.accept_token(*toks, ids[i]));
        seen += toks->bytes[ids[i]];
    }
    CHECK(seen == doc);

    // the sampler on the real vocab, random logits over the whole distribution: every pick continues the parse
    llm_sampler_params p;
    p.seed = 3;
    p.top_k = 0;
    p.top_p = 1.0f;
    p.min_p = 0.0f;
    llm_sampler s(p);
    std::string err;
    REQUIRE(s.set_grammar(grammar_file("json"), *v, &err));
    std::mt19937 rng(5);
    std::vector<float> logits(v->n_vocab());
    std::string out;
    for (int step = 0; step < 32; ++step) {
        for (float & l : logits)
            l = std::normal_distribution<float>(0.0f, 2.0f)(rng);
        const int32_t id = s.sample(logits.data(), v->n_vocab());
        REQUIRE_MESSAGE(id >= 0, s.last_error());
        s.accept(id);
        REQUIRE(s.last_error().empty());
        if (v->is_eog(id)) break;
        out += toks->bytes[id];
    }
    llm_grammar_matcher check(parse_ok(grammar_file("json")));
    CHECK_MESSAGE(check.accept_bytes(out), out);
}

TEST_CASE("Llama 2 (SPM) vocab: '▁' and <0xNN> byte tokens under a grammar") {
    const llm_vocab * v = shared_vocab("models/ggml-vocab-llama-spm.gguf");
    if (!v) return;
    auto toks = llm_grammar_tokens_get(*v);
    // byte tokens give their byte, "▁" a space
    const int32_t b41 = v->find_token("<0x41>"), sp = v->find_token("▁the");
    REQUIRE(b41 >= 0);
    REQUIRE(sp >= 0);
    CHECK(toks->bytes[b41] == "A");
    CHECK(toks->bytes[sp] == " the");
    llm_grammar_matcher m(parse_ok("root ::= \" \"? [a-z ]+ \"é\" \"!\"\n"));
    const std::vector<int32_t> a = trie_valid(m, *toks);
    CHECK(a == brute_valid(m, *toks));
    CHECK(std::binary_search(a.begin(), a.end(), sp));
    CHECK(!std::binary_search(a.begin(), a.end(), b41));
    REQUIRE(m.accept_token(*toks, sp));
    REQUIRE(m.accept_token(*toks, v->find_token("<0xC3>"))); // é as two byte tokens
    const std::vector<int32_t> mid = trie_valid(m, *toks);
    CHECK(mid == brute_valid(m, *toks));
    CHECK(mid == std::vector<int32_t>{v->find_token("<0xA9>")});
    REQUIRE(m.accept_token(*toks, v->find_token("<0xA9>")));
    REQUIRE(m.accept_token(*toks, v->find_token("!")));
    CHECK(m.is_complete());
}

// What llm_sampler::sample does when the chain's pick breaks the grammar (valid_tokens, pick among them,
// accept_token), with random picks over the 512-token SPM vocab of stories260K (every <0xNN> byte token):
// every step has a valid token until the grammar completes, and the matcher's bytes are the tokens' bytes.
// Regression: the lone byte token <0xE0> (or <0xF0>) was valid where only ASCII can follow, and after it
// no token could continue ("no token can continue the parse at byte 1").
TEST_CASE("stories260K vocab: random walks of valid_tokens + accept_token never get stuck") {
    const llm_vocab * v = shared_vocab("models/stories260K.gguf");
    if (!v) return;
    auto toks = llm_grammar_tokens_get(*v);
    REQUIRE(toks->n_vocab == 512);
    std::string gbnf, err;
    REQUIRE_MESSAGE(
        llm_json_schema_to_gbnf(
            R"({"type":"object","properties":{"a":{"type":"integer"}},"required":["a"],"additionalProperties":false})",
            gbnf, &err),
        err);
    const std::vector<std::string> grammars = {
        "root ::= \"{\" [a-z]+ \"}\"\n",
        gbnf,
        grammar_file("json"),
        "root ::= ( [a-z é日本] | \"\\U0001F389\" )+ \".\"\n",
    };
    for (size_t gi = 0; gi < grammars.size(); ++gi) {
        llm_grammar_matcher m(parse_ok(grammars[gi]));
        for (uint32_t seed = 1; seed <= 8; ++seed) {
            INFO("grammar " << gi << ", seed " << seed);
            m.reset();
            std::mt19937 rng(seed);
            std::string text;
            std::vector<int32_t> valid;
            for (int step = 0; step < 50; ++step) {
                INFO("step " << step << ", text so far: " << text);
                m.valid_tokens(*toks, valid);
                REQUIRE_MESSAGE(!valid.empty(), "no token can continue the parse");
                std::vector<int32_t> sorted = valid;
                std::sort(sorted.begin(), sorted.end());
                CHECK(sorted == brute_valid(m, *toks));
                // prefer to keep going: EOS only when nothing else is valid or one time in four
                std::vector<int32_t> cont;
                for (int32_t id : valid) {
                    if (!toks->is_eog[id]) cont.push_back(id);
                }
                const bool eos = cont.empty() || (m.is_complete() && rng() % 4 == 0);
                if (eos) {
                    CHECK(m.is_complete());
                    CHECK(m.accept_token(*toks, toks->eog_ids[0]));
                    break;
                }
                const int32_t id = cont[rng() % cont.size()];
                REQUIRE(m.token_valid(*toks, id));
                REQUIRE(m.accept_token(*toks, id));
                text += toks->bytes[id];
                CHECK(m.n_bytes() == text.size());
                CHECK(m.tail() == text.substr(text.size() - std::min<size_t>(32, text.size())));
            }
            // the accepted bytes are a prefix of a sentence of the grammar (and one when complete)
            llm_grammar_matcher check(parse_ok(grammars[gi]));
            CHECK(check.accept_bytes(text));
            CHECK(check.is_complete() == m.is_complete());
        }
    }
}
