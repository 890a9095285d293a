// Little-endian integers and table-driven reflected CRC-32s, for the file
// formats the pipeline writes and reads: ZIP (.npz) uses the IEEE
// polynomial, TFRecord the Castagnoli one (CRC-32C).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

namespace gpemu::pipeline {

// The n-byte little-endian integer at p.
inline std::uint64_t read_le(const std::byte* p, int n) {
  std::uint64_t v = 0;
  for (int i = n - 1; i >= 0; --i) v = (v << 8) | std::to_integer<std::uint64_t>(p[i]);
  return v;
}

// Appends v as an n-byte little-endian integer.
inline void put_le(std::vector<std::byte>& out, std::uint64_t v, int n) {
  for (int i = 0; i < n; ++i) out.push_back(static_cast<std::byte>((v >> (8 * i)) & 0xff));
}

// A reflected CRC-32 of the given (reflected) polynomial.
class Crc32 {
 public:
  explicit constexpr Crc32(std::uint32_t polynomial) {
    for (std::uint32_t i = 0; i < 256; ++i) {
      std::uint32_t c = i;
      for (int k = 0; k < 8; ++k) c = (c & 1) ? polynomial ^ (c >> 1) : c >> 1;
      table_[i] = c;
    }
  }
  // The CRC of `data`, continuing from `crc` (0 to start).
  std::uint32_t operator()(std::span<const std::byte> data, std::uint32_t crc = 0) const {
    crc = ~crc;
    for (std::byte b : data) crc = table_[(crc ^ std::to_integer<std::uint32_t>(b)) & 0xff] ^ (crc >> 8);
    return ~crc;
  }

 private:
  std::array<std::uint32_t, 256> table_{};
};

inline constexpr std::uint32_t kCrc32Ieee = 0xEDB88320u;        // ZIP, gzip, PNG
inline constexpr std::uint32_t kCrc32Castagnoli = 0x82F63B78u;  // CRC-32C: iSCSI (RFC 3720 B.4), TFRecord

}  // namespace gpemu::pipeline
