// Deterministic randomness: the same seed gives the same numbers on every
// platform and compiler. <random>'s engines are portable but its
// distributions are not (each standard library maps bits to values its own
// way), so gpemu draws from these instead: splitmix64 (Steele, Lea, Flood
// 2014) to mix seeds and for short streams, xoshiro256** (Blackman, Vigna
// 2018) for long ones, and plain-double conversions to uniform and normal
// values. Every seeded figure gpemu prints or tests pin comes from here.
#pragma once

#include <cstdint>

namespace gpemu::common {

inline constexpr std::uint64_t kGoldenGamma = 0x9e3779b97f4a7c15ULL;

// splitmix64's output function (its "mix64variant13" finaliser): a bijective
// mixer, so distinct inputs never collide.
constexpr std::uint64_t mix64(std::uint64_t x) {
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

// The finaliser applied to x + golden gamma. splitmix64(state) is the value
// the splitmix64 generator in `state` returns next.
constexpr std::uint64_t splitmix64(std::uint64_t x) { return mix64(x + kGoldenGamma); }

// A seed derived from two values, e.g. (seed, epoch) or (stream, index).
constexpr std::uint64_t mix_seed(std::uint64_t a, std::uint64_t b) {
  return splitmix64(a ^ splitmix64(b ^ 0x632be59bd9b4e019ULL));
}

// The splitmix64 generator: advances `state` and returns its next value
// (64 bits of state, a period of 2^64). Cheap to seed anywhere, so it suits
// counter-like streams (one per file, per rank).
constexpr std::uint64_t next_splitmix64(std::uint64_t& state) {
  const std::uint64_t v = splitmix64(state);
  state += kGoldenGamma;
  return v;
}

// 53 random bits as a double. Each caller keeps the interval it was written
// with, so seeded figures stay bit for bit what they were.
// [0, 1)
constexpr double unit_closed_open(std::uint64_t bits) { return static_cast<double>(bits >> 11) * 0x1.0p-53; }
// The midpoints of the 2^53 cells: never 0, but the top cell's midpoint
// (1 - 2^-54) rounds to 1.0 in a double, so the interval is (0, 1].
constexpr double unit_midpoint(std::uint64_t bits) { return (static_cast<double>(bits >> 11) + 0.5) * 0x1.0p-53; }
// (0, 1]: never 0, so a logarithm of it is finite.
constexpr double unit_open_closed(std::uint64_t bits) { return static_cast<double>((bits >> 11) + 1) * 0x1.0p-53; }

// A standard normal value from two uniforms by Box-Muller's cosine branch
// (one value per pair). u1 must be in (0, 1] (its logarithm is taken), u2 in
// [0, 1).
double box_muller(double u1, double u2);

// xoshiro256**: fast, 256 bits of state, good statistical quality; seeded
// through splitmix64.
class Rng {
 public:
  explicit Rng(std::uint64_t seed) {
    for (int i = 0; i < 4; ++i) s_[i] = splitmix64(seed + static_cast<std::uint64_t>(i) * kGoldenGamma);
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
  double uniform() { return unit_closed_open(next()); }
  double uniform(double lo, double hi) { return lo + (hi - lo) * uniform(); }
  // Uniform integer in [0, n), unbiased (Lemire's multiply-and-reject). n > 0.
  std::uint64_t below(std::uint64_t n) {
    for (;;) {
      const unsigned __int128 m = static_cast<unsigned __int128>(next()) * n;
      const auto low = static_cast<std::uint64_t>(m);
      if (low >= n || low >= (0 - n) % n) return static_cast<std::uint64_t>(m >> 64);
    }
  }
  // Standard normal (Box-Muller; one value per two uniforms).
  double normal();

 private:
  static constexpr std::uint64_t rotl(std::uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }
  std::uint64_t s_[4];
};

}  // namespace gpemu::common
