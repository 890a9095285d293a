// Small, portable pseudo-random generators for the pipeline. std::mt19937 is
// portable but std::uniform_*_distribution is not (each standard library maps
// bits to values its own way), so sampler permutations and augmentations use
// these instead: the same seed gives the same epoch order and the same crops
// on every platform and compiler.
#pragma once

#include <cstdint>

namespace gpemu::pipeline::detail {

constexpr std::uint64_t splitmix64(std::uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

// A seed derived from two values, e.g. (seed, epoch) or (stream, index).
constexpr std::uint64_t mix_seed(std::uint64_t a, std::uint64_t b) {
  return splitmix64(a ^ splitmix64(b ^ 0x632be59bd9b4e019ULL));
}

// xoshiro256**: fast, 256 bits of state, good statistical quality.
class Rng {
 public:
  explicit Rng(std::uint64_t seed) {
    for (int i = 0; i < 4; ++i) s_[i] = splitmix64(seed + static_cast<std::uint64_t>(i) * 0x9e3779b97f4a7c15ULL);
  }
  std::uint64_t next() {
    const std::uint64_t result = rotl(s_[1] * 5, 7) * 9;
    const std::uint64_t t = s_[1] << 17;
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
  double uniform(double lo, double hi) { return lo + (hi - lo) * uniform(); }
  // Uniform integer in [0, n), unbiased (Lemire's multiply-and-reject). n > 0.
  std::uint64_t below(std::uint64_t n) {
    for (;;) {
      const unsigned __int128 m = static_cast<unsigned __int128>(next()) * n;
      const auto low = static_cast<std::uint64_t>(m);
      if (low >= n || low >= (0 - n) % n) return static_cast<std::uint64_t>(m >> 64);
    }
  }
  // Standard normal (Box-Muller; one value per call is enough here).
  double normal();

 private:
  static constexpr std::uint64_t rotl(std::uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }
  std::uint64_t s_[4];
};

}  // namespace gpemu::pipeline::detail
