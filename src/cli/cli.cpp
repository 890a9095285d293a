#include "cli/cli.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <filesystem>
#include <iostream>
#include <new>
#include <streambuf>

#include "cli/commands.h"
#include "cli/spec_flags.h"
#include "common/fs_errors.h"
#include "common/interrupt.h"
#include "common/message_text.h"
#include "gpemu/error.h"
#include "gpemu/spec_error.h"

namespace gpemu::cli {
namespace {

// What a run that outgrew the memory it may allocate says, wherever the
// std::bad_alloc was thrown: written with write(2), which allocates nothing.
constexpr char kOutOfHostMemory[] =
    "gpemu: error: out of host memory (std::bad_alloc): the run's records did not fit in what this process may "
    "allocate; give fewer steps, epochs or jobs, or raise the limit (ulimit -v)\n";

void say_out_of_host_memory() { (void)!::write(STDERR_FILENO, kOutOfHostMemory, sizeof kOutOfHostMemory - 1); }

// std::terminate's handler: a std::bad_alloc that escaped a worker thread
// (or a noexcept function) is the one-line error and exit status 1 that the
// main thread gives, not "terminate called ..." and SIGABRT. Anything else
// still aborts, as it would have.
[[noreturn]] void on_terminate() {
  if (const std::exception_ptr e = std::current_exception()) {
    try {
      std::rethrow_exception(e);
    } catch (const std::bad_alloc&) {
      say_out_of_host_memory();
      std::_Exit(1);
    } catch (...) {  // NOLINT: not ours to describe; abort below as before
    }
  }
  std::abort();
}

int run_command(int argc, char** argv) {
  CLI::App app{
      "gpemu: emulated GPUs for deep-learning systems research.\n"
      "GPU time and memory are emulated; storage, CPU work, network and processes stay real.",
      "gpemu"};
  app.set_version_flag("--version", "gpemu 0.1.0");
  app.require_subcommand(1);
  // Option errors (a value out of range, a missing option) print as one line,
  // as every other gpemu error does, not with CLI11's second "Run with
  // --help" line.
  app.failure_message([](const CLI::App*, const CLI::Error& e) {
    return "gpemu: error: " + one_line_message(e.what()) + " (see --help)\n";
  });
  app.fallthrough(false);
  add_devices_command(app);
  add_predict_command(app);
  add_train_command(app);
  add_dataset_command(app);
  add_bench_command(app);
  add_models_command(app);
  add_validate_command(app);
  add_profile_command(app);
  add_calibrate_command(app);
  add_analyze_command(app);
  add_share_command(app);
  add_cluster_command(app);
  add_netns_command(app);
  add_serve_command(app);
  add_smi_command(app);
  add_torch_command(app);
  add_prep_command(app);
  install_interrupt_handlers();
  try {
    app.parse(split_torch_script_args(argc, argv), argv);
    // A loop that finished its last step as the signal came still ends as
    // interrupted: the user asked to stop.
    throw_if_interrupted();
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  } catch (const Interrupted& e) {
    std::cerr << "gpemu: " << e.what() << '\n';
    return e.exit_status();
  } catch (const OutOfMemoryError& e) {
    std::cerr << "gpemu: error: " << e.what() << '\n';
    return 3;
  } catch (const std::bad_alloc&) {
    say_out_of_host_memory();
    if (const int sig = interrupt_signal()) return Interrupted(sig).exit_status();
    return 1;
  } catch (const std::filesystem::filesystem_error& e) {
    // A filesystem call no reader wraps: still the path and the OS reason,
    // not the library's "filesystem error: status: ... [path]".
    std::string paths = "'" + shown_path(e.path1()) + "'";
    if (!e.path2().empty()) paths += " and '" + shown_path(e.path2()) + "'";
    std::cerr << "gpemu: error: " << paths << ": " << fs_reason(e.code()) << '\n';
    if (const int sig = interrupt_signal()) return Interrupted(sig).exit_status();
    return 1;
  } catch (const std::exception& e) {
    // The engine names a spec's field; the CLI says the flag that set it.
    std::cerr << "gpemu: error: " << worded_message(e, flag_of_spec_field) << '\n';
    // An error met while unwinding from a signal still exits as interrupted.
    if (const int sig = interrupt_signal()) return Interrupted(sig).exit_status();
    return 1;
  }
  return 0;
}

// std::cout's buffer: every write(2) to standard output is checked and the
// first failure's errno kept. Tables and --json go there; a full disk must not
// end as success with the results lost (`gpemu predict --json > p.json`), and
// stdio forgets the reason once a later flush has nothing left to write.
// Line-buffered on a terminal, as stdio is.
class CheckedStdout : public std::streambuf {
 public:
  CheckedStdout() : line_buffered_(::isatty(STDOUT_FILENO) == 1) { setp(buf_, buf_ + sizeof buf_); }
  CheckedStdout(const CheckedStdout&) = delete;
  CheckedStdout& operator=(const CheckedStdout&) = delete;
  // The errno of the first write that failed; 0 when none did.
  int error() const { return err_; }

 protected:
  int_type overflow(int_type ch) override {
    if (!drain()) return traits_type::eof();
    if (traits_type::eq_int_type(ch, traits_type::eof())) return traits_type::not_eof(ch);
    *pptr() = traits_type::to_char_type(ch);
    pbump(1);
    if (line_buffered_ && traits_type::to_char_type(ch) == '\n' && !drain()) return traits_type::eof();
    return ch;
  }
  std::streamsize xsputn(const char* s, std::streamsize n) override {
    std::streamsize done = 0;
    while (done < n) {
      if (pptr() == epptr() && !drain()) return done;
      const std::streamsize room = std::min<std::streamsize>(epptr() - pptr(), n - done);
      std::memcpy(pptr(), s + done, static_cast<std::size_t>(room));
      pbump(static_cast<int>(room));
      done += room;
    }
    if (line_buffered_ && std::memchr(s, '\n', static_cast<std::size_t>(n)) != nullptr) drain();  // error() says
    return done;
  }
  int sync() override { return drain() ? 0 : -1; }

 private:
  bool drain() {
    const char* p = pbase();
    std::size_t left = static_cast<std::size_t>(pptr() - pbase());
    setp(buf_, buf_ + sizeof buf_);  // what could not be written is dropped, as stdio drops it
    while (left > 0) {
      const ssize_t n = ::write(STDOUT_FILENO, p, left);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) {
        if (err_ == 0) err_ = n < 0 ? errno : EIO;
        return false;
      }
      p += n;
      left -= static_cast<std::size_t>(n);
    }
    return true;
  }

  char buf_[1 << 16];
  bool line_buffered_;
  int err_ = 0;
};

}  // namespace

int run(int argc, char** argv) {
  std::set_terminate(on_terminate);
  CheckedStdout out;
  std::streambuf* const previous = std::cout.rdbuf(&out);
  int status = run_command(argc, argv);
  std::cout.flush();
  int err = out.error();
  bool failed = err != 0 || !std::cout;
  std::cout.rdbuf(previous);
  // Nothing in gpemu writes stdout through stdio; checked all the same.
  errno = 0;
  if (std::fflush(stdout) != 0 || std::ferror(stdout)) {
    failed = true;
    if (err == 0) err = errno;
  }
  if (failed) {
    std::cerr << "gpemu: cannot write standard output: " << std::strerror(err != 0 ? err : EIO) << '\n';
    if (status == 0) status = 1;
  }
  return status;
}

}  // namespace gpemu::cli
