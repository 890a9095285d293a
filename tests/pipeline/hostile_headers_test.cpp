// npy/npz headers whose counts and sizes are hostile: products that wrap 64
// bits, records of 0 bytes, digits past 2^64, arrays other than the samples.
// Each must be an InputError naming the file before anything is allocated
// (issue 10: C2, S4, S5, U1).
#include <cstddef>
#include <string>
#include <vector>

#include <sys/stat.h>

#include <gtest/gtest.h>

#include <cstring>

#include "gpemu/error.h"
#include "gpemu/pipeline.h"
#include "pipeline/npy.h"
#include "support/pipeline_test_util.h"

namespace gpemu::pipeline {
namespace {

using testing::TempDir;
using testing::write_bytes;

// A version 1.0 .npy whose header dict is `dict` verbatim, then `data_bytes` zeros.
std::vector<std::byte> npy_with_dict(std::string dict, std::size_t data_bytes) {
  const std::size_t total = (10 + dict.size() + 1 + 63) / 64 * 64;
  dict.append(total - 10 - dict.size() - 1, ' ');
  dict += '\n';
  std::vector<std::byte> out;
  for (int c : {0x93, int{'N'}, int{'U'}, int{'M'}, int{'P'}, int{'Y'}, 1, 0}) out.push_back(static_cast<std::byte>(c));
  out.push_back(static_cast<std::byte>(dict.size() & 0xff));
  out.push_back(static_cast<std::byte>(dict.size() >> 8));
  for (char c : dict) out.push_back(static_cast<std::byte>(c));
  out.resize(out.size() + data_bytes);
  return out;
}

// The InputError message of opening a folder holding one .npy with `dict`.
std::string npy_folder_error(const std::string& dict, std::size_t data_bytes = 8192) {
  TempDir dir;
  write_bytes(dir.path() / "img_0_of_1.npy", npy_with_dict(dict, data_bytes));
  DlioOptions o;
  o.format = DlioFormat::Npy;
  try {
    open_dlio_dataset(dir.path(), o);
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

TEST(HostileHeaders, ACountTimesLengthThatWrapsIsRefused) {
  // 2^63 x 4096 wraps to 0; the old check passed and listing 2^63 samples
  // ran the machine out of memory.
  const std::string err =
      npy_folder_error("{'descr': '|u1', 'fortran_order': False, 'shape': (9223372036854775808, 4096), }");
  EXPECT_NE(err.find("img_0_of_1.npy"), std::string::npos) << err;
  EXPECT_NE(err.find("does not fit in 64 bits"), std::string::npos) << err;
}

TEST(HostileHeaders, ARecordLengthThatWrapsIsRefused) {
  const std::string err =
      npy_folder_error("{'descr': '|u1', 'fortran_order': False, 'shape': (1, 4294967296, 4294967296, 2), }");
  EXPECT_NE(err.find("the record length"), std::string::npos) << err;
}

TEST(HostileHeaders, ACountPastTheFileIsRefusedWithTheFigures) {
  const std::string err = npy_folder_error("{'descr': '|u1', 'fortran_order': False, 'shape': (100000000000, 1), }");
  EXPECT_NE(err.find("file is shorter than its header says (100000000000 records of 1 bytes"), std::string::npos)
      << err;
}

TEST(HostileHeaders, ZeroByteRecordsAreRefused) {
  for (const char* dict : {"{'descr': '|u1', 'fortran_order': False, 'shape': (2, 0), }",
                           "{'descr': '|u0', 'fortran_order': False, 'shape': (100000000000, 4), }"}) {
    const std::string err = npy_folder_error(dict);
    EXPECT_TRUE(err.find("records of 0 bytes") != std::string::npos ||
                err.find("items of 0 bytes") != std::string::npos)
        << dict << ": " << err;
  }
}

TEST(HostileHeaders, DigitsPast64BitsNameTheField) {
  // std::stoul / std::stoull used to throw their own one-word messages.
  const std::string descr =
      npy_folder_error("{'descr': '<f99999999999999999999', 'fortran_order': False, 'shape': (2, 2), }");
  EXPECT_NE(descr.find(".npy item size '99999999999999999999' is not a number"), std::string::npos) << descr;
  const std::string shape =
      npy_folder_error("{'descr': '|u1', 'fortran_order': False, 'shape': (18446744073709551616, 2), }");
  EXPECT_NE(shape.find(".npy shape entry '18446744073709551616'"), std::string::npos) << shape;
}

TEST(HostileHeaders, MessagesQuotingTheHeaderStayOneLine) {
  // The descr's text was echoed with its newlines and raw bytes (fuzz/npy_fuzz.cpp).
  const std::string err = npy_folder_error("{'descr': 'shape\n\x01', 'fortran_order': False, 'shape': (2, 2), }");
  EXPECT_NE(err.find("'shape\\n\\x01' has no item size"), std::string::npos) << err;
  EXPECT_EQ(err.find('\n'), std::string::npos) << err;
}

TEST(HostileHeaders, TooManyAxesAreRefused) {
  std::string shape = "(";
  for (int i = 0; i < 40; ++i) shape += "1, ";
  shape += ")";
  const std::string err = npy_folder_error("{'descr': '|u1', 'fortran_order': False, 'shape': " + shape + ", }");
  EXPECT_NE(err.find("more than 32 axes"), std::string::npos) << err;
}

TEST(HostileHeaders, AnNpzWithoutTheSampleArrayIsRefused) {
  // The first array (here the labels) used to be read as the samples.
  TempDir dir;
  auto y = make_npy_header("<i8", {4});
  y.resize(y.size() + 32);
  write_stored_zip(dir.path() / "img_0_of_1.npz", {{"y.npy", y}});
  DlioOptions o;
  o.format = DlioFormat::Npz;
  try {
    open_dlio_dataset(dir.path(), o);
    FAIL() << "an npz without x.npy was read";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("no array 'x' (the file holds y.npy)"), std::string::npos) << e.what();
  }
}

TEST(HostileHeaders, NpzMemberNamesInAMessageStayOneLine) {
  // A member named with a newline and a terminal escape was listed raw in the
  // "no array" message (found by fuzz/npz_fuzz.cpp in CI).
  TempDir dir;
  auto y = make_npy_header("<i8", {4});
  write_stored_zip(dir.path() / "img_0_of_1.npz", {{"y\n\x1b[31m.npy", y}});
  DlioOptions o;
  o.format = DlioFormat::Npz;
  try {
    open_dlio_dataset(dir.path(), o);
    FAIL() << "an npz without x.npy was read";
  } catch (const InputError& e) {
    const std::string err = e.what();
    EXPECT_NE(err.find("(the file holds y\\n\\x1b[31m.npy)"), std::string::npos) << err;
    EXPECT_EQ(err.find('\n'), std::string::npos) << err;
    EXPECT_EQ(err.find('\x1b'), std::string::npos) << err;
  }
}

TEST(HostileHeaders, ZipOffsetsThatWrapAreATruncatedFile) {
  // An end-of-central-directory record whose offset + size wraps 64 bits
  // passed the bounds check and asked for a vector past max_size().
  std::vector<std::byte> z(22 + 20 + 56, std::byte{0});
  auto put = [&](std::size_t at, std::uint64_t v, int n) {
    for (int i = 0; i < n; ++i) z[at + i] = static_cast<std::byte>((v >> (8 * i)) & 0xff);
  };
  // ZIP64 end record at 0, locator at 56, EOCD at 76.
  put(0, 0x06064b50, 4);
  put(32, 1, 8);                      // entries
  put(40, 0xfffffffffffffff0ull, 8);  // central directory size
  put(48, 0x20, 8);                   // central directory offset
  put(56, 0x07064b50, 4);
  put(64, 0, 8);  // ZIP64 end record offset
  put(76, 0x06054b50, 4);
  put(76 + 10, 0xffff, 2);
  put(76 + 12, 0xffffffff, 4);
  put(76 + 16, 0xffffffff, 4);
  TempDir dir;
  write_bytes(dir.path() / "x.npz", z);
  try {
    read_zip_entries(dir.path() / "x.npz");
    FAIL() << "a wrapping central directory was read";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("truncated zip file"), std::string::npos) << e.what();
  }
}

TEST(HostileHeaders, AZipExtraFieldLongerThanItsAreaIsRefused) {
  // Found by fuzz/npz_fuzz.cpp: a ZIP64 extra field whose length ran past the
  // entry's extra area had its 64-bit sizes read past the buffer (ASan:
  // heap-buffer-overflow in read_zip_entries).
  const std::string bytes(
      "\x50\x4b\x03\x04\x14\x00\x00\x00\x00\x00\x6b\x81\x81\x5d\x83\x16\xdc\x8c\x01\x00\x00\x00\x01\x00"
      "\x00\x00\x0c\x00\x00\x00\x79\x0a\x62\x1b\x5b\x36\x36\x6d\x2e\x6e\x70\x79\x78\x50\x4b\x01\x02\x14"
      "\x03\x14\x00\x00\x4b\x03\x59\x14\x00\x6b\x81\x81\x5d\x83\x80\xff\xff\xff\xff\xff\xff\xd7\x00\x00"
      "\x00\x0c\x00\x00\x00\x79\x0a\x62\x79\x50\x4b\x05\x06\x00\x00\xdc\x8c\x01\x00\x00\x00\x01\x00\x00"
      "\xb7\x44\x05\x00\x80\x60\x00\x00\x00\x0c\x14\x00\x00\x4b\x03\x59\x14\x00\x6b\x81\x81\x5d\x83\x16"
      "\xdc\x8c\x00\x00\x79\x0a\x62\x79\x50\x4b\x05\x06\x00\x00\x00\x00\x01\x00\x01\x00\x3a\x00\x00\x00"
      "\x2b\x00\x00\x00\x01\x00\x01\x00\x3a\x00\x00\x00\x2b\x00\x00\x00\x00\x00",
      162);
  TempDir dir;
  std::vector<std::byte> z(bytes.size());
  std::memcpy(z.data(), bytes.data(), bytes.size());
  write_bytes(dir.path() / "x.npz", z);
  try {
    read_zip_entries(dir.path() / "x.npz");
    FAIL() << "an extra field past its area was read";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("malformed zip"), std::string::npos) << e.what();
  }
}

TEST(HostileHeaders, AFifoNamedJpgIsNamedForWhatItIs) {
  // It used to read "cannot stat ...: Operation not supported".
  TempDir dir;
  std::filesystem::create_directories(dir.path() / "c0");
  ASSERT_EQ(::mkfifo((dir.path() / "c0" / "a.jpg").c_str(), 0600), 0);
  try {
    open_image_folder(dir.path());
    FAIL() << "a FIFO was listed as an image";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("a.jpg' is a pipe, socket or device, not a regular file"), std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace gpemu::pipeline
