// NumPy .npy headers and the stored (uncompressed) ZIP container of .npz
// files, enough to locate records inside them without NumPy and to write
// files NumPy loads (np.load). Format references: NEP 1 (.npy) and PKWARE's
// APPNOTE (ZIP, including ZIP64 extra fields, which np.savez writes).
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace gpemu::pipeline {

struct NpyHeader {
  std::string descr;  // e.g. "|u1", "<f4", "<i8"
  bool fortran_order = false;
  std::vector<std::uint64_t> shape;
  std::size_t item_size = 0;       // bytes per element, from descr
  std::uint64_t header_bytes = 0;  // data starts this many bytes into the .npy
  std::uint64_t elements() const;
};

// Parses the header at the start of `bytes` (which must hold all of it; 4 KiB
// is always enough for the arrays written here). InputError naming `what`.
NpyHeader parse_npy_header(std::span<const std::byte> bytes, const std::string& what);

// A version 1.0 header (magic, length, dict, padding to a multiple of 64).
std::vector<std::byte> make_npy_header(std::string_view descr, const std::vector<std::uint64_t>& shape);

struct ZipEntry {
  std::string name;
  std::uint16_t method = 0;       // 0 = stored
  std::uint64_t data_offset = 0;  // first byte of the entry's data in the file
  std::uint64_t compressed_size = 0;
  std::uint64_t size = 0;
};

// Entries of a ZIP file from its central directory. InputError naming the file.
std::vector<ZipEntry> read_zip_entries(const std::filesystem::path& file);

// Writes a ZIP file whose entries are stored without compression.
void write_stored_zip(const std::filesystem::path& file,
                      const std::vector<std::pair<std::string, std::vector<std::byte>>>& entries);

std::uint32_t crc32(std::span<const std::byte> data, std::uint32_t crc = 0);

}  // namespace gpemu::pipeline
