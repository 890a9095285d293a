// TFRecord files as TensorFlow writes and reads them, without TensorFlow:
// each record is its length (uint64, little-endian), the masked CRC-32C of
// those 8 bytes, the payload, and the masked CRC-32C of the payload
// (tensorflow/core/lib/io/record_writer.cc documents the framing; the CRC is
// Castagnoli's polynomial, masked as ((crc >> 15) | (crc << 17)) + 0xa282ead8).
// DLIO's generator writes one tf.train.Example per sample, with the sample's
// bytes under "image" and their count under "size"; so does gpemu's.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <span>
#include <string>
#include <vector>

namespace gpemu::pipeline {

// CRC-32C (Castagnoli) of `data`, continuing from `crc` (0 to start).
std::uint32_t crc32c(std::span<const std::byte> data, std::uint32_t crc = 0);
// TFRecord's masked CRC-32C.
std::uint32_t masked_crc32c(std::span<const std::byte> data);

// Bytes a record of a payload this long takes in the file (header and footer included).
constexpr std::uint64_t kTfRecordOverhead = 8 + 4 + 4;

// Appends one framed record to `out`.
void append_tfrecord(std::vector<std::byte>& out, std::span<const std::byte> payload);

// A serialized tf.train.Example with features {"image": bytes_list [image],
// "size": int64_list [image.size()]} (protobuf wire format, fields in key order).
std::vector<std::byte> example_with_image(std::span<const std::byte> image);

struct TfRecordExtent {
  std::uint64_t offset = 0;  // the record's first byte (its length field)
  std::uint64_t bytes = 0;   // the whole framed record
};

// The records of `file` (`size` bytes), in order, each length field checked
// against its CRC and against the file's end. Reads 12 bytes per record (the
// payload CRCs are not checked here). InputError naming the file and the
// record for a bad CRC, a record past the end or more than `max_records`.
std::vector<TfRecordExtent> scan_tfrecords(const std::filesystem::path& file, std::uint64_t size,
                                           std::uint64_t max_records);

}  // namespace gpemu::pipeline
