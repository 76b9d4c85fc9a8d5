// FastMod: `a % d` for a fixed 32-bit divisor without a division instruction.
//
// Lemire, Kaser and Kurz, "Faster Remainder by Direct Computation" (2019): with
// M = ceil(2^128 / d), a % d is the high 64 bits of (M * a mod 2^128) * d, exactly, for
// every 64-bit a. Used where a remainder is taken per simulated token (the engine model's
// pseudo output tokens), where a 64-bit `div` is a measurable share of a step.
//
//   FastMod m(151643);
//   uint32_t t = m.mod(hash);  // == hash % 151643
#pragma once

#include <cstdint>

namespace kvgate {

class FastMod {
 public:
  // REQUIRES: d > 0
  explicit FastMod(uint32_t d = 1) : d_(d), m_(~U128{0} / d + 1) {}

  uint32_t divisor() const { return d_; }

  uint32_t mod(uint64_t a) const {
    const U128 low = m_ * a;  // M * a mod 2^128
    // (low * d) >> 128, as two 64 x 64 -> 128 products.
    const U128 bottom = (static_cast<U128>(static_cast<uint64_t>(low)) * d_) >> 64;
    const U128 top = static_cast<U128>(static_cast<uint64_t>(low >> 64)) * d_;
    return static_cast<uint32_t>((bottom + top) >> 64);
  }

 private:
  __extension__ using U128 = unsigned __int128;

  uint32_t d_;
  U128 m_;
};

}  // namespace kvgate
