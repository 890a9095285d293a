// extrapolated_tail_start(): finding the rows GPEmu appended on a straight line
// past the batch sizes that ran out of memory.
#include <cmath>
#include <fstream>
#include <map>
#include <sstream>

#include <gtest/gtest.h>

#include "gpemu/cost_model.h"
#include "support/cost_test_util.h"

namespace gpemu {
namespace {

// Noisy "measurements": a line plus a deterministic wobble of a few percent.
Series measured(int first, int last) {
  Series s;
  for (int b = first; b <= last; ++b) s.push_back({b, 0.01 + 0.001 * b * (1.0 + 0.03 * std::sin(b * 1.7))});
  return s;
}

// Appends rows on a line fitted elsewhere (not through the last measured row,
// as GPEmu's tails are not).
void append_tail(Series& s, int first, int last, double intercept, double slope) {
  for (int b = first; b <= last; ++b) s.push_back({b, intercept + slope * b});
}

TEST(TailDetection, NoisyMeasurementsHaveNoTail) {
  Series s = measured(1, 256);
  EXPECT_EQ(extrapolated_tail_start(s), s.size());
}

TEST(TailDetection, FindsTheFirstExtrapolatedRow) {
  Series s = measured(1, 124);
  append_tail(s, 125, 256, 0.0123, 0.00099);
  std::size_t start = extrapolated_tail_start(s);
  ASSERT_LT(start, s.size());
  EXPECT_EQ(s[start].batch_size, 125);
  EXPECT_EQ(s[start - 1].batch_size, 124);  // the last measured row
}

TEST(TailDetection, ThreeRowsMakeATailTwoDoNot) {
  Series three = measured(1, 20);
  append_tail(three, 21, 23, 0.5, 0.002);
  EXPECT_EQ(three[extrapolated_tail_start(three)].batch_size, 21);

  // Two rows always lie on a line; they cannot be told from measurements.
  Series two = measured(1, 20);
  append_tail(two, 21, 22, 0.5, 0.002);
  EXPECT_EQ(extrapolated_tail_start(two), two.size());
}

TEST(TailDetection, AStraightLineFromTheFirstRowIsMeasuredNotATail) {
  Series s;
  append_tail(s, 1, 50, 0.01, 0.001);
  EXPECT_EQ(extrapolated_tail_start(s), s.size());
  Series tiny{{1, 1.0}, {2, 2.0}, {3, 3.0}};
  EXPECT_EQ(extrapolated_tail_start(tiny), tiny.size());
}

TEST(TailDetection, LeavesAtLeastOneMeasuredRow) {
  Series s{{1, 0.7}};
  append_tail(s, 2, 10, 0.1, 0.05);
  EXPECT_EQ(extrapolated_tail_start(s), 1u);
}

TEST(TailDetection, ComparesSlopesSoUnevenBatchSpacingWorks) {
  Series s{{1, 0.011}, {2, 0.0123}, {4, 0.0141}, {8, 0.0199}, {16, 0.0302}, {32, 0.0597}};
  for (int b : {64, 128, 256}) s.push_back({b, 0.002 + 0.00183 * b});
  std::size_t start = extrapolated_tail_start(s);
  ASSERT_LT(start, s.size());
  EXPECT_EQ(s[start].batch_size, 64);
}

TEST(TailDetection, ToleratesFloat64RoundingButNotMeasurementNoise) {
  Series rounded = measured(1, 100);
  for (int b = 101; b <= 120; ++b) rounded.push_back({b, (0.02 + 0.0009 * b) * (1.0 + ((b % 3) - 1) * 1e-15)});
  EXPECT_EQ(rounded[extrapolated_tail_start(rounded)].batch_size, 101);

  Series noisy = measured(1, 100);
  for (int b = 101; b <= 120; ++b) noisy.push_back({b, (0.02 + 0.0009 * b) * (1.0 + ((b % 3) - 1) * 1e-6)});
  EXPECT_EQ(extrapolated_tail_start(noisy), noisy.size());
}

TEST(TailDetection, CollinearRowsInsideTheTableAreNotATail) {
  // Timer quantisation makes three real rows collinear now and then; only a
  // suffix counts.
  Series s = measured(1, 30);
  s[10].value = 0.02;
  s[11].value = 0.021;
  s[12].value = 0.022;
  EXPECT_EQ(extrapolated_tail_start(s), s.size());
}

TEST(TailDetection, ATailThroughTheLastMeasuredRowTakesThatRowToo) {
  // Known limit: a line continued through the last measured row makes that row
  // indistinguishable from the tail, so the OOM evidence comes one row early.
  // GPEmu's tails do not pass through it (checked against the shared data below).
  Series s = measured(1, 40);
  double last = s.back().value;
  for (int b = 41; b <= 50; ++b) s.push_back({b, last + 0.001 * (b - 40)});
  EXPECT_EQ(s[extrapolated_tail_start(s)].batch_size, 40);
}

// The detector against the truth the shared copy lists, for every row: the
// reader drops detected tails, so the last row it keeps is the detector's
// last measured batch size.
TEST(TailDetection, AgreesWithTheSharedLastMeasuredBatchList) {
  GPEMU_REQUIRE_SHARED_PROFILES(shared);
  std::map<std::pair<std::string, std::string>, const Profile*> by_key;
  std::vector<Profile> profiles = read_gpemu_artifact(shared);
  for (const Profile& p : profiles) by_key[{p.gpu, p.model}] = &p;

  std::ifstream truth(shared / "compute_last_measured_batch.csv");
  ASSERT_TRUE(truth) << "compute_last_measured_batch.csv missing";
  std::string line;
  std::getline(truth, line);  // header: gpu,model,phase,last_measured_batch_size
  int rows = 0, agree = 0;
  std::vector<std::string> disagreements;
  while (std::getline(truth, line)) {
    if (line.empty()) continue;
    std::stringstream fields(line);
    std::string gpu, model, phase, last;
    std::getline(fields, gpu, ',');
    std::getline(fields, model, ',');
    std::getline(fields, phase, ',');
    std::getline(fields, last, ',');
    ++rows;
    const Profile* p = by_key[{find_gpu(gpu).id, model}];
    ASSERT_NE(p, nullptr) << gpu << "/" << model;
    const Series& s = phase == "forward" ? p->forward_s : p->backward_s;
    int detected = s.back().batch_size;
    if (detected == std::stoi(last))
      ++agree;
    else
      disagreements.push_back(gpu + "/" + model + "/" + phase + ": detected " + std::to_string(detected) + ", truth " +
                              last);
  }
  ASSERT_GT(rows, 0);
  for (const std::string& d : disagreements) ADD_FAILURE() << d;
  EXPECT_EQ(agree, rows);
}

}  // namespace
}  // namespace gpemu
