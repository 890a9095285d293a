#include "common/folder_lock.h"

#include <gtest/gtest.h>
#include <signal.h>

#include <future>
#include <thread>

#include "common/interrupt.h"
#include "support/temp_dir.h"

namespace gpemu {
namespace {

using testing::TempDir;

TEST(FolderLock, ASecondHolderIsRefusedUntilTheFirstReleases) {
  TempDir d;
  {
    FolderLock first(d / "cache");
    EXPECT_FALSE(FolderLock::try_lock(d / "cache").has_value());
  }
  EXPECT_TRUE(FolderLock::try_lock(d / "cache").has_value());
}

TEST(FolderLock, AWaiterIsToldAndGetsTheLockAfterRelease) {
  TempDir d;
  auto first = std::make_unique<FolderLock>(d.path());
  std::promise<std::string> told;
  auto waiter = std::async(std::launch::async, [&] {
    FolderLock second(d.path(), [&](const std::string& line) { told.set_value(line); });
    return true;
  });
  const std::string line = told.get_future().get();  // the waiter found the lock taken
  EXPECT_NE(line.find("waiting for another gpemu process"), std::string::npos) << line;
  first.reset();
  EXPECT_TRUE(waiter.get());
}

TEST(FolderLock, AnInterruptionEndsTheWait) {
  TempDir d;
  FolderLock first(d.path());
  clear_interrupt();
  try {
    FolderLock second(d.path(), [](const std::string&) { request_interrupt(SIGINT); });
    FAIL() << "the wait must end with Interrupted";
  } catch (const Interrupted& e) {
    EXPECT_EQ(e.exit_status(), 130);
  }
  clear_interrupt();
}

}  // namespace
}  // namespace gpemu
