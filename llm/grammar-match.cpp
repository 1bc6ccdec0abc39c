// grammar-match.cpp - the incremental grammar matcher (see grammar.h).
//
// A parse stack is a chain of positions in llm_grammar::elems, top first: the top is a CHAR element (the
// next code point must be in its class), each frame below is where to continue when the rule above it
// ends. Stacks are hash-consed (a node = position + parent node, id 0 = the empty stack = the root rule
// has ended), so a set of stacks is a sorted vector of ids, itself interned. A matcher state is a stack set
// plus an incomplete UTF-8 character; transitions state x byte -> state are memoized in a 256-wide table,
// so after the first visit a byte costs one load. The token mask walks a trie of the vocab's token bytes in
// preorder: a dead state skips the subtree, and a state that every byte below a node leaves unchanged takes
// the whole subtree without walking it. When most bytes keep the current state (the inside of a JSON
// string), a per-vocab index of that loop signature lists the tokens that keep it, and only the subtrees
// where a token leaves the state (after a '"' or a '\\') are walked.
#include "ggml.h"
#include "grammar.h"
#include "vocab.h"

#include <algorithm>
#include <cstring>
#include <mutex>
#include <unordered_map>
#include <unordered_set>

namespace {

constexpr int32_t UNKNOWN = -2; // transition not computed yet
constexpr int32_t DEAD = -1;

// limits before the tables are rebuilt around the current state
constexpr size_t MAX_STATES = 16384; // x 1 KiB of transitions
constexpr size_t MAX_NODES = 1 << 20;

struct vec_hash {
    size_t operator()(const std::vector<int32_t> & v) const {
        uint64_t h = 1469598103934665603ull;
        for (int32_t x : v)
            h = (h ^ (uint32_t)x) * 1099511628211ull;
        return (size_t)h;
    }
};

// UTF-8 lead byte -> sequence length (0: not a lead byte we accept)
int utf8_len(uint8_t b) {
    if (b < 0x80) return 1;
    if (b >= 0xC2 && b <= 0xDF) return 2;
    if (b >= 0xE0 && b <= 0xEF) return 3;
    if (b >= 0xF0 && b <= 0xF4) return 4;
    return 0;
}

// the allowed range of the first continuation byte after a lead (no overlongs, surrogates, > U+10FFFF)
void utf8_second(uint8_t lead, uint8_t & lo, uint8_t & hi) {
    lo = 0x80;
    hi = 0xBF;
    if (lead == 0xE0) lo = 0xA0;
    if (lead == 0xED) hi = 0x9F;
    if (lead == 0xF0) lo = 0x90;
    if (lead == 0xF4) hi = 0x8F;
}

// UTF-8 structure only, for the trie: decoder state after byte b in state r (-1: invalid). States: 0 at a
// character boundary, 1..3 continuation bytes to come, 4..7 the restricted byte after E0 / ED / F0 / F4.
int utf8_step(int r, uint8_t b) {
    if (r == 0) {
        if (b < 0x80) return 0;
        if (b == 0xE0) return 4;
        if (b == 0xED) return 5;
        if (b == 0xF0) return 6;
        if (b == 0xF4) return 7;
        const int n = utf8_len(b);
        return n == 0 ? -1 : n - 1;
    }
    if (r <= 3) return (b & 0xC0) == 0x80 ? r - 1 : -1;
    uint8_t lo, hi;
    utf8_second(r == 4 ? 0xE0 : r == 5 ? 0xED : r == 6 ? 0xF0 : 0xF4, lo, hi);
    if (b < lo || b > hi) return -1;
    return r == 6 || r == 7 ? 2 : 1;
}

} // namespace

struct llm_grammar_matcher_impl {
    std::shared_ptr<const llm_grammar> g;

    struct stack_node {
        uint32_t pos;
        int32_t parent;
    };
    std::vector<stack_node> nodes; // [0]: the empty stack
    std::unordered_map<uint64_t, int32_t> node_ids;

    std::vector<std::vector<int32_t>> sets; // sorted stack ids
    std::unordered_map<std::vector<int32_t>, int32_t, vec_hash> set_ids;

    struct state {
        int32_t set;
        uint32_t val;      // the bits of the pending character so far
        uint8_t rem;       // continuation bytes still to come (0: at a character boundary)
        uint8_t len;       // length of the pending character
        uint8_t lead;      // its lead byte
        uint8_t na_known;  // loop_na computed
        uint8_t loop_na;   // every non-ASCII character leads back here
        uint64_t known[2]; // ASCII bytes whose bit in loop is computed
        uint64_t loop[2];  // ASCII bytes that lead back here
    };
    std::vector<state> states;
    std::unordered_map<uint64_t, int32_t> state_ids;
    std::vector<int32_t> trans; // [n_states * 256]

    int32_t start = DEAD, cur = DEAD;
    uint64_t n_bytes = 0;
    std::string tail; // the last accepted bytes, at most 64

    // (pos, parent) already expanded in this step: a short list, a set once it grows
    std::vector<uint64_t> expanded;
    std::unordered_set<uint64_t> expanded_set;
    std::vector<int32_t> scratch;                                   // advance's output
    std::vector<std::vector<int32_t>> succ;                         // [stack node] successors(), empty: not yet
    std::vector<std::vector<std::pair<uint64_t, int32_t>>> set_adv; // [set] (accepting stacks, result) pairs
    std::vector<int32_t> walk;                                      // per-depth states of the trie walk

    explicit llm_grammar_matcher_impl(std::shared_ptr<const llm_grammar> gr) : g(std::move(gr)) {
        GGML_ASSERT(g && "llm_grammar_matcher: null grammar");
        init();
    }

    void init() {
        nodes.assign(1, {0, -1});
        node_ids.clear();
        succ.clear();
        set_adv.clear();
        sets.clear();
        set_ids.clear();
        states.clear();
        state_ids.clear();
        trans.clear();
        std::vector<int32_t> root;
        expand_begin();
        for (uint32_t a : g->rules[g->root].alts)
            expand(a, 0, root);
        start = intern_state(intern_set(root), 0, 0, 0, 0);
        cur = start;
    }

    int32_t intern_node(uint32_t pos, int32_t parent) {
        const uint64_t key = ((uint64_t)pos << 32) | (uint32_t)parent;
        auto it = node_ids.find(key);
        if (it != node_ids.end()) return it->second;
        const int32_t id = (int32_t)nodes.size();
        nodes.push_back({pos, parent});
        node_ids.emplace(key, id);
        return id;
    }

    // the stacks that continue at elems[pos], then return to parent, with a CHAR element on top
    // (each (pos, parent) once per step: nullable items repeated many times stay linear)
    void expand(uint32_t pos, int32_t parent, std::vector<int32_t> & out) {
        if (!expand_once(((uint64_t)pos << 32) | (uint32_t)parent)) return;
        const llm_grammar_elem e = g->elems[pos];
        if (e.type == LLM_GRAMMAR_ELEM_END) {
            if (parent == 0) {
                out.push_back(0);
            } else {
                const stack_node n = nodes[parent];
                expand(n.pos, n.parent, out);
            }
        } else if (e.type == LLM_GRAMMAR_ELEM_CHAR) {
            out.push_back(intern_node(pos, parent));
        } else {
            // a reference in tail position returns straight to parent (keeps x* stacks flat)
            const int32_t np = g->elems[pos + 1].type == LLM_GRAMMAR_ELEM_END ? parent : intern_node(pos + 1, parent);
            for (uint32_t a : g->rules[e.value].alts)
                expand(a, np, out);
        }
    }

    void expand_begin() {
        expanded.clear();
        if (!expanded_set.empty()) expanded_set.clear();
    }

    bool expand_once(uint64_t key) { // false if key was seen in this step
        if (expanded.size() < 64) {
            if (std::find(expanded.begin(), expanded.end(), key) != expanded.end()) return false;
            expanded.push_back(key);
            if (expanded.size() == 64) expanded_set.insert(expanded.begin(), expanded.end());
            return true;
        }
        return expanded_set.insert(key).second;
    }

    int32_t intern_set(std::vector<int32_t> & v) { // sorts v
        std::sort(v.begin(), v.end());
        v.erase(std::unique(v.begin(), v.end()), v.end());
        auto it = set_ids.find(v);
        if (it != set_ids.end()) return it->second;
        const int32_t id = (int32_t)sets.size();
        sets.push_back(v);
        set_ids.emplace(v, id);
        return id;
    }

    int32_t intern_state(int32_t set, uint32_t val, uint8_t rem, uint8_t len, uint8_t lead) {
        const uint64_t key = ((uint64_t)set << 32) | ((uint64_t)val << 8) | ((uint64_t)rem << 4) | len;
        auto it = state_ids.find(key); // lead is implied by val and len
        if (it != state_ids.end()) return it->second;
        const int32_t id = (int32_t)states.size();
        states.push_back({set, val, rem, len, lead, 0, 0, {0, 0}, {0, 0}});
        state_ids.emplace(key, id);
        trans.resize(trans.size() + 256, UNKNOWN);
        return id;
    }

    const llm_grammar_class & top_class(int32_t stack) const { return g->classes[g->elems[nodes[stack].pos].value]; }

    // the stacks after reading a code point the top of stack s accepts (memoized: it does not depend on which)
    const std::vector<int32_t> & successors(int32_t s) {
        if (succ.size() <= (size_t)s) succ.resize(nodes.size());
        if (!succ[s].empty()) return succ[s];
        std::vector<int32_t> out;
        expand_begin();
        expand(nodes[s].pos + 1, nodes[s].parent, out); // may add nodes
        std::sort(out.begin(), out.end());
        out.erase(std::unique(out.begin(), out.end()), out.end());
        if (succ.size() < nodes.size()) succ.resize(nodes.size());
        succ[s] = std::move(out); // never empty: a stack continues or ends (0)
        return succ[s];
    }

    // the set after reading cpt (DEAD: none). The result depends only on which stacks accept cpt: for sets of
    // up to 64 stacks it is memoized per such subset, so the characters of one class cost one union.
    int32_t advance(int32_t set, uint32_t cpt) {
        const size_t n = sets[set].size();
        uint64_t mask = 0;
        std::vector<int32_t> & out = scratch;
        out.clear();
        for (size_t i = 0; i < n; ++i) {
            const int32_t s = sets[set][i];
            if (s == 0 || !top_class(s).contains(cpt)) continue;
            if (n <= 64) {
                mask |= 1ull << i;
            } else {
                const std::vector<int32_t> & sc = successors(s);
                out.insert(out.end(), sc.begin(), sc.end());
            }
        }
        if (n <= 64) {
            if (mask == 0) return DEAD;
            if (set_adv.size() <= (size_t)set) set_adv.resize(sets.size());
            for (const auto & m : set_adv[set]) {
                if (m.first == mask) return m.second;
            }
            for (uint64_t b = mask; b; b &= b - 1) {
                const std::vector<int32_t> & sc = successors(sets[set][__builtin_ctzll(b)]);
                out.insert(out.end(), sc.begin(), sc.end());
            }
        }
        if (out.empty()) return DEAD;
        const int32_t r = intern_set(out);
        if (n <= 64) {
            if (set_adv.size() <= (size_t)set) set_adv.resize(sets.size());
            set_adv[set].push_back({mask, r});
        }
        return r;
    }

    bool admits(int32_t set, uint32_t lo, uint32_t hi) const { // some stack can read a code point in [lo, hi]
        if (lo > 0x10FFFF) return false;
        hi = std::min<uint32_t>(hi, 0x10FFFF);
        for (int32_t s : sets[set]) {
            if (s != 0 && top_class(s).intersects(lo, hi)) return true;
        }
        return false;
    }

    int32_t compute(int32_t sid, uint8_t b) {
        const state s = states[sid];
        int32_t r = DEAD;
        if (s.rem == 0) {
            const int n = utf8_len(b);
            if (n == 1) {
                const int32_t set = advance(s.set, b);
                r = set == DEAD ? DEAD : intern_state(set, 0, 0, 0, 0);
            } else if (n > 1) {
                const uint32_t val = b & (0x7F >> n);
                const int rem = n - 1;
                // the code points this lead can begin: E0 and F0 only begin U+0800.. / U+10000.. (their
                // continuation bytes exclude overlongs), ED stops before the surrogates
                const uint32_t min_cpt = n == 2 ? 0x80 : n == 3 ? 0x800 : 0x10000;
                const uint32_t lo = std::max(val << (6 * rem), min_cpt);
                uint32_t hi = (val << (6 * rem)) | ((1u << (6 * rem)) - 1);
                if (b == 0xED) hi = 0xD7FF;
                if (admits(s.set, lo, hi)) r = intern_state(s.set, val, (uint8_t)rem, (uint8_t)n, b);
            }
        } else {
            uint8_t lo2 = 0x80, hi2 = 0xBF;
            if (s.rem == s.len - 1) utf8_second(s.lead, lo2, hi2);
            if (b >= lo2 && b <= hi2) {
                const uint32_t val = (s.val << 6) | (b & 0x3F);
                const int rem = s.rem - 1;
                if (rem == 0) {
                    const int32_t set = advance(s.set, val);
                    r = set == DEAD ? DEAD : intern_state(set, 0, 0, 0, 0);
                } else {
                    const uint32_t lo = val << (6 * rem);
                    if (admits(s.set, lo, lo | ((1u << (6 * rem)) - 1))) {
                        r = intern_state(s.set, val, (uint8_t)rem, s.len, s.lead);
                    }
                }
            }
        }
        trans[(size_t)sid * 256 + b] = r;
        return r;
    }

    int32_t step(int32_t sid, uint8_t b) {
        const int32_t t = trans[(size_t)sid * 256 + b];
        return t != UNKNOWN ? t : compute(sid, b);
    }

    int32_t run(int32_t sid, std::string_view bytes) {
        for (char c : bytes) {
            sid = step(sid, (uint8_t)c);
            if (sid == DEAD) break;
        }
        return sid;
    }

    // Whether every ASCII byte of mask[] leaves state sid unchanged. The loop bits are computed on demand and
    // kept; the first byte that leads elsewhere ends the check (unless full: then all of mask is computed).
    bool keeps(int32_t sid, const uint64_t mask[2], bool full = false) {
        bool ok = true;
        for (int w = 0; w < 2 && !full; ++w) {
            if (mask[w] & states[sid].known[w] & ~states[sid].loop[w]) return false;
        }
        for (int w = 0; w < 2; ++w) {
            for (uint64_t need = mask[w] & ~states[sid].known[w]; need; need &= need - 1) {
                const int b = 64 * w + __builtin_ctzll(need);
                const bool same = step(sid, (uint8_t)b) == sid;
                state & st = states[sid];
                st.known[w] |= 1ull << (b & 63);
                if (same) {
                    st.loop[w] |= 1ull << (b & 63);
                } else if (!full) {
                    return false;
                }
            }
        }
        for (int w = 0; w < 2 && full; ++w)
            ok = ok && !(mask[w] & ~states[sid].loop[w]);
        return ok;
    }

    // whether every non-ASCII character leads back to sid (each top class holds all of them or none)
    bool keeps_non_ascii(int32_t sid) {
        if (!states[sid].na_known) {
            bool na = true;
            const int32_t set = states[sid].set;
            for (int32_t s : sets[set]) {
                if (s == 0) continue;
                const llm_grammar_class & c = top_class(s);
                if (c.intersects(0x80, 0x10FFFF) && !c.covers(0x80, 0x10FFFF)) {
                    na = false;
                    break;
                }
            }
            na = na && advance(set, 0x80) == set; // then every non-ASCII character acts like U+0080
            states[sid].loop_na = na;
            states[sid].na_known = 1;
        }
        return states[sid].loop_na != 0;
    }

    bool complete(int32_t sid) const {
        const state & s = states[sid];
        return s.rem == 0 && !sets[s.set].empty() && sets[s.set][0] == 0;
    }

    // rebuild the tables around the current state when they have grown too large
    void maybe_compact() {
        if (states.size() < MAX_STATES && nodes.size() < MAX_NODES) return;
        const state s = states[cur];
        std::vector<std::vector<uint32_t>> stacks; // positions, bottom first
        for (int32_t id : sets[s.set]) {
            std::vector<uint32_t> st;
            for (int32_t n = id; n != 0; n = nodes[n].parent)
                st.push_back(nodes[n].pos);
            std::reverse(st.begin(), st.end());
            stacks.push_back(std::move(st));
        }
        init();
        std::vector<int32_t> ids;
        for (const auto & st : stacks) {
            int32_t parent = 0;
            for (uint32_t pos : st)
                parent = intern_node(pos, parent);
            ids.push_back(parent);
        }
        cur = intern_state(intern_set(ids), s.val, s.rem, s.len, s.lead);
    }

    // The tokens in the subtrees of nodes [from, end) (siblings at one depth) that continue from state parent,
    // appended at out. A dead state drops a subtree; a state that every byte below a node keeps takes it whole.
    void walk_nodes(const llm_grammar_tokens & t, uint32_t from, uint32_t end, int32_t parent, int32_t *& out) {
        const llm_grammar_tokens::node * nd = t.nodes.data();
        const uint32_t * first = t.first.data();
        const uint64_t * below = t.below.data();
        const int32_t * order = t.order.data();
        if (walk.size() < t.max_depth + 1) walk.resize(t.max_depth + 1);
        int32_t * st = walk.data();
        st[nd[from].depth - 1] = parent;
        for (uint32_t i = from; i < end;) {
            const llm_grammar_tokens::node x = nd[i];
            const int32_t s = step(st[x.depth - 1], x.byte);
            if (s == DEAD) {
                i = x.end;
                continue;
            }
            if (x.end - i > 2 && states[s].rem == 0 && keeps(s, below + 2 * i) &&
                (!(x.flags & llm_grammar_tokens::NODE_NON_ASCII) ||
                 (!(x.flags & llm_grammar_tokens::NODE_BAD_UTF8) && keeps_non_ascii(s)))) {
                out = std::copy(order + first[i], order + first[x.end], out); // the subtree stays in s
                i = x.end;
                continue;
            }
            out = std::copy(order + first[i], order + first[i + 1], out);
            st[x.depth] = s;
            ++i;
        }
    }

    void commit(int32_t sid, std::string_view bytes) {
        cur = sid;
        n_bytes += bytes.size();
        tail.append(bytes.data(), bytes.size());
        if (tail.size() > 64) tail.erase(0, tail.size() - 64);
    }
};

//
// llm_grammar_matcher
//

// For the states whose loop signature is (loop, na): the tokens whose bytes all keep such a state (as ranges
// of order) and the frontier, the nodes where a token leaves it (reached from it at a character boundary).
struct llm_grammar_loop_index {
    uint64_t loop[2];
    bool na;
    std::vector<std::pair<uint32_t, uint32_t>> clean;
    std::vector<uint32_t> frontier;
};

namespace {

std::shared_ptr<const llm_grammar_loop_index> loop_index_get(const llm_grammar_tokens & t, const uint64_t loop[2],
                                                             bool na) {
    std::lock_guard<std::mutex> lock(t.mu);
    for (const auto & ix : t.loop_indexes) {
        if (ix->loop[0] == loop[0] && ix->loop[1] == loop[1] && ix->na == na) return ix;
    }
    auto ix = std::make_shared<llm_grammar_loop_index>();
    ix->loop[0] = loop[0];
    ix->loop[1] = loop[1];
    ix->na = na;
    const llm_grammar_tokens::node * nd = t.nodes.data();
    const uint32_t * first = t.first.data();
    std::vector<int8_t> r(t.max_depth + 1, 0); // UTF-8 decoder state along the path
    const uint32_t n = (uint32_t)t.nodes.size();
    for (uint32_t i = 1; i < n;) {
        const llm_grammar_tokens::node x = nd[i];
        const int rp = r[x.depth - 1];
        int rn = 0;
        if (x.byte < 0x80) {
            if (rp != 0) { // inside a character: not UTF-8, dead from any state
                i = x.end;
                continue;
            }
            if (!((loop[x.byte >> 6] >> (x.byte & 63)) & 1)) {
                ix->frontier.push_back(i);
                i = x.end;
                continue;
            }
        } else if (!na) {
            ix->frontier.push_back(i);
            i = x.end;
            continue;
        } else {
            rn = utf8_step(rp, x.byte);
            if (rn < 0) {
                i = x.end;
                continue;
            }
        }
        if (first[i] < first[i + 1]) {
            if (!ix->clean.empty() && ix->clean.back().second == first[i]) {
                ix->clean.back().second = first[i + 1];
            } else {
                ix->clean.push_back({first[i], first[i + 1]});
            }
        }
        r[x.depth] = (int8_t)rn;
        ++i;
    }
    if (t.loop_indexes.size() >= 16) t.loop_indexes.erase(t.loop_indexes.begin());
    t.loop_indexes.push_back(ix);
    return ix;
}

} // namespace

llm_grammar_matcher::llm_grammar_matcher(std::shared_ptr<const llm_grammar> g)
    : impl_(std::make_unique<llm_grammar_matcher_impl>(std::move(g))) {}

llm_grammar_matcher::~llm_grammar_matcher() = default;

const llm_grammar & llm_grammar_matcher::grammar() const { return *impl_->g; }

uint64_t llm_grammar_matcher::n_bytes() const { return impl_->n_bytes; }

std::string llm_grammar_matcher::tail(size_t max_bytes) const {
    const std::string & t = impl_->tail;
    return t.size() <= max_bytes ? t : t.substr(t.size() - max_bytes);
}

void llm_grammar_matcher::reset() {
    impl_->cur = impl_->start;
    impl_->n_bytes = 0;
    impl_->tail.clear();
}

bool llm_grammar_matcher::is_complete() const { return impl_->complete(impl_->cur); }

bool llm_grammar_matcher::accept_bytes(std::string_view bytes) {
    impl_->maybe_compact();
    const int32_t s = impl_->run(impl_->cur, bytes);
    if (s == DEAD) return false;
    impl_->commit(s, bytes);
    return true;
}

bool llm_grammar_matcher::can_accept_bytes(std::string_view bytes) {
    impl_->maybe_compact();
    return impl_->run(impl_->cur, bytes) != DEAD;
}

bool llm_grammar_matcher::accept(uint32_t cpt) {
    if (cpt > 0x10FFFF) return false;
    char buf[4];
    int n = 0;
    if (cpt < 0x80) {
        buf[n++] = (char)cpt;
    } else if (cpt < 0x800) {
        buf[n++] = (char)(0xC0 | (cpt >> 6));
        buf[n++] = (char)(0x80 | (cpt & 0x3F));
    } else if (cpt < 0x10000) {
        buf[n++] = (char)(0xE0 | (cpt >> 12));
        buf[n++] = (char)(0x80 | ((cpt >> 6) & 0x3F));
        buf[n++] = (char)(0x80 | (cpt & 0x3F));
    } else {
        buf[n++] = (char)(0xF0 | (cpt >> 18));
        buf[n++] = (char)(0x80 | ((cpt >> 12) & 0x3F));
        buf[n++] = (char)(0x80 | ((cpt >> 6) & 0x3F));
        buf[n++] = (char)(0x80 | (cpt & 0x3F));
    }
    if (impl_->states[impl_->cur].rem != 0) return false;
    return accept_bytes(std::string_view(buf, n));
}

bool llm_grammar_matcher::token_valid(const llm_grammar_tokens & t, int32_t id) {
    if (id < 0 || id >= t.n_vocab) return false;
    if (t.is_eog[id]) return is_complete();
    const std::string & b = t.bytes[id];
    return !b.empty() && can_accept_bytes(b);
}

bool llm_grammar_matcher::accept_token(const llm_grammar_tokens & t, int32_t id) {
    if (id < 0 || id >= t.n_vocab) return false;
    if (t.is_eog[id]) return is_complete();
    const std::string & b = t.bytes[id];
    return !b.empty() && accept_bytes(b);
}

void llm_grammar_matcher::valid_tokens(const llm_grammar_tokens & t, std::vector<int32_t> & ids) {
    llm_grammar_matcher_impl & m = *impl_;
    m.maybe_compact();
    ids.resize(t.order.size() + t.eog_ids.size());
    int32_t * out = ids.data();
    const int32_t cur = m.cur;
    bool done = false;
    if (m.states[cur].rem == 0 && t.nodes.size() > 1) {
        const uint64_t all[2] = {~0ull, ~0ull};
        m.keeps(cur, all, /*full=*/true);
        const bool na = m.keeps_non_ascii(cur);
        const auto & s = m.states[cur];
        if (na || __builtin_popcountll(s.loop[0]) + __builtin_popcountll(s.loop[1]) >= 32) {
            // most tokens stay in this state (the inside of a string): the tokens that keep it are known per
            // loop signature, only the subtrees where a token leaves it are walked
            const std::shared_ptr<const llm_grammar_loop_index> ix = loop_index_get(t, s.loop, na);
            for (const auto & r : ix->clean)
                out = std::copy(t.order.data() + r.first, t.order.data() + r.second, out);
            for (uint32_t f : ix->frontier)
                m.walk_nodes(t, f, t.nodes[f].end, cur, out);
            done = true;
        }
    }
    if (!done && t.nodes.size() > 1) m.walk_nodes(t, 1, (uint32_t)t.nodes.size(), cur, out);
    if (is_complete()) out = std::copy(t.eog_ids.begin(), t.eog_ids.end(), out);
    ids.resize((size_t)(out - ids.data()));
}

//
// llm_grammar_tokens
//

std::shared_ptr<const llm_grammar_tokens> llm_grammar_tokens_build(const std::vector<std::string> & bytes,
                                                                   const std::vector<int32_t> & eog_ids) {
    auto t = std::make_shared<llm_grammar_tokens>();
    t->n_vocab = (int32_t)bytes.size();
    t->bytes = bytes;
    t->is_eog.assign(bytes.size(), 0);
    for (int32_t id : eog_ids) {
        if (id >= 0 && id < t->n_vocab && !t->is_eog[id]) {
            t->is_eog[id] = 1;
            t->eog_ids.push_back(id);
        }
    }
    for (int32_t id = 0; id < t->n_vocab; ++id) {
        if (!t->is_eog[id] && !bytes[id].empty()) t->order.push_back(id);
    }
    std::stable_sort(t->order.begin(), t->order.end(),
                     [&](int32_t a, int32_t b) { return bytes[a] < bytes[b]; }); // byte order (unsigned)

    // preorder trie: a token starts the nodes for the bytes past its common prefix with the previous one
    std::vector<llm_grammar_tokens::node> & nodes = t->nodes;
    std::vector<uint32_t> & first = t->first;
    std::vector<uint32_t> parent;
    std::vector<uint32_t> path = {0}; // path[d]: the node at depth d
    nodes.push_back({0, 0, 0, 0});
    first.push_back(0);
    parent.push_back(0);
    const std::string * prev = nullptr;
    for (uint32_t k = 0; k < t->order.size(); ++k) {
        const std::string & s = bytes[t->order[k]];
        size_t l = 0;
        if (prev) {
            while (l < prev->size() && l < s.size() && (*prev)[l] == s[l])
                ++l;
            for (size_t d = prev->size(); d > l; --d)
                nodes[path[d]].end = (uint32_t)nodes.size();
        }
        GGML_ASSERT(s.size() < 65536 && "llm_grammar_tokens_build: token longer than 64 KiB");
        path.resize(s.size() + 1);
        for (size_t d = l + 1; d <= s.size(); ++d) {
            path[d] = (uint32_t)nodes.size();
            nodes.push_back({(uint8_t)s[d - 1], 0, (uint16_t)d, 0});
            first.push_back(k);
            parent.push_back(path[d - 1]);
        }
        t->max_depth = std::max<uint32_t>(t->max_depth, (uint32_t)s.size());
        prev = &s;
    }
    if (prev) {
        for (size_t d = prev->size(); d > 0; --d)
            nodes[path[d]].end = (uint32_t)nodes.size();
    }
    nodes[0].end = (uint32_t)nodes.size();
    first.push_back((uint32_t)t->order.size()); // sentinel

    // bottom up: bytes below each node, and whether a path below breaks UTF-8 when read from a boundary
    // (bad[i] bit r: reading below node i in decoder state r meets an invalid byte; see utf8_step)
    std::vector<uint64_t> & below = t->below;
    below.assign(nodes.size() * 2, 0);
    std::vector<uint8_t> bad(nodes.size(), 0);
    for (size_t i = nodes.size() - 1; i > 0; --i) {
        const llm_grammar_tokens::node & x = nodes[i];
        const uint32_t p = parent[i];
        if (x.byte < 0x80) {
            below[2 * p + (x.byte >> 6)] |= 1ull << (x.byte & 63);
        } else {
            nodes[p].flags |= llm_grammar_tokens::NODE_NON_ASCII;
        }
        below[2 * p] |= below[2 * i];
        below[2 * p + 1] |= below[2 * i + 1];
        nodes[p].flags |= x.flags & llm_grammar_tokens::NODE_NON_ASCII;
        for (int r = 0; r < 8; ++r) {
            const int r2 = utf8_step(r, x.byte);
            if (r2 < 0 || ((bad[i] >> r2) & 1)) bad[p] |= (uint8_t)(1 << r);
        }
    }
    for (size_t i = 0; i < nodes.size(); ++i) {
        if (bad[i] & 1) nodes[i].flags |= llm_grammar_tokens::NODE_BAD_UTF8;
    }
    return t;
}

std::shared_ptr<const llm_grammar_tokens> llm_grammar_tokens_get(const llm_vocab & vocab) {
    // one shared copy per vocab, while anyone holds it; keyed by address and checked by content
    struct entry {
        const llm_vocab * vocab;
        uint64_t hash;
        std::weak_ptr<const llm_grammar_tokens> tokens;
    };
    static std::mutex mu;
    static std::vector<entry> cache;

    std::vector<std::string> bytes((size_t)vocab.n_vocab());
    uint64_t h = 1469598103934665603ull;
    for (int32_t id = 0; id < vocab.n_vocab(); ++id) {
        bytes[id] = llm_token_to_piece(vocab, id, /*render_special=*/false);
        for (char c : bytes[id])
            h = (h ^ (uint8_t)c) * 1099511628211ull;
        h = (h ^ 0x100) * 1099511628211ull; // separator
    }
    std::vector<int32_t> eog = vocab.eog_ids;
    for (int32_t id : eog)
        h = (h ^ (uint32_t)id) * 1099511628211ull;

    std::lock_guard<std::mutex> lock(mu);
    cache.erase(std::remove_if(cache.begin(), cache.end(), [](const entry & e) { return e.tokens.expired(); }),
                cache.end());
    for (const entry & e : cache) {
        if (e.vocab == &vocab && e.hash == h) {
            if (auto sp = e.tokens.lock()) return sp;
        }
    }
    auto t = llm_grammar_tokens_build(bytes, eog);
    cache.push_back({&vocab, h, t});
    return t;
}
