// Option values out of range are refused with the accepted range, never
// clamped, wrapped or taken as "not given" (issue 10: S1, S2, S3, S9, S10,
// S12, H3, U1, U6). The commands fail in option checking, before any work.
#include <algorithm>
#include <string>

#include <gtest/gtest.h>

#include "support/run_gpemu.h"

namespace gpemu {
namespace {

using testing::run_gpemu;

// The run fails with one line on stderr that holds every part.
void expect_refused(const std::string& args, std::initializer_list<std::string> parts) {
  const auto r = run_gpemu(args);
  EXPECT_NE(r.status, 0) << args << "\n" << r.out;
  for (const std::string& p : parts) EXPECT_NE(r.err.find(p), std::string::npos) << args << "\n" << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << args << "\n" << r.err;
}

TEST(CliOptionLimits, SeqLenPastTheLimitIsRefusedNotWrapped) {
  // 4294967296 gave "forward_ms": -9223372036854.775 with exit 0.
  expect_refused("predict --gpu v100 --model gpt2_small -b 8 --seq-len 4294967296 --json",
                 {"--seq-len", "4294967296", "from 1 to 16777216"});
  // Past int64 it was clamped to 9223372036854775807.
  expect_refused("predict --gpu h100 --model gpt2_small -b 8 --seq-len 999999999999999999999999 --json",
                 {"--seq-len", "out of range", "from 1 to 16777216"});
  expect_refused("predict --gpu h100 --model gpt2_small -b 8 --seq-len 0", {"--seq-len", "from 1 to 16777216"});
}

TEST(CliOptionLimits, SeqLenOnAModelWithoutASequenceIsRefused) {
  expect_refused("predict --gpu v100 --model resnet50 -b 8 --seq-len 512",
                 {"--seq-len 512", "resnet50 has no sequence dimension"});
  // train took it with rc 0 and no note (S12); its default model is resnet18.
  expect_refused("train --clock virtual --synthetic -n 5 --seq-len 512",
                 {"--seq-len 512", "resnet18 has no sequence dimension"});
  EXPECT_EQ(run_gpemu("train --clock virtual --synthetic -n 2 --model gpt2_small -b 2 --seq-len 128").status, 0);
}

TEST(CliOptionLimits, Bf16OnACardWithoutItIsRefused) {
  expect_refused("predict --gpu k80 --model resnet50 -b 64 --precision bf16", {"--precision bf16", "no BF16 support"});
  expect_refused("predict --gpu v100 --model resnet50 -b 64 --precision bf16", {"no BF16 support"});
  EXPECT_EQ(run_gpemu("predict --gpu a100 --model resnet50 -b 64 --precision bf16 --json").status, 0);
}

TEST(CliOptionLimits, CvMustBeAFiniteNumberUpToOne) {
  // NaN and -1 used to mean "the default".
  for (const char* v : {"nan", "-1", "1e9", "inf"})
    expect_refused(std::string("train --clock virtual --synthetic -n 5 --cv ") + v,
                   {"--cv", "a finite number from 0 to 1"});
}

TEST(CliOptionLimits, TrainSizesAndCountsAreChecked) {
  for (const char* v : {"inf", "1e30G", "18446744073709551616", "0.5"})
    expect_refused(std::string("train --clock virtual --synthetic -n 5 --cache-bytes ") + v,
                   {"--cache-bytes", "a size from 1 byte"});
  expect_refused("train --clock virtual --synthetic -n 5 --seed -1", {"--seed", "from 0 to 18446744073709551615"});
  expect_refused("train --clock virtual --synthetic -n -1", {"--iterations", "from 1 to 2147483647"});
  expect_refused("train --clock virtual --synthetic -n 5 --workers 2147483647", {"--workers", "from 0 to 1024"});
  expect_refused("train --clock virtual --synthetic -n 5 --bucket-cap-mb inf", {"--bucket-cap-mb"});
  expect_refused("train --clock virtual --synthetic -n 5 --bucket-cap-mb 1e-30", {"--bucket-cap-mb"});
  expect_refused("train --clock virtual --synthetic -n 5 --epochs 2000000", {"--epochs", "from 1 to 1000000"});
}

TEST(CliOptionLimits, AnalyzeStorageFiguresAreChecked) {
  // 5e-324 MB/s wrapped the read time (UBSan: signed overflow); 1e30 us was
  // called "negative".
  expect_refused("analyze --clock virtual --storage-mb-per-s 5e-324", {"--storage-mb-per-s", "from 1e-06 to 1e+09"});
  expect_refused("analyze --clock virtual --storage-latency-us 1e30", {"--storage-latency-us", "from 0 to 1e+12"});
}

TEST(CliOptionLimits, CalibrateRoundsAreBounded) {
  expect_refused("calibrate --profiles /nonexistent --rounds 1000000", {"--rounds", "from 1 to 100"});
  expect_refused("calibrate --profiles /nonexistent --rounds 0", {"--rounds", "from 1 to 100"});
}

}  // namespace
}  // namespace gpemu
