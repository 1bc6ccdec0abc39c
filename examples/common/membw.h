// membw.h - CPU memory bandwidth for the benchmark tools (bench, bench-matvec): a large memcpy, a
// read-only sum reduction, and a read-only sum over 4 interleaved streams with software prefetch (as a
// 4-row mat-vec tile reads its weights: the roofline denominator of CPU decode).
//
//   membw_result bw = membw_measure(256 << 20, n_threads, 5);    // medians of 5 runs of each
//   membw_probe probe(membw_probe_bytes());                     // one buffer, allocated and touched once
//   double gbs = probe.read_gbs(n_threads);                     // one 4-stream read of it, in GB/s
//
// A shared machine's bandwidth drifts within minutes: compare a kernel only with probes taken in
// alternation with its runs, in the same process, on the same thread count.
//
// The probe must read at least what a real decode streams (it is the roofline's denominator). Until
// 2026-11-26 its read loops had SIMD code for AVX-512 only: on AVX2 they fell back to a scalar float sum
// (4 dependent add chains, ~4 floats per 3 cycles), which capped a Zen 1 core at ~14 GB/s per thread and
// read 10-18 GB/s on 2 threads while an f16 decode streamed 17-18.5 GB/s of weights (bench scored it at
// 122-137%). Now AVX2 sums the lines with 256-bit integer adds (the bits are never used as floats), the
// plain C++ fallback sums uint64 words, and a probe is the best of 3 reads (was 2) after the uncounted one.
#pragma once

#include "ggml-backend.h"

#include <cstddef>

struct membw_result {
    double copy_gbs;  // memcpy, bytes read + bytes written
    double read_gbs;  // one sequential read-only stream per thread
    double read4_gbs; // 4 interleaved read-only streams per thread, with prefetch
};

// The L3 size the OS reports; 32 MiB when it reports none.
size_t membw_l3_bytes();
// A probe buffer size: 3x the L3 (out of cache), within [256 MiB, 1 GiB] (one read < 0.3 s at 4 GB/s).
size_t membw_probe_bytes();

// Medians over `runs` of each kind, on n_threads threads, over two buffers of `bytes`.
membw_result membw_measure(size_t bytes, int n_threads, int runs);

// Counted reads per membw_probe::read_gbs (the best is the figure).
constexpr int membw_probe_reads = 3;

// A buffer for read-bandwidth probes interleaved with the runs being measured; the constructor touches
// every page and reads the buffer once (a warm-up: the first read of fresh memory runs slow).
class membw_probe {
  public:
    explicit membw_probe(size_t bytes);
    ~membw_probe();
    membw_probe(const membw_probe &) = delete;
    membw_probe & operator=(const membw_probe &) = delete;

    // The best of membw_probe_reads 4-stream reads of the whole buffer on n_threads threads, after one that is not
    // counted (pages reclaimed while the buffer sat idle come back in it), in GB/s.
    double read_gbs(int n_threads) const;
    size_t bytes() const { return bytes_; }

  private:
    ggml_backend_buffer_t mem_ = nullptr; // a CPU backend buffer (membw.cpp)
    char * buf_ = nullptr;
    size_t bytes_ = 0;
};
