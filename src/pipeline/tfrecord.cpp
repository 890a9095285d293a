#include "pipeline/tfrecord.h"

#include <fcntl.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstring>

#include <fmt/format.h>

#include "gpemu/error.h"
#include "pipeline/bytes.h"

namespace gpemu::pipeline {
namespace {

constexpr Crc32 kCastagnoli(kCrc32Castagnoli);

// Protobuf wire format: a varint, and a length-delimited field.
void put_varint(std::vector<std::byte>& out, std::uint64_t v) {
  while (v >= 0x80) {
    out.push_back(static_cast<std::byte>((v & 0x7F) | 0x80));
    v >>= 7;
  }
  out.push_back(static_cast<std::byte>(v));
}

void put_field(std::vector<std::byte>& out, int field, std::span<const std::byte> bytes) {
  put_varint(out, static_cast<std::uint64_t>(field) << 3 | 2);
  put_varint(out, bytes.size());
  out.insert(out.end(), bytes.begin(), bytes.end());
}

std::vector<std::byte> as_bytes(const std::string& s) {
  std::vector<std::byte> out(s.size());
  std::memcpy(out.data(), s.data(), s.size());
  return out;
}

// One map<string, Feature> entry of Features: key = 1, value = 2.
void put_feature(std::vector<std::byte>& features, const std::string& key, const std::vector<std::byte>& feature) {
  std::vector<std::byte> entry;
  put_field(entry, 1, as_bytes(key));
  put_field(entry, 2, feature);
  put_field(features, 1, entry);
}

}  // namespace

std::uint32_t crc32c(std::span<const std::byte> data, std::uint32_t crc) { return kCastagnoli(data, crc); }

std::uint32_t masked_crc32c(std::span<const std::byte> data) {
  const std::uint32_t c = crc32c(data);
  return ((c >> 15) | (c << 17)) + 0xa282ead8u;
}

void append_tfrecord(std::vector<std::byte>& out, std::span<const std::byte> payload) {
  std::vector<std::byte> length;
  put_le(length, payload.size(), 8);
  out.insert(out.end(), length.begin(), length.end());
  put_le(out, masked_crc32c(length), 4);
  out.insert(out.end(), payload.begin(), payload.end());
  put_le(out, masked_crc32c(payload), 4);
}

std::vector<std::byte> example_with_image(std::span<const std::byte> image) {
  // Feature: bytes_list = 1 (BytesList: value = 1), int64_list = 3 (Int64List: packed value = 1).
  std::vector<std::byte> bytes_list, image_feature;
  put_field(bytes_list, 1, image);
  put_field(image_feature, 1, bytes_list);
  std::vector<std::byte> packed, int64_list, size_feature;
  put_varint(packed, image.size());
  put_field(int64_list, 1, packed);
  put_field(size_feature, 3, int64_list);
  std::vector<std::byte> features, example;
  put_feature(features, "image", image_feature);
  put_feature(features, "size", size_feature);
  put_field(example, 1, features);  // Example: features = 1
  return example;
}

std::vector<TfRecordExtent> scan_tfrecords(const std::filesystem::path& file, std::uint64_t size,
                                           std::uint64_t max_records) {
  const std::string what = "TFRecord file '" + file.string() + "'";
  const int fd = ::open(file.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw InputError(fmt::format("{}: cannot open: {}", what, std::strerror(errno)));
  std::vector<TfRecordExtent> out;
  try {
    std::uint64_t at = 0;
    while (at < size) {
      const std::uint64_t index = out.size();
      if (index >= max_records)
        throw InputError(fmt::format("{}: more than {} records; expected at most that many (fewer, larger records)",
                                     what, max_records));
      if (size - at < 12)
        throw InputError(fmt::format(
            "{}: record {} at byte {} is cut short ({} bytes left, a record header is 12); the file is truncated", what,
            index, at, size - at));
      std::array<std::byte, 12> header{};
      const ssize_t got = ::pread(fd, header.data(), header.size(), static_cast<off_t>(at));
      if (got != static_cast<ssize_t>(header.size()))
        throw InputError(fmt::format("{}: cannot read record {} at byte {}: {}", what, index, at,
                                     got < 0 ? std::strerror(errno) : "short read"));
      const std::uint64_t length = read_le(header.data(), 8);
      const auto crc = static_cast<std::uint32_t>(read_le(header.data() + 8, 4));
      if (crc != masked_crc32c(std::span(header.data(), 8)))
        throw InputError(
            fmt::format("{}: record {} at byte {}: the length field's CRC does not match; not a TFRecord file, "
                        "or damaged",
                        what, index, at));
      // Compared without adding to `length`, which the file chose (it may be near 2^64).
      if (length > size - at - 12 || size - at - 12 - length < 4)
        throw InputError(fmt::format(
            "{}: record {} at byte {} says {} payload bytes, past the end of the file ({} bytes); the file is "
            "truncated",
            what, index, at, length, size));
      out.push_back({at, length + kTfRecordOverhead});
      at += length + kTfRecordOverhead;
    }
  } catch (...) {
    ::close(fd);
    throw;
  }
  ::close(fd);
  return out;
}

}  // namespace gpemu::pipeline
