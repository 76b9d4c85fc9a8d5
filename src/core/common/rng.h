// Rng: the seeded random generator the core is given (it never seeds one itself).
//
// xoshiro256** seeded through splitmix64: fast, small, and the same sequence on every
// machine for the same seed, which is what makes simulations reproducible. The core may
// not include <random> (its distributions differ between standard libraries), so the
// few distributions kvgate needs are here.
//
//   Rng rng(42);
//   double u = rng.uniform();            // [0, 1)
//   uint64_t i = rng.below(n);           // [0, n)
//   double gap = rng.exponential(qps);   // Poisson inter-arrival time, seconds
#pragma once

#include <cmath>
#include <cstdint>

namespace kvgate {

class Rng {
 public:
  explicit Rng(uint64_t seed) {
    for (uint64_t& s : s_) s = split_mix(seed);
  }

  uint64_t next() {
    const uint64_t result = rotl(s_[1] * 5, 7) * 9;
    const uint64_t t = s_[1] << 17;
    s_[2] ^= s_[0];
    s_[3] ^= s_[1];
    s_[1] ^= s_[2];
    s_[0] ^= s_[3];
    s_[2] ^= t;
    s_[3] = rotl(s_[3], 45);
    return result;
  }

  // Uniform in [0, 1).
  double uniform() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }

  // Uniform integer in [0, n). REQUIRES: n > 0.
  uint64_t below(uint64_t n) {
    // Lemire's multiply-shift; the tiny bias is irrelevant for kvgate's uses.
    return static_cast<uint64_t>((static_cast<__uint128_t>(next()) * n) >> 64);
  }

  // Exponential with the given rate (mean 1 / rate). REQUIRES: rate > 0.
  double exponential(double rate) { return -std::log1p(-uniform()) / rate; }

  // Standard normal (Box-Muller; one value per call, the other is discarded).
  double normal() {
    double u1 = uniform();
    double u2 = uniform();
    if (u1 < 1e-300) u1 = 1e-300;
    return std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2);
  }

  // An independent generator derived from this one (for per-component streams).
  Rng fork() { return Rng(next()); }

 private:
  static uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }
  static uint64_t split_mix(uint64_t& x) {
    uint64_t z = (x += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  }
  uint64_t s_[4];
};

}  // namespace kvgate
