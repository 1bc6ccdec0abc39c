// sha256.h - SHA-256 (FIPS 180-4, section 6.2), header only, for hashing test outputs.
//
//   sha256 h;
//   h.update(data, n_bytes);        // any number of times
//   std::string hex = h.hex();      // 64 lower-case hex digits; the object is then spent
//
// Plain and portable (byte-wise big-endian loads), fast enough for tens of MB in a test.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

class sha256 {
  public:
    sha256() { reset(); }

    void reset() {
        static const uint32_t h0[8] = {0x6a09e667u, 0xbb67ae85u, 0x3c6ef372u, 0xa54ff53au,
                                       0x510e527fu, 0x9b05688cu, 0x1f83d9abu, 0x5be0cd19u};
        for (int i = 0; i < 8; ++i)
            h_[i] = h0[i];
        n_bytes_ = 0;
        n_buf_ = 0;
    }

    void update(const void * data, size_t n) {
        const uint8_t * p = (const uint8_t *)data;
        n_bytes_ += n;
        if (n_buf_ > 0) {
            while (n > 0 && n_buf_ < 64) {
                buf_[n_buf_++] = *p++;
                --n;
            }
            if (n_buf_ < 64) return;
            compress(buf_);
            n_buf_ = 0;
        }
        for (; n >= 64; n -= 64, p += 64)
            compress(p);
        while (n > 0) {
            buf_[n_buf_++] = *p++;
            --n;
        }
    }

    // Pads (0x80, zeros, 64-bit big-endian bit length) and returns the digest in hex.
    std::string hex() {
        const uint64_t n_bits = n_bytes_ * 8;
        const uint8_t one = 0x80, zero = 0;
        update(&one, 1);
        while (n_buf_ != 56)
            update(&zero, 1);
        uint8_t len[8];
        for (int i = 0; i < 8; ++i)
            len[i] = (uint8_t)(n_bits >> (56 - 8 * i));
        update(len, 8);
        static const char digits[] = "0123456789abcdef";
        std::string out;
        for (int i = 0; i < 8; ++i) {
            for (int s = 28; s >= 0; s -= 4)
                out += digits[(h_[i] >> s) & 0xF];
        }
        return out;
    }

    static std::string of(const void * data, size_t n) {
        sha256 h;
        h.update(data, n);
        return h.hex();
    }

  private:
    static uint32_t rotr(uint32_t x, int n) { return (x >> n) | (x << (32 - n)); }

    void compress(const uint8_t * block) {
        static const uint32_t k[64] = {
            0x428a2f98u, 0x71374491u, 0xb5c0fbcfu, 0xe9b5dba5u, 0x3956c25bu, 0x59f111f1u, 0x923f82a4u, 0xab1c5ed5u,
            0xd807aa98u, 0x12835b01u, 0x243185beu, 0x550c7dc3u, 0x72be5d74u, 0x80deb1feu, 0x9bdc06a7u, 0xc19bf174u,
            0xe49b69c1u, 0xefbe4786u, 0x0fc19dc6u, 0x240ca1ccu, 0x2de92c6fu, 0x4a7484aau, 0x5cb0a9dcu, 0x76f988dau,
            0x983e5152u, 0xa831c66du, 0xb00327c8u, 0xbf597fc7u, 0xc6e00bf3u, 0xd5a79147u, 0x06ca6351u, 0x14292967u,
            0x27b70a85u, 0x2e1b2138u, 0x4d2c6dfcu, 0x53380d13u, 0x650a7354u, 0x766a0abbu, 0x81c2c92eu, 0x92722c85u,
            0xa2bfe8a1u, 0xa81a664bu, 0xc24b8b70u, 0xc76c51a3u, 0xd192e819u, 0xd6990624u, 0xf40e3585u, 0x106aa070u,
            0x19a4c116u, 0x1e376c08u, 0x2748774cu, 0x34b0bcb5u, 0x391c0cb3u, 0x4ed8aa4au, 0x5b9cca4fu, 0x682e6ff3u,
            0x748f82eeu, 0x78a5636fu, 0x84c87814u, 0x8cc70208u, 0x90befffau, 0xa4506cebu, 0xbef9a3f7u, 0xc67178f2u};
        uint32_t w[64];
        for (int t = 0; t < 16; ++t) {
            w[t] = (uint32_t)block[4 * t] << 24 | (uint32_t)block[4 * t + 1] << 16 | (uint32_t)block[4 * t + 2] << 8 |
                   (uint32_t)block[4 * t + 3];
        }
        for (int t = 16; t < 64; ++t) {
            const uint32_t s0 = rotr(w[t - 15], 7) ^ rotr(w[t - 15], 18) ^ (w[t - 15] >> 3);
            const uint32_t s1 = rotr(w[t - 2], 17) ^ rotr(w[t - 2], 19) ^ (w[t - 2] >> 10);
            w[t] = w[t - 16] + s0 + w[t - 7] + s1;
        }
        uint32_t a = h_[0], b = h_[1], c = h_[2], d = h_[3], e = h_[4], f = h_[5], g = h_[6], h = h_[7];
        for (int t = 0; t < 64; ++t) {
            const uint32_t S1 = rotr(e, 6) ^ rotr(e, 11) ^ rotr(e, 25);
            const uint32_t ch = (e & f) ^ (~e & g);
            const uint32_t t1 = h + S1 + ch + k[t] + w[t];
            const uint32_t S0 = rotr(a, 2) ^ rotr(a, 13) ^ rotr(a, 22);
            const uint32_t maj = (a & b) ^ (a & c) ^ (b & c);
            const uint32_t t2 = S0 + maj;
            h = g;
            g = f;
            f = e;
            e = d + t1;
            d = c;
            c = b;
            b = a;
            a = t1 + t2;
        }
        h_[0] += a;
        h_[1] += b;
        h_[2] += c;
        h_[3] += d;
        h_[4] += e;
        h_[5] += f;
        h_[6] += g;
        h_[7] += h;
    }

    uint32_t h_[8];
    uint64_t n_bytes_;
    uint8_t buf_[64];
    size_t n_buf_;
};
