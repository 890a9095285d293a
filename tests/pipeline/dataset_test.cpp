#include "gpemu/pipeline.h"

#include <gtest/gtest.h>

#include <fstream>
#include <functional>

#include "gpemu/error.h"
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

// U1: a symbolic link loop in a data folder gave only std::filesystem's text,
// "filesystem error: status: Too many levels of symbolic links [a/up/a/up/...]".
std::string open_error(const std::function<void()>& open) {
  try {
    open();
  } catch (const InputError& e) {
    return e.what();
  } catch (const std::exception& e) {
    return std::string("not an InputError: ") + e.what();
  }
  return "no error";
}

TEST(ImageFolder, ASymlinkLoopIsAnInputErrorNamingThePath) {
  namespace fs = std::filesystem;
  {
    TempDir dir;  // a class "folder" that is a link to itself
    generate_image_dataset(dir.path(), 2, 4, 1, 4.0);
    fs::create_symlink(dir / "class_loop", dir / "class_loop");
    const std::string e = open_error([&] { open_image_folder(dir.path()); });
    EXPECT_EQ(e, "ImageFolder dataset: cannot read '" + (dir / "class_loop").string() +
                     "': it is a symbolic link loop (Too many levels of symbolic links); remove the link or point it "
                     "at a file or folder that exists");
  }
  {
    TempDir dir;  // a link inside a class folder to the folder above it
    generate_image_dataset(dir.path(), 2, 4, 1, 4.0);
    fs::create_directory_symlink("..", dir / "class_0001" / "up");
    const std::string e = open_error([&] { open_image_folder(dir.path()); });
    EXPECT_EQ(e, "ImageFolder dataset: '" + (dir / "class_0001" / "up" / "class_0001").string() +
                     "' leads back to a folder it is in (a symbolic link loop); remove the link or point it at a "
                     "folder outside '" +
                     (dir / "class_0001").string() + "'");
  }
  {
    TempDir dir;  // a link to a folder elsewhere is still followed, as torchvision does
    TempDir other;
    generate_image_dataset(dir.path(), 1, 2, 1, 4.0);
    generate_image_dataset(other.path(), 1, 3, 2, 4.0);
    fs::create_directory_symlink(other / "class_0000", dir / "class_0000" / "more");
    EXPECT_EQ(open_image_folder(dir.path()).size(), 5u);
  }
}

TEST(Dlio, ASymlinkLoopIsAnInputErrorNamingThePath) {
  TempDir dir;
  std::filesystem::create_symlink(dir / "img_0.npy", dir / "img_0.npy");
  DlioOptions o;
  o.format = DlioFormat::Npy;
  const std::string e = open_error([&] { open_dlio_dataset(dir.path(), o); });
  EXPECT_EQ(e, "DLIO npy dataset: cannot read '" + (dir / "img_0.npy").string() +
                   "': it is a symbolic link loop (Too many levels of symbolic links); remove the link or point it "
                   "at a file or folder that exists");
  std::filesystem::remove(dir / "img_0.npy");
  std::filesystem::create_symlink("loop", dir.path() / "loop");
  const std::string missing = open_error([&] { open_dlio_dataset(dir / "loop", o); });
  EXPECT_EQ(missing.find("not an InputError"), std::string::npos) << missing;
  EXPECT_NE(missing.find("'" + (dir / "loop").string() + "': it is a symbolic link loop"), std::string::npos)
      << missing;
}

TEST(Dlio, ParsesFormatNames) {
  EXPECT_EQ(parse_dlio_format("NPZ"), DlioFormat::Npz);
  EXPECT_EQ(parse_dlio_format("bin"), DlioFormat::Raw);
  EXPECT_EQ(parse_dlio_format("tfrecord"), DlioFormat::Tfrecord);
  EXPECT_THROW(parse_dlio_format("parquet"), InputError);
}

}  // namespace
}  // namespace gpemu::pipeline
