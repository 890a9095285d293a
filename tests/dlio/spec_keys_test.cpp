// DLIO words the engine's errors with its YAML keys (dlio/spec_keys.h): the
// runner raises a SpecError again renamed, and a field DLIO has no key for is
// left for the CLI's flags (issue 29).
#include <gtest/gtest.h>

#include <string>
#include <string_view>

#include "dlio/spec_keys.h"
#include "gpemu/spec_error.h"

namespace gpemu::dlio {
namespace {

std::string no_words(std::string_view) { return ""; }

TEST(DlioSpecKeys, TheEnginesFieldIsSaidAsTheWorkloadsKey) {
  const SpecError engine("schedule.epochs", "0", "it must be at least 1");
  const SpecError dlio = engine.renamed(yaml_key_of_spec_field);
  EXPECT_EQ(dlio.field(), "schedule.epochs");
  EXPECT_EQ(dlio.worded(no_words), "train.epochs 0 is impossible: it must be at least 1");
  // Renamed for good: the CLI's words after DLIO's do not name it again.
  EXPECT_EQ(dlio.worded([](std::string_view f) { return f == "schedule.epochs" ? std::string("--epochs") : ""; }),
            "train.epochs 0 is impossible: it must be at least 1");
  // A field without a key stays the spec's, open to the next front end.
  const SpecError both("compute.time_divisor", "2",
                       "it excludes " + spec_field("cluster.gpus") + " 2 on " + spec_field("cluster.nodes") + " 1");
  const SpecError renamed = both.renamed(yaml_key_of_spec_field);
  EXPECT_EQ(renamed.worded(no_words),
            "compute.time_divisor 2 is impossible: it excludes gpemu.world_size 2 on gpemu.nodes 1");
  EXPECT_EQ(renamed.worded(
                [](std::string_view f) { return f == "compute.time_divisor" ? std::string("--gpemu-gpus") : ""; }),
            "--gpemu-gpus 2 is impossible: it excludes gpemu.world_size 2 on gpemu.nodes 1");
  EXPECT_EQ(yaml_key_of_spec_field("compute.time_divisor"), "");
  EXPECT_EQ(yaml_key_of_spec_field("batch_size"), "reader.batch_size");
}

}  // namespace
}  // namespace gpemu::dlio
