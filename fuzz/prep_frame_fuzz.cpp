// libFuzzer harness: the preprocessing service's wire protocol without a
// server (prep/wire.h, prep/job.h): the input is what a peer sends, read
// frame by frame as the dispatcher and the workers read it (through a
// socket pair), and each frame's job read as the dispatcher reads a
// registration. A bad frame is a refusal with a reason (never an
// exception); a bad job is a one-line InputError.
#include <sys/socket.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>

#include <nlohmann/json.hpp>

#include "fuzz_util.h"
#include "prep/job.h"
#include "prep/wire.h"

namespace wire = gpemu::prep::wire;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  int fds[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM, 0, fds) != 0) return 0;
  int sent = 1 << 20;
  ::setsockopt(fds[0], SOL_SOCKET, SO_SNDBUF, &sent, sizeof sent);
  std::size_t done = 0;
  while (done < size) {  // within the socket's buffers: libFuzzer's inputs are small
    const ssize_t n = ::write(fds[0], data + done, size - done);
    if (n <= 0) break;
    done += static_cast<std::size_t>(n);
  }
  ::shutdown(fds[0], SHUT_WR);
  for (int frames = 0; frames < 64; ++frames) {
    wire::Frame f;
    const wire::ReadResult r = wire::read_frame(fds[1], f, 50, 50);
    if (r.got == wire::Got::Bad && r.why.empty()) {
      std::fprintf(stderr, "a bad frame without a reason\n");
      std::abort();
    }
    if (r.got != wire::Got::Frame) break;
    (void)wire::op_of(f.message);
    const auto job = f.message.find("job");
    gpemu::fuzz::expect_input_errors_only(
        [&] { (void)gpemu::prep::job_from_json(job != f.message.end() ? *job : f.message); });
  }
  ::close(fds[0]);
  ::close(fds[1]);
  return 0;
}
