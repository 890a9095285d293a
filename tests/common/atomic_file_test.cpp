#include "common/atomic_file.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>
#include <iterator>
#include <string>

#include "gpemu/error.h"
#include "support/temp_dir.h"

namespace gpemu {
namespace {

using testing::TempDir;

std::string slurp(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), {}};
}

std::size_t entries(const std::filesystem::path& dir) {
  std::size_t n = 0;
  for ([[maybe_unused]] const auto& e : std::filesystem::directory_iterator(dir)) ++n;
  return n;
}

TEST(AtomicFile, CommitPutsTheWholeFileInPlaceAndLeavesNoTemporary) {
  TempDir d;
  const auto target = d / "out.json";
  {
    AtomicFile f(target, "trace file");
    f.write("{\"a\":");
    EXPECT_FALSE(std::filesystem::exists(target)) << "the target appears only on commit";
    EXPECT_EQ(f.temporary().parent_path(), target.parent_path());
    f.write("1}");
    f.commit();
  }
  EXPECT_EQ(slurp(target), "{\"a\":1}");
  EXPECT_EQ(entries(d.path()), 1u);
}

TEST(AtomicFile, WithoutCommitTheTemporaryIsRemovedAndAnOldTargetKept) {
  TempDir d;
  const auto target = d.write("out.json", "old");
  {
    AtomicFile f(target, "report");
    f.write("half a new fi");
  }
  EXPECT_EQ(slurp(target), "old");
  EXPECT_EQ(entries(d.path()), 1u);
}

TEST(AtomicFile, AMissingFolderIsAnErrorWithTheOsReason) {
  TempDir d;
  try {
    AtomicFile f(d / "no" / "such" / "t.json", "trace file");
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("No such file or directory"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("trace file"), std::string::npos) << e.what();
  }
}

TEST(AtomicFile, AFolderAsTargetIsRefusedWithoutLeavingATemporary) {
  TempDir d;
  std::filesystem::create_directory(d / "dir");
  EXPECT_THROW(AtomicFile(d / "dir", "calibration"), Error);
  EXPECT_EQ(entries(d.path()), 1u);
}

TEST(AtomicFile, AFullDeviceGivesNoSpaceLeftOnDevice) {
  if (!std::filesystem::exists("/dev/full")) GTEST_SKIP() << "no /dev/full";
  AtomicFile f("/dev/full", "trace file");
  EXPECT_EQ(f.temporary(), std::filesystem::path("/dev/full")) << "devices are written in place, never renamed over";
  try {
    f.write(std::string(1 << 16, 'x'));
    f.commit();
    FAIL() << "a write to /dev/full must fail";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("No space left on device"), std::string::npos) << e.what();
  }
}

TEST(AtomicFile, DevNullIsWrittenInPlaceAndStaysADevice) {
  write_file_atomically("/dev/null", "x", "trace file");
  EXPECT_TRUE(std::filesystem::is_character_file("/dev/null"));
}

// A write past RLIMIT_FSIZE fails with EFBIG (SIGXFSZ ignored), as a full disk
// fails with ENOSPC; the child reports what it saw through its exit status.
TEST(AtomicFile, AFailedWriteIsAnErrorAndRemovesThePartialFile) {
  TempDir d;
  const auto target = d / "big.bin";
  const pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    ::signal(SIGXFSZ, SIG_IGN);
    rlimit lim{4096, 4096};
    ::setrlimit(RLIMIT_FSIZE, &lim);
    try {
      AtomicFile f(target, "checkpoint file");
      f.write(std::string(10000, 'x'));
      f.commit();
      ::_exit(1);  // no error: wrong
    } catch (const Error& e) {
      const std::string m = e.what();
      ::_exit(m.find("File too large") != std::string::npos && m.find("at byte 4096") != std::string::npos ? 0 : 2);
    } catch (...) {
      ::_exit(3);
    }
  }
  int st = 0;
  ASSERT_EQ(::waitpid(pid, &st, 0), pid);
  ASSERT_TRUE(WIFEXITED(st));
  EXPECT_EQ(WEXITSTATUS(st), 0) << "1: no error, 2: the message lacks the OS reason or offset";
  EXPECT_EQ(entries(d.path()), 0u) << "neither the target nor a temporary may remain";
}

// N1: the temporary's name was "<target>.tmp-<pid>", opened without O_EXCL or
// O_NOFOLLOW: a symlink planted there aimed the output at any file the writer
// could write.
TEST(AtomicFile, ASymlinkPlantedAtTheOldTemporaryNameIsNeverFollowed) {
  TempDir d;
  const auto victim = d.write("victim.conf", "SECRET");
  const auto target = d / "out.json";
  std::filesystem::create_symlink(victim, target.string() + ".tmp-" + std::to_string(::getpid()));
  write_file_atomically(target, "{\"trace\":1}", "trace file");
  EXPECT_EQ(slurp(victim), "SECRET");
  EXPECT_EQ(slurp(target), "{\"trace\":1}");
  EXPECT_FALSE(std::filesystem::is_symlink(target)) << "the planted link must not be renamed onto the target";
}

TEST(AtomicFile, TheTemporaryNameIsNotJustThePid) {
  TempDir d;
  AtomicFile a(d / "out.json", "trace file");
  AtomicFile b(d / "out.json", "trace file");
  EXPECT_NE(a.temporary(), b.temporary()) << "two writers of one target in one process get two temporaries";
  EXPECT_NE(a.temporary().string(), (d / "out.json").string() + ".tmp-" + std::to_string(::getpid()));
}

TEST(AtomicFile, ANewFileGetsTheUmaskModeAndAReplacedFileKeepsItsMode) {
  TempDir d;
  const mode_t old = ::umask(027);
  write_file_atomically(d / "new.json", "x", "report");
  const auto replaced = d.write("secret.json", "old");
  std::filesystem::permissions(replaced, std::filesystem::perms::owner_read | std::filesystem::perms::owner_write);
  write_file_atomically(replaced, "new", "report");
  ::umask(old);
  struct stat st {};
  ASSERT_EQ(::stat((d / "new.json").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0640u) << "0666 less the umask, as a plain create";
  ASSERT_EQ(::stat(replaced.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u) << "a 0600 file stays 0600 when it is replaced";
  EXPECT_EQ(slurp(replaced), "new");
}

TEST(AtomicFile, AnOwnSymlinkIsWrittenThroughAndStaysALink) {
  TempDir d;
  const auto real = d.write("real.json", "old");
  std::filesystem::create_symlink("real.json", d / "link.json");
  write_file_atomically(d / "link.json", "new", "trace file");
  EXPECT_TRUE(std::filesystem::is_symlink(d / "link.json"));
  EXPECT_EQ(slurp(real), "new");
}

// A link another user owns in a sticky folder (/tmp) may have been planted to
// aim the output at a file of theirs; it is refused, not resolved. Making a
// link of another user needs root (lchown).
TEST(AtomicFile, ASymlinkOfAnotherUserInASharedFolderIsRefused) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root to make a link owned by another user";
  TempDir d;
  const auto shared = d / "shared";
  std::filesystem::create_directory(shared);
  ASSERT_EQ(::chmod(shared.c_str(), 01777), 0);
  const auto victim = d.write("victim.conf", "SECRET");
  const auto target = shared / "out.json";
  std::filesystem::create_symlink(victim, target);
  ASSERT_EQ(::lchown(target.c_str(), 4242, 4242), 0);
  try {
    write_file_atomically(target, "{}", "trace file");
    FAIL() << "expected the planted link to be refused";
  } catch (const InputError& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("'" + target.string() + "': it is a symbolic link owned by another user (uid 4242)"),
              std::string::npos)
        << m;
    EXPECT_NE(m.find("a link you own"), std::string::npos) << m;
  }
  EXPECT_EQ(slurp(victim), "SECRET");
  EXPECT_TRUE(std::filesystem::is_symlink(target)) << "nothing is renamed over the link";
  EXPECT_EQ(entries(shared), 1u) << "no temporary is left";
  // The same link owned by us is followed.
  ASSERT_EQ(::lchown(target.c_str(), ::geteuid(), ::getegid()), 0);
  write_file_atomically(target, "{}", "trace file");
  EXPECT_EQ(slurp(victim), "{}");
}

}  // namespace
}  // namespace gpemu
