// TFRecord files: CRC-32C and TensorFlow's masking, the tf.train.Example a
// sample is wrapped in, generated folders read back as their framed records,
// and hostile framing (bad CRCs, lengths past the end, lengths near 2^64)
// refused by name before anything is allocated.
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "gpemu/error.h"
#include "gpemu/pipeline.h"
#include "pipeline/bytes.h"
#include "pipeline/tfrecord.h"
#include "support/pipeline_test_util.h"

namespace gpemu::pipeline {
namespace {

namespace fs = std::filesystem;
using testing::read_bytes;
using testing::TempDir;
using testing::write_bytes;

std::vector<std::byte> bytes_of(const std::string& s) {
  std::vector<std::byte> out;
  for (char c : s) out.push_back(static_cast<std::byte>(c));
  return out;
}

std::vector<std::byte> bytes_of(std::initializer_list<int> v) {
  std::vector<std::byte> out;
  for (int c : v) out.push_back(static_cast<std::byte>(c));
  return out;
}

std::string open_error(const fs::path& dir) {
  DlioOptions o;
  o.format = DlioFormat::Tfrecord;
  try {
    open_dlio_dataset(dir, o);
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

TEST(TfRecord, Crc32cHasTheCastagnoliCheckValueAndTensorFlowsMask) {
  // The standard check value of CRC-32C over "123456789" (RFC 3720 B.4's polynomial).
  EXPECT_EQ(crc32c(bytes_of("123456789")), 0xE3069283u);
  EXPECT_EQ(crc32c({}), 0u);
  // "abc": 0x364b3fb7; masked ((c >> 15) | (c << 17)) + 0xa282ead8.
  EXPECT_EQ(crc32c(bytes_of("abc")), 0x364B3FB7u);
  EXPECT_EQ(masked_crc32c(bytes_of("abc")), 0x21F1576Eu);
  // Continuing a CRC over a split equals the CRC of the whole.
  EXPECT_EQ(crc32c(bytes_of("6789"), crc32c(bytes_of("12345"))), 0xE3069283u);
}

TEST(TfRecord, TheExampleIsTheProtobufTensorFlowParses) {
  // Example{features{feature{"image": bytes_list{[1, 2]}}, feature{"size": int64_list{[2]}}}}
  const std::vector<std::byte> want = bytes_of({0x0a, 0x20,                                           // features
                                                0x0a, 0x0f, 0x0a, 0x05, 'i',  'm',  'a',  'g',  'e',  // entry, key
                                                0x12, 0x06, 0x0a, 0x04, 0x0a, 0x02, 0x01, 0x02,       // bytes_list
                                                0x0a, 0x0d, 0x0a, 0x04, 's',  'i',  'z',  'e',        // entry, key
                                                0x12, 0x05, 0x1a, 0x03, 0x0a, 0x01, 0x02});           // int64_list
  EXPECT_EQ(example_with_image(bytes_of({1, 2})), want);
}

TEST(TfRecord, ARecordIsItsLengthTheLengthsCrcThePayloadAndItsCrc) {
  std::vector<std::byte> file;
  append_tfrecord(file, bytes_of("abc"));
  ASSERT_EQ(file.size(), 3 + kTfRecordOverhead);
  EXPECT_EQ(read_le(file.data() + 0, 8), 3u);
  EXPECT_EQ(read_le(file.data() + 8, 4), masked_crc32c(std::vector<std::byte>(file.begin(), file.begin() + 8)));
  EXPECT_EQ(read_le(file.data() + 15, 4), 0x21F1576Eu);
}

TEST(TfRecord, AGeneratedFolderReadsBackAsItsFramedRecords) {
  TempDir tmp;
  DlioGeneratorOptions g;
  g.format = DlioFormat::Tfrecord;
  g.num_files = 2;
  g.samples_per_file = 3;
  g.record_length = 2048;
  g.seed = 7;
  const auto paths = generate_dlio_dataset(tmp.path(), g);
  ASSERT_EQ(paths.size(), 2u);
  EXPECT_EQ(fs::path(paths[0]).extension(), ".tfrecord");
  const std::uint64_t payload = example_with_image(std::vector<std::byte>(2048)).size();
  DlioOptions o;
  o.format = DlioFormat::Tfrecord;
  const Dataset ds = open_dlio_dataset(tmp.path(), o);
  ASSERT_EQ(ds.size(), 6u);
  for (std::size_t i = 0; i < ds.size(); ++i) {
    EXPECT_EQ(ds.samples[i].length, payload + kTfRecordOverhead);
    EXPECT_EQ(ds.samples[i].offset, (i % 3) * (payload + kTfRecordOverhead));
  }
  // Every record's payload is the Example of the sample's bytes, and its CRC matches.
  const auto file = read_bytes(paths[1]);
  ASSERT_EQ(file.size(), 3 * (payload + kTfRecordOverhead));
  for (std::size_t s = 0; s < 3; ++s) {
    const std::size_t at = s * (payload + kTfRecordOverhead);
    EXPECT_EQ(read_le(file.data() + at, 8), payload);
    const std::vector<std::byte> body(file.begin() + at + 12, file.begin() + at + 12 + payload);
    EXPECT_EQ(read_le(file.data() + at + 12 + payload, 4), masked_crc32c(body));
    EXPECT_EQ(body, example_with_image(dlio_record_bytes(7, 1, s, 2048)));
  }
}

TEST(TfRecord, HostileFramingIsAnInputErrorNamingTheFileAndRecord) {
  TempDir tmp;
  std::vector<std::byte> good;
  append_tfrecord(good, bytes_of("abcdef"));
  append_tfrecord(good, bytes_of("0123456789"));
  const fs::path f = tmp.path() / "d" / "x.tfrecord";

  write_bytes(f, std::vector<std::byte>(good.begin(), good.end() - 2));  // cut in record 1's footer
  std::string m = open_error(f.parent_path());
  EXPECT_NE(m.find(f.string()), std::string::npos) << m;
  EXPECT_NE(m.find("record 1 at byte 22"), std::string::npos) << m;
  EXPECT_NE(m.find("truncated"), std::string::npos) << m;

  write_bytes(f, std::vector<std::byte>(good.begin(), good.begin() + 27));  // 5 bytes of record 1's header
  m = open_error(f.parent_path());
  EXPECT_NE(m.find("record 1 at byte 22 is cut short"), std::string::npos) << m;

  auto bad_crc = good;
  bad_crc[8] ^= std::byte{1};
  write_bytes(f, bad_crc);
  m = open_error(f.parent_path());
  EXPECT_NE(m.find("record 0 at byte 0: the length field's CRC does not match"), std::string::npos) << m;

  // A length near 2^64 with a valid CRC: refused, not added to an offset.
  std::vector<std::byte> huge = bytes_of({0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xf0});
  const std::uint32_t c = masked_crc32c(huge);
  for (int k = 0; k < 4; ++k) huge.push_back(static_cast<std::byte>(c >> (8 * k)));
  huge.resize(64);
  write_bytes(f, huge);
  m = open_error(f.parent_path());
  EXPECT_NE(m.find("past the end of the file (64 bytes)"), std::string::npos) << m;

  write_bytes(f, bytes_of("not a tfrecord file at all"));
  m = open_error(f.parent_path());
  EXPECT_NE(m.find("CRC does not match; not a TFRecord file"), std::string::npos) << m;

  write_bytes(f, {});  // empty: no records
  DlioOptions o;
  o.format = DlioFormat::Tfrecord;
  EXPECT_EQ(open_dlio_dataset(f.parent_path(), o).size(), 0u);
}

}  // namespace
}  // namespace gpemu::pipeline
