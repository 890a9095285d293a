#include "common/output_path.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/interrupt.h"
#include "gpemu/error.h"
#include "support/temp_dir.h"

namespace gpemu {
namespace {

using testing::TempDir;

std::string message_of(const std::filesystem::path& p, const std::string& what) {
  try {
    check_output_path(p, what);
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

TEST(CheckOutputPath, AMissingFolderIsNamedWithTheOsReason) {
  TempDir d;
  const std::string m = message_of(d / "nonexistent" / "t.json", "--trace");
  EXPECT_NE(m.find("--trace"), std::string::npos) << m;
  EXPECT_NE(m.find("No such file or directory"), std::string::npos) << m;
  EXPECT_FALSE(std::filesystem::exists(d / "nonexistent")) << "the check creates nothing";
}

TEST(CheckOutputPath, AFolderAsTheFileIsRefused) {
  TempDir d;
  EXPECT_NE(message_of(d.path(), "--report").find("is a folder"), std::string::npos);
}

TEST(CheckOutputPath, AFileAsTheFolderIsRefused) {
  TempDir d;
  const auto file = d.write("f", "x");
  EXPECT_FALSE(message_of(file / "t.json", "--trace").empty());
}

TEST(CheckOutputPath, NewAndExistingFilesAndDevicesPass) {
  TempDir d;
  EXPECT_NO_THROW(check_output_path(d / "new.json", "--trace"));
  EXPECT_NO_THROW(check_output_path(d.write("old.json", "x"), "--trace"));
  EXPECT_NO_THROW(check_output_path("/dev/null", "--trace"));
}

TEST(CheckOutputPath, ASymlinkOfAnotherUserInASharedFolderIsRefusedBeforeTheRun) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root to make a link owned by another user";
  TempDir d;
  const auto shared = d / "shared";
  std::filesystem::create_directory(shared);
  ASSERT_EQ(::chmod(shared.c_str(), 01777), 0);
  const auto link = shared / "t.json";
  std::filesystem::create_symlink(d.write("victim.conf", "x"), link);
  ASSERT_EQ(::lchown(link.c_str(), 4242, 4242), 0);
  const std::string m = message_of(link, "--trace");
  EXPECT_NE(m.find("--trace '" + link.string() + "'"), std::string::npos) << m;
  EXPECT_NE(m.find("symbolic link owned by another user"), std::string::npos) << m;
}

TEST(Interrupt, TheFlagTurnsIntoInterruptedWithTheShellsExitStatus) {
  clear_interrupt();
  EXPECT_NO_THROW(throw_if_interrupted());
  request_interrupt(15);
  try {
    throw_if_interrupted();
    FAIL();
  } catch (const Interrupted& e) {
    EXPECT_EQ(e.exit_status(), 143);
    EXPECT_STREQ(e.what(), "interrupted by SIGTERM");
  }
  clear_interrupt();
  EXPECT_FALSE(interrupt_requested());
}

}  // namespace
}  // namespace gpemu
