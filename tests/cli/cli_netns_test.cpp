// `gpemu netns` as a user meets it: bad values, a user who is not root, a
// machine without iproute2 each get one line saying what to give instead.
#include <unistd.h>

#include <gtest/gtest.h>

#include <string>

#include "support/run_gpemu.h"

namespace {

using gpemu::testing::run_gpemu;

void expect_one_line(const gpemu::testing::GpemuRun& r, const std::string& part) {
  EXPECT_NE(r.status, 0);
  EXPECT_NE(r.err.find(part), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find('\n'), r.err.size() - 1) << r.err;
  EXPECT_TRUE(r.out.empty()) << r.out;
}

TEST(CliNetns, BadValuesAreRefusedBeforeAnythingIsMade) {
  expect_one_line(run_gpemu("netns up --nodes 2 --bandwidth 10GB"), "--bandwidth '10GB': unit 'gb' is not accepted");
  expect_one_line(run_gpemu("netns up --nodes 0"), "--nodes 0: give 1 to 254");
  expect_one_line(run_gpemu("netns up --nodes 5000"), "--nodes 5000: give 1 to 254");
  expect_one_line(run_gpemu("netns up --latency 50"), "--latency '50': unit '' is not accepted");
  expect_one_line(run_gpemu("netns up --prefix 'a b'"), "--prefix 'a b'");
}

TEST(CliNetns, NotRootOrNoIpSaysSo) {
  if (::geteuid() == 0) {
    // As nobody (setpriv drops the ids); the binary's folder is readable by all.
    expect_one_line(run_gpemu("netns up --nodes 2", "setpriv --reuid=65534 --regid=65534 --clear-groups "),
                    "netns: needs root");
    expect_one_line(run_gpemu("netns up --nodes 2", "PATH=/nonexistent "), "netns: 'ip' is not on $PATH");
  } else {
    expect_one_line(run_gpemu("netns up --nodes 2"), "netns: needs root");
  }
  expect_one_line(run_gpemu("netns show --prefix gpemunone"), "nothing of prefix 'gpemunone' is up");
}

}  // namespace
