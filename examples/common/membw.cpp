// membw.cpp - see membw.h.
#include "membw.h"

#include "ggml-backend.h"
#include "ggml.h"
#include "stats.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <thread>
#include <unistd.h>
#include <vector>

#if defined(__AVX512F__) || defined(__AVX2__)
#include <immintrin.h>
#endif

namespace {

double now_s() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

// Run fn(ith) on nth threads; returns wall seconds from a common start to the last finish.
template <typename F> double run_threads(int nth, F fn) {
    std::atomic<int> ready{0};
    std::atomic<bool> go{false};
    std::vector<std::thread> th;
    for (int i = 0; i < nth; ++i) {
        th.emplace_back([&, i] {
            ready.fetch_add(1);
            while (!go.load(std::memory_order_acquire)) {}
            fn(i);
        });
    }
    while (ready.load() < nth) {}
    const double t0 = now_s();
    go.store(true, std::memory_order_release);
    for (auto & t : th)
        t.join();
    return now_s() - t0;
}

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wuninitialized" // GCC 12: _mm512_reduce_add_ps uses _mm512_undefined
#endif
float sum_floats(const float * p, size_t n) {
#if defined(__AVX512F__)
    __m512 a0 = _mm512_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
    size_t i = 0;
    for (; i + 64 <= n; i += 64) {
        a0 = _mm512_add_ps(a0, _mm512_load_ps(p + i));
        a1 = _mm512_add_ps(a1, _mm512_load_ps(p + i + 16));
        a2 = _mm512_add_ps(a2, _mm512_load_ps(p + i + 32));
        a3 = _mm512_add_ps(a3, _mm512_load_ps(p + i + 48));
    }
    float s = _mm512_reduce_add_ps(_mm512_add_ps(_mm512_add_ps(a0, a1), _mm512_add_ps(a2, a3)));
    for (; i < n; ++i)
        s += p[i];
    return s;
#elif defined(__AVX2__)
    // integer adds (the float chains of the loop below cap a Zen 1 core at ~14 GB/s, under its read bandwidth)
    const size_t m = n / 16 * 16;
    __m256i a0 = _mm256_setzero_si256(), a1 = a0;
    for (size_t i = 0; i < m; i += 16) {
        a0 = _mm256_add_epi32(a0, _mm256_load_si256((const __m256i *)(p + i)));
        a1 = _mm256_add_epi32(a1, _mm256_load_si256((const __m256i *)(p + i + 8)));
    }
    const __m256i t = _mm256_add_epi32(a0, a1);
    float s = (float)(_mm256_extract_epi32(t, 0) ^ _mm256_extract_epi32(t, 7));
    for (size_t i = m; i < n; ++i)
        s += p[i];
    return s;
#else
    float s0 = 0, s1 = 0, s2 = 0, s3 = 0;
    size_t i = 0;
    for (; i + 4 <= n; i += 4) {
        s0 += p[i];
        s1 += p[i + 1];
        s2 += p[i + 2];
        s3 += p[i + 3];
    }
    for (; i < n; ++i)
        s0 += p[i];
    return s0 + s1 + s2 + s3;
#endif
}

// Read-only sum over 4 interleaved streams (the 4 quarters of [p, p + n)) with software prefetch,
// as a 4-row mat-vec tile reads its weights: more streams in flight than one sequential read.
// The loop must issue loads faster than memory delivers them on every SIMD level: on AVX2 the sum is
// an integer one (1-cycle adds: the bits are summed, never used as floats); the plain C++ fallback
// sums uint64 words (which the compiler may vectorize; float sums it may not reorder).
float sum_floats_4streams(const float * p, size_t n) {
#if defined(__AVX512F__)
    const size_t q = n / 4 / 64 * 64;
    const float * s[4] = {p, p + q, p + 2 * q, p + 3 * q};
    __m512 a[4] = {_mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps()};
    for (size_t i = 0; i < q; i += 32) {
        for (int j = 0; j < 4; ++j) {
            _mm_prefetch((const char *)(s[j] + i) + 512, _MM_HINT_T0);
            a[j] = _mm512_add_ps(a[j], _mm512_add_ps(_mm512_load_ps(s[j] + i), _mm512_load_ps(s[j] + i + 16)));
        }
    }
    float r = _mm512_reduce_add_ps(_mm512_add_ps(_mm512_add_ps(a[0], a[1]), _mm512_add_ps(a[2], a[3])));
    for (size_t i = 4 * q; i < n; ++i)
        r += p[i];
    return r;
#elif defined(__AVX2__)
    const size_t q = n / 4 / 16 * 16; // floats per stream, whole 64-byte lines
    const char * s[4] = {(const char *)p, (const char *)(p + q), (const char *)(p + 2 * q), (const char *)(p + 3 * q)};
    __m256i a[4] = {_mm256_setzero_si256(), _mm256_setzero_si256(), _mm256_setzero_si256(), _mm256_setzero_si256()};
    for (size_t i = 0; i < q * sizeof(float); i += 64) {
        for (int j = 0; j < 4; ++j) {
            _mm_prefetch(s[j] + i + 512, _MM_HINT_T0);
            a[j] = _mm256_add_epi32(a[j], _mm256_add_epi32(_mm256_load_si256((const __m256i *)(s[j] + i)),
                                                           _mm256_load_si256((const __m256i *)(s[j] + i + 32))));
        }
    }
    const __m256i t = _mm256_add_epi32(_mm256_add_epi32(a[0], a[1]), _mm256_add_epi32(a[2], a[3]));
    float r = (float)(_mm256_extract_epi32(t, 0) ^ _mm256_extract_epi32(t, 7));
    for (size_t i = 4 * q; i < n; ++i)
        r += p[i];
    return r;
#else
    const size_t q = n / 4 / 16 * 16;
    const uint64_t * s[4] = {(const uint64_t *)p, (const uint64_t *)(p + q), (const uint64_t *)(p + 2 * q),
                             (const uint64_t *)(p + 3 * q)};
    uint64_t a[4] = {0, 0, 0, 0};
    for (size_t i = 0; i < q / 2; i += 8) {
        for (int j = 0; j < 4; ++j) {
#if defined(__GNUC__)
            __builtin_prefetch(s[j] + i + 64);
#endif
            for (int k = 0; k < 8; ++k)
                a[j] += s[j][i + k];
        }
    }
    float r = (float)((a[0] + a[1] + a[2] + a[3]) & 0xFFFF);
    for (size_t i = 4 * q; i < n; ++i)
        r += p[i];
    return r;
#endif
}

// A CPU backend buffer of `bytes`, so on the pages the weights read into memory get (2 MiB where the kernel gives
// them; GGML_CPU_HUGEPAGES=0: 4 KiB), every page touched with `fill`.
ggml_backend_buffer_t alloc_touched(size_t bytes, int fill) {
    ggml_backend_buffer_t b = ggml_backend_buft_alloc_buffer(ggml_backend_cpu_buffer_type(), bytes);
    GGML_ASSERT(b && "membw: out of memory for the bandwidth buffer");
    std::memset(ggml_backend_buffer_get_base(b), fill, bytes);
    return b;
}
char * base_of(ggml_backend_buffer_t b) { return (char *)ggml_backend_buffer_get_base(b); }

// Bytes each of nth threads handles in a buffer of `bytes` (a 64-byte multiple).
size_t per_thread(size_t bytes, int nth) { return bytes / nth / 64 * 64; }

// Seconds of one read of the first per_thread(bytes, nth) * nth bytes of buf on nth threads (a slice
// each); `four` selects the 4-stream sum.
double read_seconds(const char * buf, size_t bytes, int nth, bool four) {
    const size_t per = per_thread(bytes, nth);
    std::atomic<float> sink{0};
    return run_threads(nth, [&](int i) {
        const float * p = (const float *)(buf + i * per);
        sink.store(four ? sum_floats_4streams(p, per / sizeof(float)) : sum_floats(p, per / sizeof(float)),
                   std::memory_order_relaxed);
    });
}

} // namespace

size_t membw_l3_bytes() {
    const long l3 = sysconf(_SC_LEVEL3_CACHE_SIZE);
    return l3 > 0 ? (size_t)l3 : size_t(32) << 20;
}

size_t membw_probe_bytes() { return std::clamp(3 * membw_l3_bytes(), size_t(256) << 20, size_t(1) << 30); }

membw_result membw_measure(size_t bytes, int nth, int runs) {
    ggml_backend_buffer_t ba = alloc_touched(bytes, 1), bb = alloc_touched(bytes, 2);
    char * a = base_of(ba), * b = base_of(bb);
    const size_t per = per_thread(bytes, nth);
    std::vector<double> tc, tr, t4;
    for (int r = 0; r < runs; ++r) {
        tc.push_back(run_threads(nth, [&](int i) { std::memcpy(b + i * per, a + i * per, per); }));
        tr.push_back(read_seconds(a, bytes, nth, false));
        t4.push_back(read_seconds(a, bytes, nth, true));
    }
    ggml_backend_buffer_free(ba);
    ggml_backend_buffer_free(bb);
    const double n = (double)per * nth;
    return {2.0 * n / median(tc) / 1e9, n / median(tr) / 1e9, n / median(t4) / 1e9};
}

membw_probe::membw_probe(size_t bytes) : mem_(alloc_touched(bytes, 1)), buf_(base_of(mem_)), bytes_(bytes) {
    read_seconds(buf_, bytes_, 1, true); // the first read of freshly touched memory runs slow (a VM: ~30%)
}

membw_probe::~membw_probe() { ggml_backend_buffer_free(mem_); }

double membw_probe::read_gbs(int n_threads) const {
    // The buffer sits idle between probes, and this VM's memory manager then takes its pages back (the read after
    // a 2 s decode run measured 3-11 GB/s against 40-50 after it): one read brings them back, the best of the next
    // membw_probe_reads is the figure (a shared machine's other processes slow some reads: the probe takes the best).
    read_seconds(buf_, bytes_, n_threads, true);
    double t = read_seconds(buf_, bytes_, n_threads, true);
    for (int i = 1; i < membw_probe_reads; ++i)
        t = std::min(t, read_seconds(buf_, bytes_, n_threads, true));
    return (double)per_thread(bytes_, n_threads) * n_threads / t / 1e9;
}
