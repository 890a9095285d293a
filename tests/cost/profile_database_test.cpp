// ProfileDatabase: detecting which layout a folder holds, loading either or
// both, and finding a (GPU, model) pair.
#include <gtest/gtest.h>

#include "gpemu/cost_model.h"
#include "gpemu/error.h"
#include "support/cost_test_util.h"

namespace gpemu {
namespace {

using testing::TempDir;

void write_gpemu(const TempDir& dir, const std::string& gpu_folder, const std::string& model) {
  dir.write("time/compute/forward/" + gpu_folder + "/" + model + "/time_by_batch_size.csv",
            "Batch_Size,Time_In_SECONDS\n1,0.01\n2,0.015\n");
}

void write_native(const TempDir& dir, const std::string& gpu, const std::string& model) {
  Profile p;
  p.gpu = gpu;
  p.model = model;
  p.forward_s = {{1, 0.02}};
  write_native_profile(p, dir.path());
}

TEST(ProfileDatabase, DetectsGPEmuLayout) {
  TempDir dir;
  write_gpemu(dir, "Tesla_M40", "alexnet");
  EXPECT_EQ(ProfileDatabase::detect_layouts(dir.path()), std::vector<ProfileLayout>{ProfileLayout::GPEmuArtifact});
  ProfileDatabase db = ProfileDatabase::load(dir.path());
  ASSERT_NE(db.find("M40", "alexnet"), nullptr);
  EXPECT_EQ(db.find("M40", "alexnet")->forward_s.size(), 2u);
}

TEST(ProfileDatabase, DetectsNativeLayout) {
  TempDir dir;
  write_native(dir, "V100-PCIE-32GB", "resnet50");
  EXPECT_EQ(ProfileDatabase::detect_layouts(dir.path()), std::vector<ProfileLayout>{ProfileLayout::Native});
  ProfileDatabase db = ProfileDatabase::load(dir.path());
  EXPECT_NE(db.find("V100-PCIE-32GB", "ResNet50"), nullptr);  // model names compare canonically
  EXPECT_EQ(db.find("V100-PCIE-16GB", "resnet50"), nullptr);
}

TEST(ProfileDatabase, LoadsBothLayoutsFromOneFolder) {
  TempDir dir;
  write_gpemu(dir, "Tesla_M40", "alexnet");
  write_native(dir, "V100-PCIE-32GB", "resnet50");
  ProfileDatabase db = ProfileDatabase::load(dir.path());
  EXPECT_EQ(db.layouts(), (std::vector<ProfileLayout>{ProfileLayout::GPEmuArtifact, ProfileLayout::Native}));
  EXPECT_EQ(db.profiles().size(), 2u);
  EXPECT_EQ(db.models(), (std::vector<std::string>{"alexnet", "resnet50"}));
  EXPECT_EQ(db.gpus(), (std::vector<std::string>{"M40", "V100-PCIE-32GB"}));
}

TEST(ProfileDatabase, APairInBothLayoutsIsAnErrorNamingBothSources) {
  TempDir dir;
  write_gpemu(dir, "Tesla_M40", "alexnet");
  write_native(dir, "M40", "alexnet");
  try {
    ProfileDatabase::load(dir.path());
    FAIL() << "expected InputError";
  } catch (const InputError& e) {
    std::string what = e.what();
    EXPECT_NE(what.find("two profiles for M40/alexnet"), std::string::npos) << what;
    EXPECT_NE(what.find("alexnet.json"), std::string::npos) << what;
    EXPECT_NE(what.find("GPEmu profiled_data"), std::string::npos) << what;
  }
}

TEST(ProfileDatabase, AFolderWithoutProfilesIsAnError) {
  TempDir dir;
  dir.write("notes.txt", "nothing here");
  EXPECT_TRUE(ProfileDatabase::detect_layouts(dir.path()).empty());
  try {
    ProfileDatabase::load(dir.path());
    FAIL() << "expected InputError";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("holds no profiles"), std::string::npos) << e.what();
  }
  EXPECT_THROW(ProfileDatabase::load(dir.path() / "missing"), InputError);
}

// U1: a link loop in a profile folder gave std::filesystem's text as the
// whole message ("filesystem error: status: Too many levels of symbolic links").
TEST(ProfileDatabase, ASymlinkLoopIsAnInputErrorNamingThePath) {
  namespace fs = std::filesystem;
  auto load_error = [](const fs::path& dir) -> std::string {
    try {
      ProfileDatabase::load(dir);
    } catch (const InputError& e) {
      return e.what();
    } catch (const std::exception& e) {
      return std::string("not an InputError: ") + e.what();
    }
    return "no error";
  };
  const std::string loop =
      "': it is a symbolic link loop (Too many levels of symbolic links); remove the link or "
      "point it at a file or folder that exists";
  {
    TempDir dir;  // native layout: a GPU folder that links to itself
    write_native(dir, "V100-PCIE-32GB", "resnet50");
    fs::create_symlink(dir / "A100-SXM4-40GB", dir / "A100-SXM4-40GB");
    EXPECT_EQ(load_error(dir.path()), "profiles: cannot read '" + (dir / "A100-SXM4-40GB").string() + loop);
  }
  {
    TempDir dir;  // GPEmu's layout: a model's table that links to itself
    write_gpemu(dir, "Tesla_M40", "alexnet");
    const fs::path table = dir / "time/compute/forward/Tesla_M40/vgg11/time_by_batch_size.csv";
    fs::create_directories(table.parent_path());
    fs::create_symlink(table, table);
    // Strictly it stops the read; ProfileDatabase::load skips that folder
    // with the same message as a warning and reads the rest.
    try {
      read_gpemu_artifact(dir.path());
      ADD_FAILURE() << "expected InputError";
    } catch (const InputError& e) {
      EXPECT_EQ(std::string(e.what()), "profiles: cannot read '" + table.string() + loop);
    }
    const ProfileDatabase db = ProfileDatabase::load(dir.path());
    ASSERT_EQ(db.warnings().size(), 1u);
    EXPECT_EQ(db.warnings()[0], "profiles: cannot read '" + table.string() + loop + "; folder " +
                                    table.parent_path().string() + " skipped");
    EXPECT_NE(db.find("M40", "alexnet"), nullptr);
  }
  {
    TempDir dir;  // the profile folder itself
    fs::create_symlink(dir / "p", dir / "p");
    EXPECT_EQ(load_error(dir / "p"), "profiles: cannot read '" + (dir / "p").string() + loop);
  }
}

TEST(ProfileDatabase, LoadsTheSharedGPEmuCopy) {
  GPEMU_REQUIRE_SHARED_PROFILES(shared);
  ProfileDatabase db = ProfileDatabase::load(shared);
  EXPECT_EQ(db.profiles().size(), 120u);
  EXPECT_EQ(db.gpus(), (std::vector<std::string>{"A100-SXM4-40GB", "M40", "P100-PCIE-16GB", "V100-PCIE-32GB"}));
  EXPECT_EQ(db.models().size(), 30u);
  const Profile* p = db.find("M40", "resnet50");
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(p->oom_batch_size, 125);
  EXPECT_EQ(p->forward_s.back().batch_size, 124);
}

TEST(CanonicalModelName, IgnoresCaseAndReadsDashesAsUnderscores) {
  EXPECT_EQ(canonical_model_name(" ResNet50 "), "resnet50");
  EXPECT_EQ(canonical_model_name("mobilenet-v2"), "mobilenet_v2");
}

}  // namespace
}  // namespace gpemu
