#include "cli/cli.h"

#include <filesystem>
#include <iostream>

#include "cli/commands.h"
#include "common/fs_errors.h"
#include "common/interrupt.h"
#include "common/message_text.h"
#include "gpemu/error.h"

namespace gpemu::cli {

int run(int argc, char** argv) {
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
  add_calibrate_command(app);
  add_analyze_command(app);
  add_share_command(app);
  add_serve_command(app);
  add_smi_command(app);
  add_torch_command(app);
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
  } catch (const std::filesystem::filesystem_error& e) {
    // A filesystem call no reader wraps: still the path and the OS reason,
    // not the library's "filesystem error: status: ... [path]".
    std::string paths = "'" + shown_path(e.path1()) + "'";
    if (!e.path2().empty()) paths += " and '" + shown_path(e.path2()) + "'";
    std::cerr << "gpemu: error: " << paths << ": " << fs_reason(e.code()) << '\n';
    if (const int sig = interrupt_signal()) return Interrupted(sig).exit_status();
    return 1;
  } catch (const std::exception& e) {
    std::cerr << "gpemu: error: " << e.what() << '\n';
    // An error met while unwinding from a signal still exits as interrupted.
    if (const int sig = interrupt_signal()) return Interrupted(sig).exit_status();
    return 1;
  }
  return 0;
}

}  // namespace gpemu::cli
