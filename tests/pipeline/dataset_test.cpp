#include "gpemu/pipeline/dataset.h"

#include <gtest/gtest.h>

#include <fstream>

#include "gpemu/error.h"
#include "gpemu/pipeline/generator.h"
#include "support/pipeline_test_util.h"

namespace gpemu::pipeline {
namespace {

using testing::TempDir;

TEST(ImageFolder, ClassesAreSortedAndLabelSamples) {
  TempDir dir;
  generate_image_dataset(dir.path(), 3, 9, 1, 4.0);
  std::ofstream(dir / "README.txt") << "not a class";
  std::ofstream(dir / "class_0001/notes.txt") << "ignored";
  const auto ds = open_image_folder(dir.path());
  EXPECT_EQ(ds.classes, (std::vector<std::string>{"class_0000", "class_0001", "class_0002"}));
  ASSERT_EQ(ds.size(), 9u);
  EXPECT_EQ(ds.ignored_files, 1u);
  for (std::size_t i = 0; i < ds.size(); ++i) {
    const auto& s = ds.samples[i];
    EXPECT_EQ(s.format, SampleFormat::Jpeg);
    EXPECT_EQ(s.offset, 0u);
    EXPECT_EQ(s.length, std::filesystem::file_size(s.path));
    EXPECT_NE(s.path.find(ds.classes[static_cast<std::size_t>(s.label)]), std::string::npos);
    if (i > 0) {
      EXPECT_LE(ds.samples[i - 1].label, s.label);  // grouped by class in class order
    }
  }
  EXPECT_EQ(ds.files().size(), 9u);
}

TEST(ImageFolder, MissingFolderIsAnInputErrorNamingIt) {
  TempDir dir;
  const auto missing = dir / "no-such-imagenet";
  try {
    open_image_folder(missing);
    FAIL() << "expected InputError";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find(missing.string()), std::string::npos) << e.what();
  }
}

TEST(ImageFolder, FolderWithoutClassesOrImagesIsAnInputError) {
  TempDir dir;
  EXPECT_THROW(open_image_folder(dir.path()), InputError);
  std::filesystem::create_directories(dir / "cat");
  EXPECT_THROW(open_image_folder(dir.path()), InputError);
}

TEST(FileList, ReadsPathsAndLabelsRelativeToTheList) {
  TempDir dir;
  std::ofstream(dir / "a.bin") << "hello";
  std::ofstream(dir / "b c.bin") << "hi";
  std::ofstream(dir / "list.txt") << "# comment\na.bin 3\n\nb c.bin\n";
  const auto ds = open_file_list(dir / "list.txt");
  ASSERT_EQ(ds.size(), 2u);
  EXPECT_EQ(ds.samples[0].path, (dir / "a.bin").string());
  EXPECT_EQ(ds.samples[0].label, 3);
  EXPECT_EQ(ds.samples[0].length, 5u);
  EXPECT_EQ(ds.samples[1].path, (dir / "b c.bin").string());
  EXPECT_EQ(ds.samples[1].label, -1);
  EXPECT_EQ(ds.samples[1].format, SampleFormat::Bytes);
}

TEST(FileList, MissingFileIsAnInputErrorWithLineAndPath) {
  TempDir dir;
  std::ofstream(dir / "list.txt") << "gone.jpg 1\n";
  try {
    open_file_list(dir / "list.txt");
    FAIL() << "expected InputError";
  } catch (const InputError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("gone.jpg"), std::string::npos) << what;
    EXPECT_NE(what.find("line 1"), std::string::npos) << what;
  }
}

TEST(Dlio, ParsesFormatNames) {
  EXPECT_EQ(parse_dlio_format("NPZ"), DlioFormat::Npz);
  EXPECT_EQ(parse_dlio_format("bin"), DlioFormat::Raw);
  EXPECT_THROW(parse_dlio_format("tfrecord"), InputError);
}

}  // namespace
}  // namespace gpemu::pipeline
