// gpemu's own profile format: write then read back bit for bit, and malformed
// files reported with path, line and what is accepted.
#include <algorithm>
#include <map>
#include <string>

#include <gtest/gtest.h>

#include "gpemu/cost_model.h"
#include "gpemu/error.h"
#include "support/cost_test_util.h"

namespace gpemu {
namespace {

using testing::TempDir;

Profile full_profile() {
  Profile p;
  p.gpu = "A100-SXM4-40GB";
  p.model = "resnet50";
  p.precision = Precision::FP16;
  p.transfer_host_memory = HostMemoryKind::Pinned;
  p.input_bytes_per_sample = 602112;
  p.forward_s = {{1, 0.010823577642440796}, {2, 0.011455714702606201}, {64, 1.0 / 3.0}};
  p.backward_s = {{1, 0.0185}, {64, 0.1234567890123456789}};
  p.transfer_s = {{2, 1e-4}, {64, 0.0031}};
  p.peak_allocated_mib = {{1, 386.2707071382523}, {64, 5621.5}};
  p.peak_reserved_mib = {{64, 8208.0}};
  p.persistent_mib = {{1, 297.98673474821936}, {64, 298.0}};
  p.forward_cv = {{64, 0.0123}};
  p.backward_cv = {{64, 0.0087}};
  p.oom_batch_size = 257;
  p.model_transfer_s = 0.03208667039871216;
  return p;
}

void expect_same(const Profile& a, const Profile& b) {
  EXPECT_EQ(a.gpu, b.gpu);
  EXPECT_EQ(a.model, b.model);
  EXPECT_EQ(a.precision, b.precision);
  EXPECT_EQ(a.transfer_host_memory, b.transfer_host_memory);
  EXPECT_EQ(a.input_bytes_per_sample, b.input_bytes_per_sample);
  EXPECT_EQ(a.forward_s, b.forward_s);
  EXPECT_EQ(a.backward_s, b.backward_s);
  EXPECT_EQ(a.transfer_s, b.transfer_s);
  EXPECT_EQ(a.peak_allocated_mib, b.peak_allocated_mib);
  EXPECT_EQ(a.peak_reserved_mib, b.peak_reserved_mib);
  EXPECT_EQ(a.persistent_mib, b.persistent_mib);
  EXPECT_EQ(a.forward_cv, b.forward_cv);
  EXPECT_EQ(a.backward_cv, b.backward_cv);
  EXPECT_EQ(a.oom_batch_size, b.oom_batch_size);
  EXPECT_EQ(a.model_transfer_s, b.model_transfer_s);
}

TEST(NativeProfile, WriteThenReadGivesTheSameProfileBitForBit) {
  TempDir dir;
  Profile p = full_profile();
  std::filesystem::path file = write_native_profile(p, dir.path());
  EXPECT_EQ(file, dir.path() / "A100-SXM4-40GB" / "resnet50.json");
  Profile back = read_native_profile(file);
  expect_same(p, back);
  EXPECT_EQ(back.source, file.string());
}

TEST(NativeProfile, WritesOneRowPerBatchSizePerLine) {
  std::string text = native_profile_json(full_profile());
  EXPECT_NE(text.find("\"format\": \"gpemu-profile/1\""), std::string::npos) << text;
  // Batch sizes 1, 2 and 64 across all series: three row lines.
  EXPECT_EQ(std::count(text.begin(), text.end(), '\n'), 9 + 1 + 3 + 2) << text;
  EXPECT_NE(text.find("{\"batch_size\": 2, \"forward_s\": 0.011455714702606201, \"transfer_s\": 0.0001}"),
            std::string::npos)
      << text;
}

TEST(NativeProfile, PerOpTimesReadBackBitForBitOneOpALine) {
  TempDir dir;
  Profile p = full_profile();
  p.op_timer = "cuda";
  MeasuredOp conv;
  conv.batch_size = 64;
  conv.phase = "forward";
  conv.op = "aten::conv2d";
  conv.op_class = "conv";
  conv.shapes = "[[64,3,224,224],[64,3,7,7],[]]";
  conv.dtype = "float";
  conv.calls_per_step = 1;
  conv.seconds_per_call = 0.0012345678901234567;
  conv.kernels = {"implicit_convolve_sgemm", "cudnn::winograd"};
  MeasuredOp step = conv;
  step.phase = "optimizer";
  step.op = "aten::_foreach_add_";
  step.op_class = "optimizer";
  step.shapes = "[[[64,3,7,7],[64]],[]]";  // a tensor list
  step.dtype.clear();
  step.calls_per_step = 0.5;
  step.kernels.clear();
  p.ops = {conv, step};
  const std::string text = native_profile_json(p);
  EXPECT_NE(text.find("\n    {\"batch_size\": 64, \"phase\": \"forward\", \"op\": \"aten::conv2d\""), std::string::npos)
      << text;
  Profile back = read_native_profile(write_native_profile(p, dir.path()));
  expect_same(p, back);
  EXPECT_EQ(back.op_timer, "cuda");
  ASSERT_EQ(back.ops.size(), 2u);
  for (std::size_t i = 0; i < 2; ++i) {
    EXPECT_EQ(back.ops[i].batch_size, p.ops[i].batch_size);
    EXPECT_EQ(back.ops[i].phase, p.ops[i].phase);
    EXPECT_EQ(back.ops[i].op, p.ops[i].op);
    EXPECT_EQ(back.ops[i].op_class, p.ops[i].op_class);
    EXPECT_EQ(back.ops[i].shapes, p.ops[i].shapes);
    EXPECT_EQ(back.ops[i].dtype, p.ops[i].dtype);
    EXPECT_EQ(back.ops[i].calls_per_step, p.ops[i].calls_per_step);
    EXPECT_EQ(back.ops[i].seconds_per_call, p.ops[i].seconds_per_call);
    EXPECT_EQ(back.ops[i].kernels, p.ops[i].kernels);
  }
}

TEST(NativeProfile, OptionalFieldsMayBeLeftOut) {
  TempDir dir;
  std::filesystem::path file = dir.write("V100-PCIE-32GB/tiny.json", R"({
  "format": "gpemu-profile/1",
  "gpu": "Tesla_V100-PCIE-32GB",
  "model": "Tiny",
  "rows": [
    {"batch_size": 8.0, "forward_s": 0.5, "backward_s": null},
    {"batch_size": 4, "forward_s": 0.25}
  ]
})");
  Profile p = read_native_profile(file);
  EXPECT_EQ(p.gpu, "V100-PCIE-32GB");
  EXPECT_EQ(p.model, "tiny");
  EXPECT_EQ(p.precision, Precision::FP32);
  EXPECT_EQ(p.transfer_host_memory, HostMemoryKind::Pageable);
  EXPECT_EQ(p.forward_s, (Series{{4, 0.25}, {8, 0.5}}));
  EXPECT_TRUE(p.backward_s.empty());
  EXPECT_FALSE(p.oom_batch_size.has_value());
}

TEST(NativeProfile, GPEmuProfilesConvertWithoutLoss) {
  GPEMU_REQUIRE_SHARED_PROFILES(shared);
  TempDir dir;
  std::vector<Profile> profiles = read_gpemu_artifact(shared);
  int converted = 0;
  for (const Profile& p : profiles) {
    if (p.model != "resnet50" && p.model != "densenet201") continue;
    Profile back = read_native_profile(write_native_profile(p, dir.path()));
    expect_same(p, back);
    ++converted;
  }
  EXPECT_EQ(converted, 8);
}

// A string value holding a newline (JSON "\n") is quoted escaped: the message
// stays on one line (found by CI's profile_json fuzzing).
TEST(NativeProfile, AValueWithANewlineGivesAOneLineMessage) {
  const std::string text =
      "{\"format\": \"gpemu-profile/1\", \"gpu\": \"V100-PCIE-32GB\", \"model\": \"tiny\", "
      "\"host_memory\": \"pin\\\\\\ned\", \"rows\": []}";
  try {
    parse_native_profile(text, "fuzz.json");
    FAIL() << "expected InputError";
  } catch (const InputError& e) {
    const std::string what = e.what();
    EXPECT_EQ(what.find('\n'), std::string::npos) << what;
    EXPECT_NE(what.find("fuzz.json:1: host_memory"), std::string::npos) << what;
    EXPECT_NE(what.find("expected \"pageable\" or \"pinned\""), std::string::npos) << what;
  }
}

struct Malformed {
  std::string name;
  std::string relative;  // where under the profile folder
  std::string text;
  int line;
  std::string says;
};

class NativeProfileMalformed : public ::testing::TestWithParam<Malformed> {};

TEST_P(NativeProfileMalformed, RaisesInputErrorWithFileAndLine) {
  const Malformed& m = GetParam();
  TempDir dir;
  std::filesystem::path file = dir.write(m.relative, m.text);
  try {
    read_native_profiles(dir.path());
    FAIL() << "expected InputError for " << m.name;
  } catch (const InputError& e) {
    std::string what = e.what();
    std::string where = file.string() + (m.line > 0 ? ":" + std::to_string(m.line) + ":" : ":");
    EXPECT_NE(what.find(where), std::string::npos) << "message lacks '" << where << "': " << what;
    EXPECT_NE(what.find(m.says), std::string::npos) << "message lacks '" << m.says << "': " << what;
    EXPECT_NE(what.find("expected"), std::string::npos) << "message does not say what is accepted: " << what;
  }
}

// Rows are given one per line, each ending ",\n"; the last comma is dropped.
std::string doc(std::string rows, const std::string& extra = "") {
  if (rows.size() >= 2 && rows.compare(rows.size() - 2, 2, ",\n") == 0) rows.replace(rows.size() - 2, 2, "\n");
  return "{\n  \"format\": \"gpemu-profile/1\",\n  \"gpu\": \"V100-PCIE-32GB\",\n  \"model\": \"tiny\",\n" + extra +
         "  \"rows\": [\n" + rows + "  ]\n}\n";
}
const std::string kFile = "V100-PCIE-32GB/tiny.json";
const std::string kRow1 = "    {\"batch_size\": 1, \"forward_s\": 0.1},\n";
// A per-op section before the rows: op_timer on line 5, "ops" on 6, its ops from 7.
std::string ops(const std::string& op, const std::string& more = "") {
  return "  \"op_timer\": \"cuda\",\n  \"ops\": [\n    " + op + more + "\n  ],\n";
}
std::string op_with(const std::string& field, const std::string& value) {
  std::map<std::string, std::string> f = {{"batch_size", "1"},
                                          {"phase", "\"forward\""},
                                          {"op", "\"aten::conv2d\""},
                                          {"class", "\"conv\""},
                                          {"shapes", "[[1,3,8,8],[4,3,3,3],[]]"},
                                          {"calls_per_step", "2"},
                                          {"seconds_per_call", "0.001"}};
  f[field] = value;
  std::string o = "{";
  for (const auto& [k, v] : f)
    if (!v.empty()) o += (o.size() > 1 ? ", \"" : "\"") + k + "\": " + v;
  return o + "}";
}
const std::string kOp = op_with("dtype", "\"float\"");

INSTANTIATE_TEST_SUITE_P(
    Cases, NativeProfileMalformed,
    ::testing::Values(
        Malformed{"EmptyFile", kFile, "", 1, "empty file"},
        Malformed{"NotJson", kFile, "{\n  \"format\": \"gpemu-profile/1\",\n  \"gpu\": oops\n}\n", 3, "not valid JSON"},
        Malformed{"NotAnObject", kFile, "[1, 2]\n", 1, "not a JSON object"},
        Malformed{"WrongFormat", kFile,
                  "{\n  \"format\": \"gpemu-profile/9\",\n  \"gpu\": \"V100-PCIE-32GB\",\n  \"model\": \"tiny\",\n"
                  "  \"rows\": []\n}\n",
                  2, "format \"gpemu-profile/9\" is not supported"},
        Malformed{"MissingFormat", kFile, "{\"gpu\": \"V100-PCIE-32GB\", \"model\": \"tiny\", \"rows\": []}", 1,
                  "missing field \"format\""},
        Malformed{"UnknownGpu", kFile,
                  "{\n  \"format\": \"gpemu-profile/1\",\n  \"gpu\": \"Imaginary 9000\",\n  \"model\": \"tiny\",\n"
                  "  \"rows\": []\n}\n",
                  3, "Imaginary 9000"},
        Malformed{"UnknownTopField", kFile, doc(kRow1, "  \"colour\": \"blue\",\n"), 5, "unknown field \"colour\""},
        Malformed{"BadHostMemory", kFile, doc(kRow1, "  \"host_memory\": \"locked\",\n"), 5, "host_memory \"locked\""},
        Malformed{"RowsNotArray", kFile,
                  "{\n  \"format\": \"gpemu-profile/1\",\n  \"gpu\": \"V100-PCIE-32GB\",\n  \"model\": \"tiny\",\n"
                  "  \"rows\": 7\n}\n",
                  5, "rows is not an array"},
        Malformed{"NegativeTime", kFile, doc(kRow1 + "    {\"batch_size\": 2, \"forward_s\": -0.2},\n"), 7,
                  "rows[1].forward_s is -0.2"},
        Malformed{"TimeAsText", kFile, doc(kRow1 + "    {\"batch_size\": 2,\n     \"backward_s\": \"slow\"},\n"), 8,
                  "rows[1].backward_s is \"slow\""},
        Malformed{"FractionalBatch", kFile, doc("    {\"batch_size\": 2.5, \"forward_s\": 0.1},\n"), 6,
                  "rows[0].batch_size is 2.5"},
        Malformed{"MissingBatch", kFile, doc(kRow1 + "    {\"forward_s\": 0.1},\n"), 7, "rows[1] has no batch_size"},
        Malformed{"DuplicateBatch", kFile, doc(kRow1 + "    {\"batch_size\": 1.0, \"forward_s\": 0.2},\n"), 7,
                  "batch size 1 appears twice (first on line 6)"},
        Malformed{"AllZeroForward", kFile,  // S11: no measurement, though each value is in range
                  doc("    {\"batch_size\": 1, \"forward_s\": 0, \"backward_s\": 0.1},\n"
                      "    {\"batch_size\": 2, \"forward_s\": 0.0, \"backward_s\": 0.2},\n"),
                  5, "every row's forward_s is 0"},
        Malformed{"KeyGivenTwice", kFile, doc(kRow1, "  \"gpu\": \"V100-PCIE-32GB\",\n"), 5,  // S11
                  "the key \"gpu\" is given twice in one object"},
        Malformed{"RowKeyGivenTwice", kFile, doc("    {\"batch_size\": 1, \"forward_s\": 0.1, \"forward_s\": 0.3},\n"),
                  6, "the key \"forward_s\" is given twice"},
        Malformed{"UnknownRowField", kFile, doc("    {\"batch_size\": 1, \"fwd_s\": 0.1},\n"), 6,
                  "unknown field \"fwd_s\""},
        Malformed{"RowPastOom", kFile,
                  doc(kRow1 + "    {\"batch_size\": 300, \"forward_s\": 0.2},\n", "  \"oom_batch_size\": 257,\n"), 8,
                  "did not fit"},
        Malformed{"OpsWithoutTimer", kFile, doc(kRow1, "  \"ops\": [\n    " + kOp + "\n  ],\n"), 5,
                  "ops without \"op_timer\""},
        Malformed{"TimerWithoutOps", kFile, doc(kRow1, "  \"op_timer\": \"cpu\",\n"), 5,
                  "op_timer is given but there are no \"ops\""},
        Malformed{"UnknownOpTimer", kFile, doc(kRow1, "  \"op_timer\": \"gpu\",\n  \"ops\": [],\n"), 5,
                  "op_timer \"gpu\" is unknown"},
        Malformed{"OpsNotArray", kFile, doc(kRow1, "  \"op_timer\": \"cpu\",\n  \"ops\": {},\n"), 6,
                  "ops is not an array"},
        Malformed{"OpAtABatchWithoutRow", kFile, doc(kRow1, ops(op_with("batch_size", "2"))), 7,
                  "ops[0] is at batch size 2, which has no row"},
        Malformed{"OpWithoutBatch", kFile, doc(kRow1, ops(op_with("batch_size", ""))), 7,
                  "ops[0].batch_size is missing"},
        Malformed{"UnknownOpPhase", kFile, doc(kRow1, ops(kOp, ",\n    " + op_with("phase", "\"update\""))), 8,
                  "ops[1].phase \"update\" is unknown"},
        Malformed{"UnknownOpClass", kFile, doc(kRow1, ops(op_with("class", "\"gemm\""))), 7,
                  "ops[0].class \"gemm\" is unknown"},
        Malformed{"NegativeShape", kFile, doc(kRow1, ops(op_with("shapes", "[[1,-3]]"))), 7,
                  "ops[0].shapes is [[1,-3]]"},
        Malformed{"ShapeNotAnArray", kFile, doc(kRow1, ops(op_with("shapes", "[7]"))), 7, "ops[0].shapes is [7]"},
        Malformed{"OpNameNotText", kFile, doc(kRow1, ops(op_with("op", "3"))), 7, "ops[0].op is 3"},
        Malformed{"ZeroCalls", kFile, doc(kRow1, ops(op_with("calls_per_step", "0"))), 7, "ops[0].calls_per_step is 0"},
        Malformed{"NegativeOpTime", kFile, doc(kRow1, ops(op_with("seconds_per_call", "-1"))), 7,
                  "ops[0].seconds_per_call is -1"},
        Malformed{"KernelsNotText", kFile, doc(kRow1, ops(op_with("kernels", "[1]"))), 7,
                  "ops[0].kernels is not an array of strings"},
        Malformed{"UnknownOpField", kFile, doc(kRow1, ops(op_with("flops", "1"))), 7,
                  "ops[0] has an unknown field \"flops\""},
        Malformed{"OpNotAnObject", kFile, doc(kRow1, ops("[]")), 7, "ops[0] is []"},
        Malformed{"RepeatedOp", kFile, doc(kRow1, ops(kOp, ",\n    " + kOp)), 8,
                  "ops[1] repeats forward aten::conv2d [[1,3,8,8],[4,3,3,3],[]] at batch size 1 (first on line 7)"},
        Malformed{"FolderDisagreesWithGpu", "M40/tiny.json", doc(kRow1), 0, "lies in folder \"M40\""},
        Malformed{"FileNameDisagreesWithModel", "V100-PCIE-32GB/other.json", doc(kRow1), 0, "is named \"other.json\""}),
    [](const ::testing::TestParamInfo<Malformed>& info) { return info.param.name; });

}  // namespace
}  // namespace gpemu
