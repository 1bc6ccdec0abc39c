// json-schema.cpp - JSON schema -> GBNF (see grammar.h for what is supported).
//
// Every schema becomes one expression; composite ones get a rule named after where they are
// ("root-address-street", "ref-node"), identical bodies share one rule. Objects keep the schema's property
// order: for n properties, rules S(i, first) say "the rest from property i on, nothing written yet or not",
// so optional properties can be left out without dangling commas. Strings inside patterns and formats are
// matched on their JSON text (a '"' in the data appears as \").
#include "grammar.h"
#include "unicode.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>

namespace {

using json = nlohmann::ordered_json;

struct schema_error {
    std::string where; // JSON pointer into the schema
    std::string msg;
};

// the shared rules, each with the rules it uses
struct primitive {
    const char * name;
    const char * body;
    const char * deps; // space separated
};
const primitive PRIMITIVES[] = {
    {"ws", R"([ \t\n]{0,20})", ""},
    {"value", "object | array | string | number | boolean | null", "object array string number boolean null"},
    {"object", R"("{" ws ( string ws ":" ws value ws ( "," ws string ws ":" ws value ws )* )? "}")", "ws string value"},
    {"array", R"("[" ws ( value ws ( "," ws value ws )* )? "]")", "ws value"},
    {"string", R"("\"" char* "\"")", "char"},
    {"char", R"([^"\\\x00-\x1F] | "\\" ( ["\\/bfnrt] | "u" [0-9a-fA-F]{4} ))", ""},
    {"number", R"("-"? int-digits ( "." [0-9]+ )? ( [eE] [-+]? [0-9]+ )?)", "int-digits"},
    {"integer", R"("-"? int-digits)", "int-digits"},
    {"int-digits", R"("0" | [1-9] [0-9]{0,15})", ""},
    {"boolean", R"("true" | "false")", ""},
    {"null", R"("null")", ""},
    {"date", R"([0-9]{4} "-" ( "0" [1-9] | "1" [0-2] ) "-" ( "0" [1-9] | [12] [0-9] | "3" [01] ))", ""},
    {"time",
     R"(( [01] [0-9] | "2" [0-3] ) ":" [0-5] [0-9] ":" [0-5] [0-9] ( "." [0-9]{1,9} )? ( "Z" | [+-] ( [01] [0-9] | "2" [0-3] ) ":" [0-5] [0-9] ))",
     ""},
    {"hex", "[0-9a-fA-F]", ""},
    {"uuid", R"(hex{8} "-" hex{4} "-" hex{4} "-" hex{4} "-" hex{12})", "hex"},
};

const std::set<std::string> ANNOTATIONS = {"title",     "description", "$schema",  "$id",
                                           "$comment",  "default",     "examples", "readOnly",
                                           "writeOnly", "deprecated",  "$defs",    "definitions"};
const std::set<std::string> KEYWORDS = {"type",
                                        "properties",
                                        "required",
                                        "additionalProperties",
                                        "items",
                                        "prefixItems",
                                        "minItems",
                                        "maxItems",
                                        "enum",
                                        "const",
                                        "anyOf",
                                        "oneOf",
                                        "allOf",
                                        "$ref",
                                        "minLength",
                                        "maxLength",
                                        "pattern",
                                        "format",
                                        "minimum",
                                        "maximum",
                                        "exclusiveMinimum",
                                        "exclusiveMaximum"};

// the code point at s[i], i moved past it (s comes from parsed JSON, so it is valid UTF-8)
uint32_t next_cpt(std::string_view s, size_t & i) {
    uint32_t c = 0;
    if (!unicode_cpt_from_utf8(s, i, c)) c = (unsigned char)s[i++]; // not reached with valid UTF-8
    return c;
}

// a GBNF "literal" of UTF-8 text
std::string lit(const std::string & s) {
    std::string out = "\"";
    llm_grammar_escape_bytes(out, s);
    return out + "\"";
}

// one code point inside a GBNF [class]
std::string class_char(uint32_t c) {
    char buf[16];
    if (c == '\\' || c == ']' || c == '[' || c == '-' || c == '^' || c == '"') {
        snprintf(buf, sizeof(buf), "\\x%02X", c);
    } else if (c < 0x20 || c == 0x7F) {
        snprintf(buf, sizeof(buf), "\\x%02X", c);
    } else if (c < 0x80) {
        buf[0] = (char)c;
        buf[1] = 0;
    } else if (c <= 0xFFFF) {
        snprintf(buf, sizeof(buf), "\\u%04X", c);
    } else {
        snprintf(buf, sizeof(buf), "\\U%08X", c);
    }
    return buf;
}

std::string group(const std::string & e) {
    if (e.empty()) return "\"\"";
    return e.find('|') == std::string::npos ? e : "( " + e + " )";
}

std::string join(const std::vector<std::string> & v, const char * sep) {
    std::string out;
    for (size_t i = 0; i < v.size(); ++i)
        out += (i ? sep : "") + v[i];
    return out;
}

std::string sanitize(const std::string & s) {
    std::string out;
    for (char c : s) {
        const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
        if (ok) {
            out += c;
        } else if (!out.empty() && out.back() != '-') {
            out += '-';
        }
    }
    while (!out.empty() && out.back() == '-')
        out.pop_back();
    return out.empty() ? "x" : out;
}

std::string pointer_escape(const std::string & key) {
    std::string out;
    for (char c : key) {
        if (c == '~') {
            out += "~0";
        } else if (c == '/') {
            out += "~1";
        } else {
            out += c;
        }
    }
    return out;
}

//
// integer ranges
//

// GBNF for the decimal numbers from a to b, both with the same number of digits (a <= b)
std::string same_len(const std::string & a, const std::string & b) {
    if (a.empty()) return "";
    if (a == b) return lit(a);
    const size_t rest = a.size() - 1;
    if (a[0] == b[0]) return lit(a.substr(0, 1)) + " " + group(same_len(a.substr(1), b.substr(1)));
    const bool lo_zeros = a.find_first_not_of('0', 1) == std::string::npos;
    const bool hi_nines = b.find_first_not_of('9', 1) == std::string::npos;
    std::vector<std::string> alts;
    char dlo = a[0], dhi = b[0];
    if (!lo_zeros) {
        alts.push_back(lit(a.substr(0, 1)) + " " + group(same_len(a.substr(1), std::string(rest, '9'))));
        ++dlo;
    }
    if (dlo <= dhi - (hi_nines ? 0 : 1)) {
        const char top = hi_nines ? dhi : (char)(dhi - 1);
        std::string d = dlo == top ? lit(std::string(1, dlo)) : std::string("[") + dlo + "-" + top + "]";
        if (rest > 0) d += " [0-9]" + (rest > 1 ? "{" + std::to_string(rest) + "}" : std::string());
        alts.push_back(d);
    }
    if (!hi_nines) alts.push_back(lit(b.substr(0, 1)) + " " + group(same_len(std::string(rest, '0'), b.substr(1))));
    return join(alts, " | ");
}

// non-negative integers in [a, b] (b: nullopt = no maximum), at most 16 digits when open
std::string nonneg_range(uint64_t a, std::optional<uint64_t> b) {
    std::vector<std::string> alts;
    const size_t la = std::to_string(a).size();
    const size_t lb = b ? std::to_string(*b).size() : la;
    uint64_t p10 = 1;
    for (size_t i = 1; i < la; ++i)
        p10 *= 10; // 10^(la-1)
    for (size_t l = la; l <= lb; ++l) {
        const uint64_t lo = l == la ? a : p10;
        const uint64_t hi = (b && l == lb) ? *b : (l >= 20 ? UINT64_MAX : p10 * 10 - 1);
        alts.push_back(group(same_len(std::to_string(lo), std::to_string(hi))));
        if (l < 20) p10 *= 10;
    }
    if (!b && la < 16) alts.push_back("[1-9] [0-9]{" + std::to_string(la) + ",15}");
    return join(alts, " | ");
}

//
// the converter
//

class converter {
  public:
    explicit converter(const json & root) : root_(root) {}

    std::string run() {
        const std::string e = visit(root_, "", "root");
        if (e != "root") define("root", e);
        std::string out;
        for (const auto & r : rules_)
            out += r.first + " ::= " + r.second + "\n";
        for (const primitive & p : PRIMITIVES) {
            if (used_.count(p.name)) out += std::string(p.name) + " ::= " + p.body + "\n";
        }
        return out;
    }

  private:
    const json & root_;
    std::vector<std::pair<std::string, std::string>> rules_;
    std::set<std::string> names_ = {"root"}; // taken (root: reserved for the end)
    std::map<std::string, std::string> by_body_;
    std::set<std::string> used_;              // primitives
    std::map<std::string, std::string> refs_; // "$ref" -> rule

    [[noreturn]] static void fail(const std::string & where, const std::string & msg) {
        throw schema_error{where, msg};
    }

    std::string prim(const std::string & name) {
        if (used_.insert(name).second) {
            for (const primitive & p : PRIMITIVES) {
                if (name != p.name) continue;
                std::string d = p.deps, w;
                for (size_t i = 0; i <= d.size(); ++i) {
                    if (i == d.size() || d[i] == ' ') {
                        if (!w.empty()) prim(w);
                        w.clear();
                    } else {
                        w += d[i];
                    }
                }
            }
        }
        return name;
    }

    std::string unique(const std::string & hint) {
        std::string n = hint;
        for (int k = 1; names_.count(n) || n == "ws"; ++k)
            n = hint + "-" + std::to_string(k);
        for (const primitive & p : PRIMITIVES) {
            if (n == p.name) n = hint + "-x";
        }
        names_.insert(n);
        return n;
    }

    void define(const std::string & name, const std::string & body) {
        names_.insert(name);
        rules_.push_back({name, body.empty() ? "\"\"" : body});
    }

    // a rule for body (shared with an identical one), named after hint; the top schema gets "root"
    std::string add(const std::string & hint, const std::string & body) {
        const std::string b = body.empty() ? "\"\"" : body;
        auto it = by_body_.find(b);
        if (it != by_body_.end()) return it->second;
        std::string name;
        if (hint == "root" && !defined_root_) {
            name = "root";
            defined_root_ = true;
        } else {
            name = unique(hint);
        }
        define(name, b);
        by_body_[b] = name;
        return name;
    }
    bool defined_root_ = false;

    std::string visit(const json & s, const std::string & path, const std::string & hint);
    std::string visit_type(const json & s, const std::string & type, const std::string & path,
                           const std::string & hint);
    std::string ref(const std::string & r, const std::string & path);
    std::string object(const json & s, const std::string & path, const std::string & hint);
    std::string array(const json & s, const std::string & path, const std::string & hint);
    std::string string(const json & s, const std::string & path, const std::string & hint);
    std::string integer(const json & s, const std::string & path, const std::string & hint);
    std::string key_not_in(const std::vector<std::string> & keys, const std::string & hint);
    std::string pattern(const std::string & re, const std::string & path, const std::string & hint);
    const json & resolve(const json & s, const std::string & path, int depth = 0);
};

std::string converter::visit(const json & s, const std::string & path, const std::string & hint) {
    if (s.is_boolean()) {
        if (s.get<bool>()) return prim("value");
        fail(path, "the schema false matches nothing");
    }
    if (!s.is_object()) fail(path, "a schema must be an object or a boolean");
    std::vector<std::string> constraining;
    for (auto it = s.begin(); it != s.end(); ++it) {
        if (ANNOTATIONS.count(it.key())) continue;
        if (!KEYWORDS.count(it.key())) fail(path, "unsupported keyword '" + it.key() + "'");
        constraining.push_back(it.key());
    }
    const auto only = [&](const char * kw) {
        for (const std::string & k : constraining) {
            if (k != kw) fail(path, std::string("'") + kw + "' next to '" + k + "' is not supported");
        }
    };
    if (s.contains("$ref")) {
        only("$ref");
        if (!s["$ref"].is_string()) fail(path, "'$ref' must be a string");
        return ref(s["$ref"].get<std::string>(), path);
    }
    if (s.contains("const")) return lit(s["const"].dump());
    if (s.contains("enum")) {
        const json & e = s["enum"];
        if (!e.is_array() || e.empty()) fail(path, "'enum' must be a non-empty array");
        std::vector<std::string> alts;
        for (const json & v : e)
            alts.push_back(lit(v.dump()));
        return add(hint, join(alts, " | "));
    }
    for (const char * kw : {"anyOf", "oneOf"}) {
        if (!s.contains(kw)) continue;
        only(kw);
        const json & a = s[kw];
        if (!a.is_array() || a.empty()) fail(path, std::string("'") + kw + "' must be a non-empty array");
        std::vector<std::string> alts;
        for (size_t i = 0; i < a.size(); ++i) {
            alts.push_back(visit(a[i], path + "/" + kw + "/" + std::to_string(i), hint + "-" + std::to_string(i)));
        }
        return add(hint, join(alts, " | "));
    }
    if (s.contains("allOf")) {
        const json & a = s["allOf"];
        if (!a.is_array() || a.empty()) fail(path, "'allOf' must be a non-empty array");
        if (a.size() == 1 && constraining.size() == 1) return visit(a[0], path + "/allOf/0", hint);
        // objects only: properties in order of appearance, required and the last additionalProperties merged
        json merged = json::object();
        merged["type"] = "object";
        json props = json::object(), req = json::array();
        const auto take = [&](const json & part, const std::string & where) {
            if (!part.is_object()) fail(where, "allOf: only objects can be combined");
            for (auto it = part.begin(); it != part.end(); ++it) {
                const std::string & k = it.key();
                if (ANNOTATIONS.count(k) || k == "allOf") continue;
                if (k == "type") {
                    if (it.value() != "object") fail(where, "allOf: only objects can be combined");
                } else if (k == "properties") {
                    for (auto p = it.value().begin(); p != it.value().end(); ++p) {
                        if (!props.contains(p.key())) props[p.key()] = p.value();
                    }
                } else if (k == "required") {
                    for (const json & r : it.value())
                        req.push_back(r);
                } else if (k == "additionalProperties") {
                    merged["additionalProperties"] = it.value();
                } else {
                    fail(where, "allOf: unsupported keyword '" + k + "' in a combined object");
                }
            }
        };
        take(s, path);
        for (size_t i = 0; i < a.size(); ++i) {
            const std::string where = path + "/allOf/" + std::to_string(i);
            take(resolve(a[i], where), where);
        }
        merged["properties"] = props;
        merged["required"] = req;
        return object(merged, path, hint);
    }
    if (s.contains("type")) {
        const json & t = s["type"];
        if (t.is_string()) return visit_type(s, t.get<std::string>(), path, hint);
        if (!t.is_array() || t.empty()) fail(path, "'type' must be a string or a non-empty array");
        std::vector<std::string> alts;
        for (const json & x : t) {
            if (!x.is_string()) fail(path, "'type' must be a string or a non-empty array");
            alts.push_back(visit_type(s, x.get<std::string>(), path, hint + "-" + x.get<std::string>()));
        }
        return add(hint, join(alts, " | "));
    }
    // no type: the one the keywords imply
    for (const std::string & k : constraining) {
        if (k == "properties" || k == "required" || k == "additionalProperties")
            return visit_type(s, "object", path, hint);
        if (k == "items" || k == "prefixItems" || k == "minItems" || k == "maxItems")
            return visit_type(s, "array", path, hint);
        if (k == "minLength" || k == "maxLength" || k == "pattern" || k == "format")
            return visit_type(s, "string", path, hint);
        if (k == "minimum" || k == "maximum" || k == "exclusiveMinimum" || k == "exclusiveMaximum") {
            return visit_type(s, "number", path, hint);
        }
    }
    return prim("value");
}

std::string converter::visit_type(const json & s, const std::string & type, const std::string & path,
                                  const std::string & hint) {
    if (type == "object") return object(s, path, hint);
    if (type == "array") return array(s, path, hint);
    if (type == "string") return string(s, path, hint);
    if (type == "integer") return integer(s, path, hint);
    if (type == "boolean") return prim("boolean");
    if (type == "null") return prim("null");
    if (type == "number") {
        for (const char * k : {"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"}) {
            if (s.contains(k)) fail(path, std::string("unsupported keyword '") + k + "' for type number");
        }
        return prim("number");
    }
    fail(path, "unknown type '" + type + "'");
}

const json & converter::resolve(const json & s, const std::string & path, int depth) {
    if (s.is_object() && s.contains("$ref") && s["$ref"].is_string()) {
        if (depth > 32) fail(path, "$ref chain too long (a cycle?)");
        const std::string r = s["$ref"].get<std::string>();
        if (r.empty() || r[0] != '#') fail(path, "only local $refs (#/...) are supported: '" + r + "'");
        try {
            return resolve(root_.at(json::json_pointer(r.substr(1))), path, depth + 1);
        } catch (const json::exception &) { fail(path, "unresolved $ref '" + r + "'"); }
    }
    return s;
}

std::string converter::ref(const std::string & r, const std::string & path) {
    auto it = refs_.find(r);
    if (it != refs_.end()) return it->second;
    if (r.empty() || r[0] != '#') fail(path, "only local $refs (#/...) are supported: '" + r + "'");
    const json * target = nullptr;
    try {
        target = &root_.at(json::json_pointer(r.substr(1)));
    } catch (const json::exception &) { fail(path, "unresolved $ref '" + r + "'"); }
    const size_t slash = r.rfind('/');
    const std::string name =
        unique("ref-" + sanitize(slash == std::string::npos || r == "#" ? "root" : r.substr(slash + 1)));
    refs_[r] = name; // before visiting: the target may refer to itself
    const std::string e = visit(*target, r.substr(1), name + "-def");
    define(name, e);
    return name;
}

std::string converter::object(const json & s, const std::string & path, const std::string & hint) {
    json props = s.value("properties", json::object());
    if (!props.is_object()) fail(path, "'properties' must be an object");
    std::set<std::string> required;
    if (s.contains("required")) {
        if (!s["required"].is_array()) fail(path, "'required' must be an array");
        for (const json & r : s["required"]) {
            if (!r.is_string()) fail(path, "'required' must be an array of strings");
            required.insert(r.get<std::string>());
        }
    }
    std::vector<std::string> keys, kvs;
    std::vector<bool> req;
    for (auto it = props.begin(); it != props.end(); ++it) {
        const std::string kh = hint + "-" + sanitize(it.key());
        const std::string v = visit(it.value(), path + "/properties/" + pointer_escape(it.key()), kh);
        keys.push_back(it.key());
        kvs.push_back(add(kh + "-kv", lit(json(it.key()).dump()) + " ws \":\" ws " + v + " ws"));
        req.push_back(required.count(it.key()) > 0);
        required.erase(it.key());
    }
    prim("ws");
    // additional properties: false, true/absent (any value) or a schema
    std::string extra;
    const json ap = s.value("additionalProperties", json(true));
    if (!(ap.is_boolean() && !ap.get<bool>())) {
        const std::string v = visit(ap, path + "/additionalProperties", hint + "-additional");
        extra = add(hint + "-additional-kv", key_not_in(keys, hint + "-key") + " ws \":\" ws " + v + " ws");
    }
    for (const std::string & r : required) { // required but not described: any value under that key
        if (extra.empty()) fail(path, "required property '" + r + "' is not allowed by additionalProperties");
        const std::string kh = hint + "-" + sanitize(r);
        keys.push_back(r);
        kvs.push_back(add(kh + "-kv", lit(json(r).dump()) + " ws \":\" ws " + prim("value") + " ws"));
        req.push_back(true);
    }
    // S(i, first) from the last property back (s_first: nothing written yet; s_next: after a property)
    const size_t n = kvs.size();
    std::vector<std::string> s_first(n + 1), s_next(n + 1);
    if (!extra.empty()) {
        s_first[n] = add(hint + "-rest", "( " + extra + " ( \",\" ws " + extra + " )* )?");
        if (n > 0) s_next[n] = add(hint + "-rest", "( \",\" ws " + extra + " )*");
    }
    for (size_t i = n; i-- > 0;) {
        const std::string with_first = kvs[i] + (s_next[i + 1].empty() ? "" : " " + s_next[i + 1]);
        const std::string with_next = "\",\" ws " + with_first;
        if (req[i]) {
            s_first[i] = add(hint + "-rest", with_first);
            if (i > 0) s_next[i] = add(hint + "-rest", with_next);
        } else {
            s_first[i] =
                add(hint + "-rest", "( " + with_first + " )" + (s_first[i + 1].empty() ? "?" : " | " + s_first[i + 1]));
            if (i > 0) {
                s_next[i] = add(hint + "-rest",
                                "( " + with_next + " )" + (s_next[i + 1].empty() ? "?" : " | " + s_next[i + 1]));
            }
        }
    }
    return add(hint, "\"{\" ws " + (s_first[0].empty() ? "" : s_first[0] + " ") + "\"}\"");
}

// a JSON string (with its quotes) that is none of keys: a trie over the keys' characters, where leaving
// the trie (another character, an escape) is free and ending is allowed except at a key's end
std::string converter::key_not_in(const std::vector<std::string> & keys, const std::string & hint) {
    if (keys.empty()) return prim("string");
    for (const std::string & k : keys) {
        for (unsigned char c : k) {
            if (c == '"' || c == '\\' || c < 0x20) return prim("string"); // such keys are not excluded
        }
    }
    prim("char");
    struct tnode {
        std::map<uint32_t, int> next;
        bool end = false;
    };
    std::vector<tnode> t(1);
    for (const std::string & k : keys) {
        int cur = 0;
        for (size_t i = 0; i < k.size();) {
            const uint32_t c = next_cpt(k, i);
            auto it = t[cur].next.find(c);
            if (it == t[cur].next.end()) {
                t[cur].next[c] = (int)t.size();
                cur = (int)t.size();
                t.emplace_back();
            } else {
                cur = it->second;
            }
        }
        t[cur].end = true;
    }
    const std::string esc = R"("\\" ( ["\\/bfnrt] | "u" [0-9a-fA-F]{4} ))";
    std::vector<std::string> names(t.size());
    for (size_t i = 0; i < t.size(); ++i)
        names[i] = unique(hint + "-" + std::to_string(i));
    for (size_t i = 0; i < t.size(); ++i) {
        std::vector<std::string> alts;
        if (!t[i].end) alts.push_back("\"\\\"\"");
        std::string other = "[^\"\\\\\\x00-\\x1F";
        for (const auto & [c, child] : t[i].next) {
            std::string one;
            unicode_cpt_append_utf8(one, c);
            alts.push_back(lit(one) + " " + names[child]);
            other += class_char(c);
        }
        other += "]";
        alts.push_back("( " + other + " | " + esc + " ) char* \"\\\"\"");
        define(names[i], join(alts, " | "));
    }
    return "\"\\\"\" " + names[0];
}

std::string converter::array(const json & s, const std::string & path, const std::string & hint) {
    const auto count = [&](const char * k, uint64_t def) -> uint64_t {
        if (!s.contains(k)) return def;
        if (!s[k].is_number_unsigned()) fail(path, std::string("'") + k + "' must be a non-negative integer");
        return s[k].get<uint64_t>();
    };
    uint64_t min = count("minItems", 0);
    uint64_t max = count("maxItems", UINT64_MAX);
    std::vector<std::string> prefix;
    if (s.contains("prefixItems")) {
        const json & p = s["prefixItems"];
        if (!p.is_array()) fail(path, "'prefixItems' must be an array");
        for (size_t i = 0; i < p.size(); ++i) {
            prefix.push_back(visit(p[i], path + "/prefixItems/" + std::to_string(i), hint + "-" + std::to_string(i)));
        }
    }
    std::string item; // "" : no items after the prefix
    const json items = s.value("items", json(true));
    if (!(items.is_boolean() && !items.get<bool>())) item = visit(items, path + "/items", hint + "-item");
    const uint64_t k = prefix.size();
    if (item.empty()) max = std::min<uint64_t>(max, k);
    if (min > max) fail(path, "minItems is above maxItems");
    if (max != UINT64_MAX && max > 10000) fail(path, "maxItems above 10000 is not supported");
    if (min > 10000) fail(path, "minItems above 10000 is not supported");
    prim("ws");
    // T(i): elements from i on (i > 0: each preceded by a comma); element i is optional when i >= min
    std::string tail; // T(k)
    if (!item.empty() && max > k) {
        const std::string one = "\",\" ws " + item + " ws";
        if (k == 0) { // the first element has no comma
            const std::string first = item + " ws";
            std::string rest;
            const uint64_t lo = min > 0 ? min - 1 : 0;
            if (max == UINT64_MAX) {
                rest = "( " + one + " )" + (lo == 0 ? "*" : "{" + std::to_string(lo) + ",}");
            } else if (max - 1 > 0) {
                rest = "( " + one + " ){" + std::to_string(lo) + "," + std::to_string(max - 1) + "}";
            }
            tail = first + (rest.empty() ? "" : " " + rest);
            if (min == 0) tail = "( " + tail + " )?";
        } else {
            const uint64_t lo = min > k ? min - k : 0;
            if (max == UINT64_MAX) {
                tail = "( " + one + " )" + (lo == 0 ? "*" : "{" + std::to_string(lo) + ",}");
            } else {
                tail = "( " + one + " ){" + std::to_string(lo) + "," + std::to_string(max - k) + "}";
            }
        }
    }
    std::string body = tail;
    for (uint64_t i = std::min<uint64_t>(k, max); i-- > 0;) {
        std::string e = (i > 0 ? "\",\" ws " : "") + prefix[i] + " ws" + (body.empty() ? "" : " " + body);
        body = i + 1 > min ? "( " + e + " )?" : e; // element i optional when i >= min
        if (i > 0) body = add(hint + "-tail", body);
    }
    return add(hint, "\"[\" ws " + (body.empty() ? "" : body + " ") + "\"]\"");
}

std::string converter::string(const json & s, const std::string & path, const std::string & hint) {
    const bool has_len = s.contains("minLength") || s.contains("maxLength");
    if (s.contains("pattern")) {
        if (has_len) fail(path, "'pattern' next to 'minLength'/'maxLength' is not supported");
        if (!s["pattern"].is_string()) fail(path, "'pattern' must be a string");
        return pattern(s["pattern"].get<std::string>(), path, hint);
    }
    if (s.contains("format") && !has_len) {
        const std::string f = s["format"].is_string() ? s["format"].get<std::string>() : "";
        if (f == "date") return add(hint, "\"\\\"\" " + prim("date") + " \"\\\"\"");
        if (f == "time") return add(hint, "\"\\\"\" " + prim("time") + " \"\\\"\"");
        if (f == "date-time") return add(hint, "\"\\\"\" " + prim("date") + " \"T\" " + prim("time") + " \"\\\"\"");
        if (f == "uuid") return add(hint, "\"\\\"\" " + prim("uuid") + " \"\\\"\"");
        // other formats are annotations: any string
    }
    if (!has_len) return prim("string");
    const auto count = [&](const char * k, uint64_t def) -> uint64_t {
        if (!s.contains(k)) return def;
        if (!s[k].is_number_unsigned()) fail(path, std::string("'") + k + "' must be a non-negative integer");
        return s[k].get<uint64_t>();
    };
    const uint64_t lo = count("minLength", 0), hi = count("maxLength", UINT64_MAX);
    if (lo > hi) fail(path, "minLength is above maxLength");
    if (lo > 10000 || (hi != UINT64_MAX && hi > 10000)) fail(path, "string lengths above 10000 are not supported");
    prim("char");
    std::string rep =
        hi == UINT64_MAX ? "{" + std::to_string(lo) + ",}" : "{" + std::to_string(lo) + "," + std::to_string(hi) + "}";
    return add(hint, "\"\\\"\" char" + rep + " \"\\\"\"");
}

std::string converter::integer(const json & s, const std::string & path, const std::string & hint) {
    std::optional<int64_t> lo, hi;
    const auto bound = [&](const char * k, bool upper, bool exclusive) {
        if (!s.contains(k)) return;
        const json & v = s[k];
        if (!v.is_number()) fail(path, std::string("'") + k + "' must be a number");
        const double d = v.get<double>();
        if (!(std::fabs(d) < 9.0e15)) fail(path, std::string("'") + k + "' is out of range");
        int64_t b = upper ? (int64_t)std::floor(d) : (int64_t)std::ceil(d);
        if (exclusive && (double)b == d) b += upper ? -1 : 1;
        auto & slot = upper ? hi : lo;
        slot = !slot ? b : upper ? std::min(*slot, b) : std::max(*slot, b);
    };
    bound("minimum", false, false);
    bound("exclusiveMinimum", false, true);
    bound("maximum", true, false);
    bound("exclusiveMaximum", true, true);
    if (!lo && !hi) return prim("integer");
    if (lo && hi && *lo > *hi) fail(path, "no integer lies between the minimum and the maximum");
    std::vector<std::string> alts;
    if (!lo || *lo < 0) { // negative values -x, x in [nlo, nhi]
        const uint64_t nlo = (hi && *hi < 0) ? (uint64_t) - *hi : 1;
        const std::optional<uint64_t> nhi = lo ? std::optional<uint64_t>((uint64_t) - *lo) : std::nullopt;
        alts.push_back("\"-\" " + group(nonneg_range(nlo, nhi)));
    }
    if (!hi || *hi >= 0) {
        alts.push_back(nonneg_range(lo ? (uint64_t)std::max<int64_t>(0, *lo) : 0,
                                    hi ? std::optional<uint64_t>((uint64_t)*hi) : std::nullopt));
    }
    return add(hint, join(alts, " | "));
}

//
// pattern: a regex subset over the string's characters, matched on their JSON encoding
//

class regex_to_gbnf {
  public:
    regex_to_gbnf(const std::string & re, const std::string & path) : re_(re), path_(path) {}

    std::string run(bool & used_char) {
        size_t b = 0, e = re_.size();
        bool anchored_start = false, anchored_end = false;
        if (b < e && re_[b] == '^') {
            anchored_start = true;
            ++b;
        }
        if (e > b && re_[e - 1] == '$' && (e < 2 || re_[e - 2] != '\\')) {
            anchored_end = true;
            --e;
        }
        re_ = re_.substr(b, e - b);
        std::string body = alternation().e;
        if (p_ < re_.size()) fail("unexpected ')'");
        used_char = used_char_ || !anchored_start || !anchored_end;
        return (anchored_start ? "" : "char* ") + group(body) + (anchored_end ? "" : " char*");
    }

  private:
    std::string re_;
    std::string path_;
    size_t p_ = 0;
    bool used_char_ = false;

    [[noreturn]] void fail(const std::string & msg) const {
        throw schema_error{path_, "pattern: " + msg + " at offset " + std::to_string(p_)};
    }
    bool at_end() const { return p_ >= re_.size(); }

    struct frag {
        std::string e; // GBNF
        bool empty_ok; // can match the empty string
    };

    frag alternation() {
        std::vector<std::string> alts;
        bool empty_ok = false;
        do {
            if (!alts.empty()) ++p_; // '|'
            frag f = sequence();
            alts.push_back(f.e);
            empty_ok = empty_ok || f.empty_ok;
        } while (!at_end() && re_[p_] == '|');
        return {join(alts, " | "), empty_ok};
    }

    frag sequence() {
        std::vector<std::string> items;
        bool empty_ok = true;
        while (!at_end() && re_[p_] != '|' && re_[p_] != ')') {
            frag a = quantified(atom());
            items.push_back(a.e);
            empty_ok = empty_ok && a.empty_ok;
        }
        return {items.empty() ? "\"\"" : join(items, " "), empty_ok};
    }

    frag quantified(const frag & a) {
        if (at_end()) return a;
        std::string q;
        bool open = false, zero = false; // no maximum; a minimum of 0
        const char c = re_[p_];
        if (c == '*' || c == '+' || c == '?') {
            q = std::string(1, c);
            open = c != '?';
            zero = c != '+';
            ++p_;
        } else if (c == '{') {
            const size_t close = re_.find('}', p_);
            if (close == std::string::npos) fail("unterminated {");
            const std::string in = re_.substr(p_ + 1, close - p_ - 1);
            const size_t comma = in.find(',');
            const std::string lo = in.substr(0, comma), hi = comma == std::string::npos ? lo : in.substr(comma + 1);
            const auto count = [&](const std::string & d) {
                if (d.empty() || d.size() > 5 || d.find_first_not_of("0123456789") != std::string::npos) {
                    fail("bad repetition {" + in + "}");
                }
                return std::stoul(d);
            };
            const unsigned long min = count(lo);
            if (min > 10000 || (!hi.empty() && (count(hi) < min || count(hi) > 10000))) {
                fail("bad repetition {" + in + "} (bounds up to 10000, the first not above the second)");
            }
            q = "{" + in + "}";
            open = hi.empty();
            zero = min == 0;
            p_ = close + 1;
        } else {
            return a;
        }
        if (!at_end() && re_[p_] == '?') ++p_; // lazy: the same language
        if (!at_end() && (re_[p_] == '+')) fail("possessive quantifiers are not supported");
        if (open && a.empty_ok) fail("a repeated item can match the empty string");
        return {"( " + a.e + " )" + q, zero || a.empty_ok};
    }

    // one character of the data as it appears in JSON text
    static std::string json_char(uint32_t c) {
        std::string s;
        unicode_cpt_append_utf8(s, c);
        const std::string enc = json(s).dump(); // with quotes
        return lit(enc.substr(1, enc.size() - 2));
    }

    // a set of code points (ranges) as JSON text: plain characters in one class, the escaped ones apart
    std::string char_set(std::vector<std::pair<uint32_t, uint32_t>> r, bool negated) {
        std::sort(r.begin(), r.end());
        const auto in = [&](uint32_t c) {
            for (const auto & x : r) {
                if (c >= x.first && c <= x.second) return true;
            }
            return false;
        };
        std::vector<std::string> alts;
        std::string cls = negated ? "[^\"\\\\\\x00-\\x1F" : "[";
        bool any = negated;
        for (const auto & x : r) {
            for (uint32_t lo = x.first; lo <= x.second;) { // split around the characters JSON escapes
                if (lo < 0x20 || lo == '"' || lo == '\\') {
                    if (!negated) alts.push_back(json_char(lo));
                    ++lo;
                    continue;
                }
                uint32_t hi = x.second;
                if (lo < '"' && hi >= '"') hi = '"' - 1;
                if (lo < '\\' && hi >= '\\') hi = '\\' - 1;
                cls += class_char(lo) + (hi > lo ? "-" + class_char(hi) : "");
                any = true;
                lo = hi + 1;
            }
        }
        cls += "]";
        if (any) alts.insert(alts.begin(), cls);
        if (negated) {
            if (!in('"')) alts.push_back(lit("\\\""));
            if (!in('\\')) alts.push_back(lit("\\\\"));
        }
        if (alts.empty()) fail("empty character class");
        return alts.size() == 1 ? alts[0] : "( " + join(alts, " | ") + " )";
    }

    uint32_t hex(int n) {
        uint32_t v = 0;
        for (int i = 0; i < n; ++i, ++p_) {
            if (at_end() || !isxdigit((unsigned char)re_[p_])) fail("expected hex digits");
            const char c = re_[p_];
            v = v * 16 + (uint32_t)(c <= '9' ? c - '0' : (c | 0x20) - 'a' + 10);
        }
        return v;
    }

    uint32_t utf8_char() { return next_cpt(re_, p_); } // one code point of the pattern text

    // an escape after '\': a class (d w s and negations) into r, or one code point (returned, r untouched)
    bool escape(std::vector<std::pair<uint32_t, uint32_t>> & r, bool & negated, uint32_t & cpt) {
        if (at_end()) fail("trailing backslash");
        const char e = re_[p_++];
        negated = false;
        switch (e) {
            case 'D':
                negated = true;
                [[fallthrough]];
            case 'd':
                r = {{'0', '9'}};
                return true;
            case 'W':
                negated = true;
                [[fallthrough]];
            case 'w':
                r = {{'0', '9'}, {'A', 'Z'}, {'_', '_'}, {'a', 'z'}};
                return true;
            case 'S':
                negated = true;
                [[fallthrough]];
            case 's':
                r = {{'\t', '\r'}, {' ', ' '}};
                return true;
            case 'n':
                cpt = '\n';
                return false;
            case 't':
                cpt = '\t';
                return false;
            case 'r':
                cpt = '\r';
                return false;
            case 'f':
                cpt = '\f';
                return false;
            case 'v':
                cpt = '\v';
                return false;
            case 'x':
                cpt = hex(2);
                return false;
            case 'u':
                cpt = hex(4);
                return false;
            default:
                if ((e >= 'a' && e <= 'z') || (e >= 'A' && e <= 'Z') || (e >= '0' && e <= '9')) {
                    --p_;
                    fail(std::string("unsupported escape \\") + e);
                }
                --p_;
                cpt = utf8_char();
                return false;
        }
    }

    frag atom() {
        const char c = re_[p_];
        if (c == '(') {
            ++p_;
            if (!at_end() && re_[p_] == '?') {
                if (p_ + 1 < re_.size() && re_[p_ + 1] == ':') {
                    p_ += 2;
                } else {
                    fail("unsupported group (?...)");
                }
            }
            frag in = alternation();
            if (at_end() || re_[p_] != ')') fail("unclosed (");
            ++p_;
            return {"( " + in.e + " )", in.empty_ok};
        }
        if (c == '[') return {char_class(), false};
        if (c == '.') {
            ++p_;
            used_char_ = true;
            return {"char", false};
        }
        if (c == '^' || c == '$') fail("anchors are only supported at the ends");
        if (c == '*' || c == '+' || c == '?' || c == '{') fail("nothing to repeat");
        if (c == '\\') {
            ++p_;
            std::vector<std::pair<uint32_t, uint32_t>> r;
            bool neg = false;
            uint32_t cpt = 0;
            if (escape(r, neg, cpt)) return {char_set(r, neg), false};
            return {json_char(cpt), false};
        }
        return {json_char(utf8_char()), false};
    }

    std::string char_class() {
        ++p_; // '['
        bool neg = false;
        if (!at_end() && re_[p_] == '^') {
            neg = true;
            ++p_;
        }
        std::vector<std::pair<uint32_t, uint32_t>> r;
        bool first = true;
        for (;;) {
            if (at_end()) fail("unterminated [");
            if (re_[p_] == ']' && !first) {
                ++p_;
                break;
            }
            first = false;
            uint32_t lo = 0;
            if (re_[p_] == '\\') {
                ++p_;
                std::vector<std::pair<uint32_t, uint32_t>> sub;
                bool sneg = false;
                if (escape(sub, sneg, lo)) {
                    if (sneg) fail("negated class escapes inside [...] are not supported");
                    r.insert(r.end(), sub.begin(), sub.end());
                    continue;
                }
            } else {
                lo = utf8_char();
            }
            uint32_t hi = lo;
            if (p_ + 1 < re_.size() && re_[p_] == '-' && re_[p_ + 1] != ']') {
                ++p_;
                if (re_[p_] == '\\') {
                    ++p_;
                    std::vector<std::pair<uint32_t, uint32_t>> sub;
                    bool sneg = false;
                    if (escape(sub, sneg, hi)) fail("a class escape cannot end a range");
                } else {
                    hi = utf8_char();
                }
                if (hi < lo) fail("character range out of order");
            }
            r.push_back({lo, hi});
        }
        return char_set(r, neg);
    }
};

std::string converter::pattern(const std::string & re, const std::string & path, const std::string & hint) {
    regex_to_gbnf conv(re, path);
    bool used_char = false;
    const std::string body = conv.run(used_char);
    if (used_char) prim("char");
    return add(hint, "\"\\\"\" " + body + " \"\\\"\"");
}

} // namespace

bool llm_json_schema_to_gbnf(std::string_view schema_json, std::string & gbnf, std::string * err) {
    json schema;
    try {
        schema = json::parse(schema_json.begin(), schema_json.end());
    } catch (const json::exception & e) {
        if (err) *err = std::string("json-schema: invalid JSON: ") + e.what();
        return false;
    }
    try {
        converter c(schema);
        gbnf = c.run();
    } catch (const schema_error & e) {
        if (err) {
            // one line whatever the keys hold: control characters as \xNN
            const std::string msg = "json-schema: #" + e.where + ": " + e.msg;
            err->clear();
            for (unsigned char c : msg) {
                if (c < 0x20 || c == 0x7F) {
                    char buf[8];
                    snprintf(buf, sizeof(buf), "\\x%02X", c);
                    *err += buf;
                } else {
                    *err += (char)c;
                }
            }
        }
        return false;
    }
    return true;
}
