#include "zoo/data_dir.h"

#include <gtest/gtest.h>

#include <filesystem>

#include "support/temp_dir.h"

namespace gpemu::zoo {
namespace {

namespace fs = std::filesystem;

// A prefix laid out as `cmake --install` lays it out: bin/ and share/gpemu/zoo.
struct Prefix {
  testing::TempDir root;
  Prefix() {
    fs::create_directories(root / "bin");
    fs::create_directories(root.path() / "share" / "gpemu" / "zoo");
  }
  fs::path data() const { return root.path() / "share" / "gpemu"; }
};

TEST(DataDir, EnvironmentWins) {
  Prefix p;
  DataDirCandidates c{"/from/env", p.root / "bin/gpemu", "../share/gpemu", p.data(), "/src"};
  EXPECT_EQ(resolve_data_dir(c), fs::path("/from/env"));
}

TEST(DataDir, InstalledBesideTheProgram) {
  Prefix p;
  DataDirCandidates c{"", p.root / "bin/gpemu", "../share/gpemu", "/nowhere/share/gpemu", "/src"};
  EXPECT_EQ(resolve_data_dir(c), p.data().lexically_normal());
}

TEST(DataDir, ConfiguredInstallFolderForAProgramElsewhere) {
  Prefix p;
  testing::TempDir elsewhere;
  DataDirCandidates c{"", elsewhere / "app", "../share/gpemu", p.data(), "/src"};
  EXPECT_EQ(resolve_data_dir(c), p.data());
}

TEST(DataDir, InstalledBesideThePythonModule) {
  // python3 runs from /usr/bin; the module was installed under another prefix,
  // not the configured one.
  Prefix p;
  testing::TempDir python;
  DataDirCandidates c{"", python / "python3", "../share/gpemu", "/nowhere/share/gpemu", "/src"};
  c.module = p.root / "lib/python3/dist-packages/gpemu.so";
  c.from_module = "../../../share/gpemu";
  EXPECT_EQ(resolve_data_dir(c), p.data().lexically_normal());
  // A program installed beside its data still comes first.
  Prefix q;
  c.executable = q.root / "bin/app";
  EXPECT_EQ(resolve_data_dir(c), q.data().lexically_normal());
}

TEST(DataDir, SourceTreeWhenNothingIsInstalled) {
  testing::TempDir elsewhere;
  DataDirCandidates c{"", elsewhere / "app", "../share/gpemu", elsewhere / "share/gpemu", "/src"};
  EXPECT_EQ(resolve_data_dir(c), fs::path("/src"));
  c.executable.clear();
  c.installed.clear();
  EXPECT_EQ(resolve_data_dir(c), fs::path("/src"));
}

TEST(DataDir, AFolderWithoutZooDoesNotCount) {
  testing::TempDir root;
  fs::create_directories(root / "bin");
  fs::create_directories(root.path() / "share" / "gpemu" / "data");  // no zoo/
  DataDirCandidates c{"", root / "bin/gpemu", "../share/gpemu", root.path() / "share" / "gpemu", "/src"};
  EXPECT_EQ(resolve_data_dir(c), fs::path("/src"));
}

}  // namespace
}  // namespace gpemu::zoo
