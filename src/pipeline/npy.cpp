#include "pipeline/npy.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <charconv>
#include <cstring>
#include <fstream>

#include "common/atomic_file.h"
#include "common/checked.h"
#include "common/message_text.h"
#include "gpemu/error.h"
#include "pipeline/bytes.h"

namespace gpemu::pipeline {
namespace {

// The value following 'key': in a numpy header dict, up to the next ',' at
// depth 0 (or the dict's closing brace).
std::string dict_value(const std::string& dict, const std::string& key, const std::string& what) {
  const std::string quoted1 = "'" + key + "'";
  const std::string quoted2 = "\"" + key + "\"";
  auto pos = dict.find(quoted1);
  std::size_t klen = quoted1.size();
  if (pos == std::string::npos) {
    pos = dict.find(quoted2);
    klen = quoted2.size();
  }
  if (pos == std::string::npos) throw InputError(what + ": .npy header has no '" + key + "' entry");
  pos = dict.find(':', pos + klen);
  if (pos == std::string::npos) throw InputError(what + ": malformed .npy header");
  ++pos;
  int depth = 0;
  std::size_t end = pos;
  for (; end < dict.size(); ++end) {
    const char c = dict[end];
    if (c == '(' || c == '[') ++depth;
    if (c == ')' || c == ']') --depth;
    if (depth == 0 && (c == ',' || c == '}')) break;
  }
  auto value = dict.substr(pos, end - pos);
  const auto first = value.find_first_not_of(" \t");
  const auto last = value.find_last_not_of(" \t");
  return first == std::string::npos ? std::string() : value.substr(first, last - first + 1);
}

}  // namespace

std::uint64_t NpyHeader::elements() const {
  std::uint64_t n = 1;
  for (auto d : shape) n = checked_mul(n, d, ".npy shape: the element count");
  return n;
}

namespace {

// A header field's decimal digits as a number; InputError naming the field
// when it does not fit (a fuzzed "'<f99999999999999999999'" must not reach
// std::stoul, whose message names nothing).
std::uint64_t header_number(std::string_view digits, const std::string& what, const char* field) {
  std::uint64_t v = 0;
  auto [p, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), v);
  if (ec != std::errc() || p != digits.data() + digits.size())
    throw InputError(what + ": .npy " + field + " '" + std::string(digits.substr(0, 40)) +
                     (digits.size() > 40 ? "..." : "") + "' is not a number up to 2^64 - 1");
  return v;
}

// The largest number of axes NumPy allows (NPY_MAXDIMS).
constexpr std::size_t kMaxAxes = 32;

}  // namespace

namespace {

NpyHeader parse_header(std::span<const std::byte> bytes, const std::string& what);

}  // namespace

NpyHeader parse_npy_header(std::span<const std::byte> bytes, const std::string& what) {
  try {
    return parse_header(bytes, what);
  } catch (const InputError& e) {
    // Messages quote the header's text, which a damaged file fills with
    // newlines and control bytes (found by fuzz/npy_fuzz.cpp).
    throw InputError(one_line_message(e.what()));
  }
}

namespace {

NpyHeader parse_header(std::span<const std::byte> bytes, const std::string& what) {
  static constexpr unsigned char kMagic[6] = {0x93, 'N', 'U', 'M', 'P', 'Y'};
  if (bytes.size() < 10 || std::memcmp(bytes.data(), kMagic, 6) != 0) {
    throw InputError(what + ": not a .npy array (missing the \\x93NUMPY magic)");
  }
  const int major = std::to_integer<int>(bytes[6]);
  std::uint64_t dict_len = 0;
  std::uint64_t prefix = 0;
  if (major == 1) {
    dict_len = read_le(bytes.data() + 8, 2);
    prefix = 10;
  } else if (major == 2 || major == 3) {
    if (bytes.size() < 12) throw InputError(what + ": truncated .npy header");
    dict_len = read_le(bytes.data() + 8, 4);
    prefix = 12;
  } else {
    throw InputError(what + ": unsupported .npy version " + std::to_string(major) + " (1, 2 and 3 are read)");
  }
  if (prefix + dict_len > bytes.size()) throw InputError(what + ": truncated .npy header");
  const std::string dict(reinterpret_cast<const char*>(bytes.data() + prefix), dict_len);

  NpyHeader h;
  h.header_bytes = prefix + dict_len;
  auto descr = dict_value(dict, "descr", what);
  if (descr.size() < 2 || (descr.front() != '\'' && descr.front() != '"')) {
    throw InputError(what + ": .npy descr " + descr + " is not a simple type (structured arrays are not read)");
  }
  h.descr = descr.substr(1, descr.size() - 2);
  std::size_t digits = h.descr.find_first_of("0123456789");
  if (digits == std::string::npos) throw InputError(what + ": .npy descr '" + h.descr + "' has no item size");
  h.item_size = static_cast<std::size_t>(header_number(std::string_view(h.descr).substr(digits), what, "item size"));
  // 0 bytes (descr '|u0') would make records of nothing; 1 MiB is far past
  // any numeric type and any fixed-width string a dataset stores per item.
  if (h.item_size < 1 || h.item_size > (1u << 20))
    throw InputError(what + ": .npy descr '" + h.descr + "' gives items of " + std::to_string(h.item_size) +
                     " bytes; expected 1 to 1048576 bytes per item");
  h.fortran_order = dict_value(dict, "fortran_order", what) == "True";
  auto shape = dict_value(dict, "shape", what);
  std::size_t i = 0;
  while (i < shape.size()) {
    if (std::isdigit(static_cast<unsigned char>(shape[i]))) {
      std::size_t j = i;
      while (j < shape.size() && std::isdigit(static_cast<unsigned char>(shape[j]))) ++j;
      h.shape.push_back(header_number(std::string_view(shape).substr(i, j - i), what, "shape entry"));
      if (h.shape.size() > kMaxAxes)
        throw InputError(what + ": .npy shape has more than " + std::to_string(kMaxAxes) + " axes; expected at most " +
                         std::to_string(kMaxAxes) + " (NumPy's limit)");
      i = j;
    } else {
      ++i;
    }
  }
  return h;
}

}  // namespace

std::vector<std::byte> make_npy_header(std::string_view descr, const std::vector<std::uint64_t>& shape) {
  std::string dict = "{'descr': '" + std::string(descr) + "', 'fortran_order': False, 'shape': (";
  for (std::size_t i = 0; i < shape.size(); ++i) {
    dict += std::to_string(shape[i]);
    if (shape.size() == 1 || i + 1 < shape.size()) dict += ",";
    if (i + 1 < shape.size()) dict += " ";
  }
  dict += "), }";
  // Pad with spaces and a final newline so the data starts 64-byte aligned.
  const std::size_t total = (10 + dict.size() + 1 + 63) / 64 * 64;
  dict.append(total - 10 - dict.size() - 1, ' ');
  dict += '\n';
  std::vector<std::byte> out;
  for (int c : {0x93, int{'N'}, int{'U'}, int{'M'}, int{'P'}, int{'Y'}}) out.push_back(static_cast<std::byte>(c));
  out.push_back(std::byte{1});
  out.push_back(std::byte{0});
  put_le(out, dict.size(), 2);
  for (char c : dict) out.push_back(static_cast<std::byte>(c));
  return out;
}

std::uint32_t crc32(std::span<const std::byte> data, std::uint32_t crc) {
  static constexpr Crc32 kIeee(kCrc32Ieee);
  return kIeee(data, crc);
}

std::vector<ZipEntry> read_zip_entries(const std::filesystem::path& file) {
  const std::string what = file.string();
  std::ifstream in(file, std::ios::binary);
  if (!in) throw InputError(what + ": cannot open the .npz (zip) file");
  in.seekg(0, std::ios::end);
  const auto file_size = static_cast<std::uint64_t>(in.tellg());
  auto read_at = [&](std::uint64_t off, std::size_t n) {
    if (n > file_size || off > file_size - n) throw InputError(what + ": truncated zip file");
    std::vector<std::byte> buf(n);
    in.seekg(static_cast<std::streamoff>(off));
    in.read(reinterpret_cast<char*>(buf.data()), static_cast<std::streamsize>(n));
    if (!in) throw InputError(what + ": read error in zip file");
    return buf;
  };

  // End of central directory record: 22 bytes plus a comment of up to 64 KiB.
  const std::size_t tail_len = static_cast<std::size_t>(std::min<std::uint64_t>(file_size, 22 + 65535));
  if (tail_len < 22) throw InputError(what + ": too short to be a zip file");
  const auto tail = read_at(file_size - tail_len, tail_len);
  std::int64_t eocd = -1;
  for (std::int64_t i = static_cast<std::int64_t>(tail_len) - 22; i >= 0; --i) {
    if (read_le(tail.data() + i, 4) == 0x06054b50) {
      eocd = i;
      break;
    }
  }
  if (eocd < 0) throw InputError(what + ": not a zip file (no end-of-central-directory record)");
  const std::byte* e = tail.data() + eocd;
  std::uint64_t count = read_le(e + 10, 2);
  std::uint64_t cd_size = read_le(e + 12, 4);
  std::uint64_t cd_offset = read_le(e + 16, 4);
  if (count == 0xffff || cd_size == 0xffffffff || cd_offset == 0xffffffff) {
    // ZIP64: a locator just before the EOCD points at the ZIP64 EOCD record.
    const std::uint64_t eocd_abs = file_size - tail_len + static_cast<std::uint64_t>(eocd);
    if (eocd_abs < 20) throw InputError(what + ": malformed zip64 file");
    const auto loc = read_at(eocd_abs - 20, 20);
    if (read_le(loc.data(), 4) != 0x07064b50) throw InputError(what + ": malformed zip64 locator");
    const auto rec = read_at(read_le(loc.data() + 8, 8), 56);
    if (read_le(rec.data(), 4) != 0x06064b50) throw InputError(what + ": malformed zip64 end record");
    count = read_le(rec.data() + 32, 8);
    cd_size = read_le(rec.data() + 40, 8);
    cd_offset = read_le(rec.data() + 48, 8);
  }
  const auto cd = read_at(cd_offset, static_cast<std::size_t>(cd_size));
  std::vector<ZipEntry> entries;
  std::size_t p = 0;
  for (std::uint64_t k = 0; k < count; ++k) {
    if (p + 46 > cd.size() || read_le(cd.data() + p, 4) != 0x02014b50) {
      throw InputError(what + ": malformed zip central directory");
    }
    const std::byte* c = cd.data() + p;
    ZipEntry z;
    z.method = static_cast<std::uint16_t>(read_le(c + 10, 2));
    z.compressed_size = read_le(c + 20, 4);
    z.size = read_le(c + 24, 4);
    const auto name_len = read_le(c + 28, 2);
    const auto extra_len = read_le(c + 30, 2);
    const auto comment_len = read_le(c + 32, 2);
    std::uint64_t local = read_le(c + 42, 4);
    if (p + 46 + name_len + extra_len + comment_len > cd.size()) throw InputError(what + ": malformed zip entry");
    z.name.assign(reinterpret_cast<const char*>(c + 46), name_len);
    // ZIP64 extra field: the 64-bit values of the fields that read 0xffffffff, in order.
    for (std::size_t x = 0; x + 4 <= extra_len;) {
      const std::byte* f = c + 46 + name_len + x;
      const auto id = read_le(f, 2);
      const auto len = read_le(f + 2, 2);
      // A field must end inside the entry's extra area (fuzzing found one
      // that claimed more, and its 64-bit values were read past the buffer).
      if (4 + len > extra_len - x)
        throw InputError(what + ": malformed zip extra field for " + printable_excerpt(z.name, 64));
      if (id == 0x0001) {
        std::size_t q = 4;
        if (z.size == 0xffffffff && q + 8 <= len + 4) {
          z.size = read_le(f + q, 8);
          q += 8;
        }
        if (z.compressed_size == 0xffffffff && q + 8 <= len + 4) {
          z.compressed_size = read_le(f + q, 8);
          q += 8;
        }
        if (local == 0xffffffff && q + 8 <= len + 4) {
          local = read_le(f + q, 8);
          q += 8;
        }
      }
      x += 4 + len;
    }
    const auto lh = read_at(local, 30);
    if (read_le(lh.data(), 4) != 0x04034b50)
      throw InputError(what + ": malformed zip local header for " + printable_excerpt(z.name, 64));
    z.data_offset = local + 30 + read_le(lh.data() + 26, 2) + read_le(lh.data() + 28, 2);
    entries.push_back(std::move(z));
    p += 46 + name_len + extra_len + comment_len;
  }
  return entries;
}

void write_stored_zip(const std::filesystem::path& file,
                      const std::vector<std::pair<std::string, std::vector<std::byte>>>& entries) {
  std::vector<std::byte> central;
  AtomicFile out(file, "zip file");
  std::uint64_t offset = 0;
  constexpr std::uint16_t kDosTime = 0, kDosDate = (1 << 5) | 1;  // 1980-01-01 00:00
  for (const auto& [name, data] : entries) {
    if (data.size() >= 0xffffffffu || offset >= 0xffffffffu) {
      throw InputError(file.string() + ": stored zip entries over 4 GiB are not written (no ZIP64 support)");
    }
    const auto crc = crc32(data);
    std::vector<std::byte> h;
    put_le(h, 0x04034b50, 4);
    put_le(h, 20, 2);  // version needed
    put_le(h, 0, 2);   // flags
    put_le(h, 0, 2);   // stored
    put_le(h, kDosTime, 2);
    put_le(h, kDosDate, 2);
    put_le(h, crc, 4);
    put_le(h, data.size(), 4);
    put_le(h, data.size(), 4);
    put_le(h, name.size(), 2);
    put_le(h, 0, 2);
    for (char ch : name) h.push_back(static_cast<std::byte>(ch));
    out.write(h.data(), h.size());
    out.write(data.data(), data.size());

    put_le(central, 0x02014b50, 4);
    put_le(central, 20, 2);  // version made by
    put_le(central, 20, 2);  // version needed
    put_le(central, 0, 2);
    put_le(central, 0, 2);
    put_le(central, kDosTime, 2);
    put_le(central, kDosDate, 2);
    put_le(central, crc, 4);
    put_le(central, data.size(), 4);
    put_le(central, data.size(), 4);
    put_le(central, name.size(), 2);
    put_le(central, 0, 2);  // extra
    put_le(central, 0, 2);  // comment
    put_le(central, 0, 2);  // disk
    put_le(central, 0, 2);  // internal attributes
    put_le(central, 0, 4);  // external attributes
    put_le(central, offset, 4);
    for (char ch : name) central.push_back(static_cast<std::byte>(ch));
    offset += h.size() + data.size();
  }
  std::vector<std::byte> end;
  put_le(end, 0x06054b50, 4);
  put_le(end, 0, 2);
  put_le(end, 0, 2);
  put_le(end, entries.size(), 2);
  put_le(end, entries.size(), 2);
  put_le(end, central.size(), 4);
  put_le(end, offset, 4);
  put_le(end, 0, 2);
  out.write(central.data(), central.size());
  out.write(end.data(), end.size());
  out.commit();
}

}  // namespace gpemu::pipeline
