// The default dataset's cache: concurrent runs, damaged and interrupted
// generations (issue 10; D1, D6, S14 of the reliability findings).
#include <signal.h>

#include <chrono>
#include <future>

#include <gtest/gtest.h>

#include "common/folder_lock.h"
#include "common/interrupt.h"
#include "gpemu/pipeline.h"
#include "gpemu/train.h"
#include "support/temp_dir.h"

namespace gpemu::train {
namespace {

namespace fs = std::filesystem;

SyntheticDatasetSpec tiny_spec() {
  SyntheticDatasetSpec spec;
  spec.images = 12;
  spec.classes = 3;
  spec.median_kb = 4;
  return spec;
}

bool has_staging(const fs::path& root) {
  for (const auto& e : fs::directory_iterator(root))
    if (e.path().filename().string().find(".partial-") != std::string::npos) return true;
  return false;
}

// D1: a second run that started while the first was generating deleted the
// first's dataset under it. Now it waits for the cache lock, then finds the
// dataset complete. The interleaving is forced: the second run starts from
// inside the first's "generating" note, and the first continues only once the
// second has said it is waiting.
TEST(DatasetCache, ASecondRunWaitsForTheFirstAndReusesItsDataset) {
  testing::TempDir root;
  std::promise<std::string> second_waiting;
  std::future<EnsuredDataset> second;
  std::vector<std::string> second_notes;
  const EnsuredDataset first = ensure_synthetic_dataset(root.path(), tiny_spec(), [&](const std::string& line) {
    if (line.find("generating") == std::string::npos || second.valid()) return;
    second = std::async(std::launch::async, [&] {
      bool told = false;
      return ensure_synthetic_dataset(root.path(), tiny_spec(), [&](const std::string& l) {
        second_notes.push_back(l);
        if (!told) second_waiting.set_value(l);
        told = true;
      });
    });
    auto f = second_waiting.get_future();
    ASSERT_EQ(f.wait_for(std::chrono::seconds(120)), std::future_status::ready) << "the second run did not wait";
    EXPECT_NE(f.get().find("waiting for another gpemu process"), std::string::npos);
  });
  ASSERT_TRUE(second.valid());
  const EnsuredDataset b = second.get();
  EXPECT_TRUE(first.generated);
  EXPECT_FALSE(b.generated) << "the second run must reuse the first's dataset, not replace it";
  EXPECT_EQ(second_notes.size(), 1u) << "only the waiting note";
  EXPECT_EQ(pipeline::open_image_folder(first.dir).size(), 12u);
}

// S14: a cached dataset with images deleted was reused silently.
TEST(DatasetCache, ADamagedCachedDatasetIsRegeneratedWithANote) {
  testing::TempDir root;
  const EnsuredDataset a = ensure_synthetic_dataset(root.path(), tiny_spec());
  fs::remove_all(a.dir / "class_0001");
  std::vector<std::string> notes;
  const EnsuredDataset b =
      ensure_synthetic_dataset(root.path(), tiny_spec(), [&](const std::string& s) { notes.push_back(s); });
  EXPECT_TRUE(b.generated);
  ASSERT_FALSE(notes.empty());
  EXPECT_NE(notes.front().find("is damaged (it holds 8 images"), std::string::npos) << notes.front();
  EXPECT_EQ(pipeline::open_image_folder(b.dir).size(), 12u);
}

// D6: interrupted generations left their staging folders for good.
TEST(DatasetCache, InterruptedAndKilledRunsLeaveNoStagingFolder) {
  testing::TempDir root;
  const std::string name = dataset_folder_name(tiny_spec());
  fs::create_directories(root / ("." + name + ".partial-999999") / "class_0000");  // a killed run's
  request_interrupt(SIGINT);
  EXPECT_THROW(ensure_synthetic_dataset(root.path(), tiny_spec()), Interrupted);
  clear_interrupt();
  EXPECT_FALSE(has_staging(root.path()));
  EXPECT_FALSE(fs::exists(root / name));
}

}  // namespace
}  // namespace gpemu::train
