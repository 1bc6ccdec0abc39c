// Sampler stages against hand-computed expectations; reproducibility with a seed.
#include "sampling.h"

#include "doctest_cstr.h"

#include <cmath>
#include <map>

static std::vector<llm_token_prob> cands(const std::vector<float> & logits) {
    std::vector<llm_token_prob> c;
    for (size_t i = 0; i < logits.size(); ++i) c.push_back({(int32_t) i, logits[i], 0.0f});
    return c;
}

TEST_CASE("greedy picks the first maximum") {
    const std::vector<float> l = {0.1f, 3.0f, -1.0f, 3.0f};
    llm_sampler_params p;
    p.temp = 0;
    llm_sampler s(p);
    CHECK(s.sample(l.data(), 4) == 1);
    CHECK(llm_argmax(l.data(), 4) == 1);
}

TEST_CASE("softmax, top-k, top-p and min-p keep the expected candidates") {
    auto c = cands({1.0f, 2.0f, 3.0f, 4.0f});
    llm_sampler::apply_softmax(c);
    // exp(0), exp(-1), exp(-2), exp(-3) normalised
    const double z = 1 + std::exp(-1.0) + std::exp(-2.0) + std::exp(-3.0);
    CHECK(c[0].id == 3);
    CHECK(c[0].p == doctest::Approx(1 / z));
    CHECK(c[3].p == doctest::Approx(std::exp(-3.0) / z));

    auto k = cands({1.0f, 5.0f, 3.0f, 4.0f});
    llm_sampler::apply_top_k(k, 2);
    REQUIRE(k.size() == 2);
    CHECK(k[0].id == 1);
    CHECK(k[1].id == 3);

    auto tp = cands({1.0f, 2.0f, 3.0f, 4.0f});
    llm_sampler::apply_softmax(tp);
    llm_sampler::apply_top_p(tp, 0.8f);  // 0.644 + 0.237 = 0.881 >= 0.8
    CHECK(tp.size() == 2);

    auto mp = cands({1.0f, 2.0f, 3.0f, 4.0f});
    llm_sampler::apply_softmax(mp);
    llm_sampler::apply_min_p(mp, 0.3f);  // keep p >= 0.3 * p_max: exp(-1) = 0.37 kept, exp(-2) = 0.135 not
    CHECK(mp.size() == 2);
}

TEST_CASE("repetition penalty divides positive and multiplies negative logits") {
    auto c = cands({2.0f, -2.0f, 1.0f});
    std::deque<int32_t> last = {0, 1, 0};
    llm_sampler::apply_repeat_penalty(c, last, 2.0f);
    CHECK(c[0].logit == doctest::Approx(1.0f));
    CHECK(c[1].logit == doctest::Approx(-4.0f));
    CHECK(c[2].logit == doctest::Approx(1.0f));
}

TEST_CASE("seeded sampling is reproducible and follows the distribution") {
    std::vector<float> l = {0.0f, std::log(3.0f), -100.0f};  // p = 0.25, 0.75, ~0
    llm_sampler_params p;
    p.temp = 1.0f;
    p.top_k = 0;
    p.top_p = 1.0f;
    p.min_p = 0.0f;
    p.seed = 1234;
    llm_sampler a(p), b(p);
    std::map<int, int> counts;
    for (int i = 0; i < 4000; ++i) {
        const int x = a.sample(l.data(), 3);
        CHECK(x == b.sample(l.data(), 3));
        counts[x]++;
    }
    CHECK(counts[2] == 0);
    CHECK(counts[1] / 4000.0 == doctest::Approx(0.75).epsilon(0.05));
}

TEST_CASE("repeat_last_n bounds the penalty window") {
    llm_sampler_params p;
    p.temp = 0;
    p.repeat_penalty = 100.0f;
    p.repeat_last_n = 1;
    llm_sampler s(p);
    const std::vector<float> l = {5.0f, 4.0f};
    s.accept(0);
    CHECK(s.sample(l.data(), 2) == 1);  // 0 is penalised
    s.accept(1);                         // window of 1: only token 1 is remembered now
    CHECK(s.sample(l.data(), 2) == 0);
}
