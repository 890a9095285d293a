// gpemu torch: runs an unmodified PyTorch script on emulated GPUs
// (docs/torch.md). The command only checks its options, sets the environment
// the torch backend reads (src/torch/runtime.h, Settings::from_env) and
// replaces itself with the Python interpreter; the script's process keeps
// gpemu's process id, so its exit status is the command's.
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>
#include <vector>

#include <fmt/format.h>

#include "cli/commands.h"
#include "cli/job_args.h"
#include "cli/rank_nodes.h"
#include "common/output_path.h"
#include "gpemu/calibration.h"
#include "gpemu/catalog.h"
#include "gpemu/error.h"
#include "gpemu/interconnect.h"
#include "gpemu/share.h"
#include "gpemu/zoo.h"
#include "share/serve.h"

namespace gpemu::cli {
namespace {

namespace fs = std::filesystem;

struct TorchArgs {
  std::string gpu = "v100";
  int gpus = 1;
  std::string clock = "real";
  std::string json, trace, report, model;
  std::string python = "/usr/bin/python3";
  int torch_api = 2;  // the PyTorch whose program runs: 2 (gpemu_torch/_torch2.py) or 1 (torch 1.13's own)
  std::vector<std::string> script;
  // Attached to gpemu serve: the socket (empty: the default one).
  bool connect = false;
  std::string socket;
  int priority = 0;
  std::string mig;
  std::string host;         // a host profile's name or file (empty: the default host)
  std::string step_marker;  // a function or record_function label whose calls start the script's steps
  // Between nodes, when the launcher's ranks span several (cli/rank_nodes.h): gpemu train's --network.
  std::string network = JobArgs().network;
  bool gpu_given = false;
};

// The folder holding the gpemu_torch package: the build tree's, else the
// installed one.
fs::path torch_package_root() {
#ifdef GPEMU_TORCH_PACKAGE_BUILD_DIR
  for (const fs::path& root : {fs::path(GPEMU_TORCH_PACKAGE_BUILD_DIR), fs::path(GPEMU_TORCH_PACKAGE_INSTALL_DIR)}) {
    std::error_code ec;
    if (fs::is_regular_file(root / "gpemu_torch" / "_backend.so", ec)) return root;
  }
  throw InputError(fmt::format("gpemu torch: the torch backend is not in {} nor in {}: build or install gpemu again",
                               GPEMU_TORCH_PACKAGE_BUILD_DIR, GPEMU_TORCH_PACKAGE_INSTALL_DIR));
#else
  throw InputError(
      "gpemu torch: this gpemu was built without the torch backend; install Debian's libtorch-dev "
      "(scripts/install-deps.sh does) and build again");
#endif
}

void set_env(const char* name, const std::string& value) {
  if (::setenv(name, value.c_str(), 1) != 0)
    throw ResourceError(fmt::format("gpemu torch: cannot set {}: {}", name, std::strerror(errno)));
}

// What the options resolved to once checked: the served GPU and socket
// (--connect) and the host profile as the backend reads it.
struct ScriptRun {
  std::string served_gpu, host;
  fs::path socket;
  RankNodes nodes;      // the launcher's ranks' nodes (one when none)
  std::string network;  // a preset's name or the file's absolute path
};

// Every option checked before the script starts: InputError naming the
// option otherwise.
ScriptRun check_script_options(const TorchArgs& a) {
  ScriptRun r;
  if (a.script.empty()) throw InputError("gpemu torch: no script given: gpemu torch [options] -- script.py [args...]");
  const fs::path script = a.script.front();
  std::error_code ec;
  if (!fs::is_regular_file(script, ec))
    throw InputError(fmt::format("gpemu torch: script '{}': not a file", script.string()));
  if (std::ifstream probe(script); !probe)
    throw InputError(fmt::format("gpemu torch: script '{}': cannot be read", script.string()));
  (void)find_gpu(a.gpu);  // InputError naming the GPU when it is not catalogued
  if (a.clock != "real" && a.clock != "virtual")
    throw InputError(fmt::format("--clock '{}': expected 'real' or 'virtual'", a.clock));
  if (a.connect) {
    if (a.gpu_given) throw InputError("--gpu with --connect: the GPU is the server's (gpemu serve --gpu)");
    if (a.clock != "real")
      throw InputError("--clock virtual with --connect: a script sharing gpemu serve's GPUs runs in wall time");
    if (!a.trace.empty() || !a.report.empty())
      throw InputError(
          "--trace / --report with --connect: the GPU's timeline is the server's; watch it with gpemu smi");
    // The server is there and has the GPUs asked for, before the script starts.
    r.socket = fs::absolute(a.socket.empty() ? default_socket_path() : fs::path(a.socket));
    const nlohmann::json gpus = served_gpus(r.socket);
    if (a.gpus > static_cast<int>(gpus.size()))
      throw InputError(fmt::format("--gpus {} with --connect: the server at {} has {} GPU{} (gpemu serve --gpus)",
                                   a.gpus, r.socket.string(), gpus.size(), gpus.size() == 1 ? "" : "s"));
    r.served_gpu = gpus[0]["id"].get<std::string>();
  } else if (!a.socket.empty() || a.priority != 0 || !a.mig.empty()) {
    throw InputError("--socket, --priority and --mig are for a script attached to gpemu serve: add --connect");
  }
  if (!a.host.empty()) {
    // InputError naming --host and the accepted names; a file is passed on by its absolute path.
    (void)find_host(a.host, "--host");
    std::error_code hec;
    r.host = fs::is_regular_file(a.host, hec) ? fs::absolute(a.host).string() : a.host;
  }
  if (a.step_marker.find_first_of(" \t\n()") != std::string::npos)
    throw InputError(
        fmt::format("--step-marker '{}': expected a function's name (train_step, Trainer.step) or a "
                    "torch.profiler.record_function label, without spaces or parentheses",
                    a.step_marker));
  if (!a.json.empty()) check_output_path(a.json, "--json");
  if (!a.trace.empty()) check_output_path(a.trace, "--trace");
  if (!a.report.empty()) check_output_path(a.report, "--report");
  if (::access(a.python.c_str(), X_OK) != 0)
    throw InputError(fmt::format("--python '{}': not an executable ({})", a.python, std::strerror(errno)));
  r.nodes = read_rank_nodes();     // InputError naming the launcher's variable
  (void)parse_network(a.network);  // InputError naming the preset or file
  std::error_code nec;
  r.network = fs::is_regular_file(a.network, nec) ? fs::absolute(a.network).string() : a.network;
  return r;
}

// The environment the torch backend reads (src/torch/runtime.h, Settings::from_env).
void set_script_env(const TorchArgs& a, const ScriptRun& r) {
  const fs::path root = torch_package_root();
  std::string path = (root / "gpemu_torch").string() + ":" + root.string();
  if (const char* old = std::getenv("PYTHONPATH"); old && *old) path += std::string(":") + old;
  set_env("PYTHONPATH", path);
  // A run's settings are its own: none inherited from an enclosing run.
  for (const char* v :
       {"GPEMU_TORCH_JSON", "GPEMU_TORCH_TRACE", "GPEMU_TORCH_REPORT", "GPEMU_TORCH_MODEL", "GPEMU_TORCH_PARTS",
        "GPEMU_TORCH_SERVE", "GPEMU_TORCH_PRIORITY", "GPEMU_TORCH_MIG", "GPEMU_TORCH_HOST", "GPEMU_TORCH_STEP_MARKER"})
    ::unsetenv(v);
  set_env("GPEMU_TORCH_ACTIVE", "1");
  set_env("GPEMU_TORCH_GPU", a.connect ? r.served_gpu : a.gpu);
  if (a.connect) {
    set_env("GPEMU_TORCH_SERVE", r.socket.string());
    set_env("GPEMU_TORCH_PRIORITY", std::to_string(a.priority));
    if (!a.mig.empty()) set_env("GPEMU_TORCH_MIG", a.mig);
  }
  set_env("GPEMU_TORCH_GPUS", std::to_string(a.gpus));
  set_env("GPEMU_TORCH_NODES", std::to_string(r.nodes.nodes));
  set_env("GPEMU_TORCH_NODE_RANKS", std::to_string(r.nodes.ranks_per_node));
  set_env("GPEMU_TORCH_NETWORK", r.network);
  set_env("GPEMU_TORCH_CLOCK", a.clock);
  // The script's C clocks read emulated time too (src/torch/clock_shim.cpp);
  // gpemu_torch/_clock.py attaches the shim once the backend is loaded.
  if (const fs::path shim = root / "gpemu_torch" / "_clock_shim.so"; a.clock == "virtual" && fs::exists(shim)) {
    std::string preload = shim.string();
    if (const char* old = std::getenv("LD_PRELOAD"); old && *old) preload += std::string(":") + old;
    set_env("LD_PRELOAD", preload);
  }
  set_env("GPEMU_TORCH_API", std::to_string(a.torch_api));
  set_env("GPEMU_TORCH_MAIN_PID", std::to_string(::getpid()));
  set_env("GPEMU_DATA_DIR", zoo::data_dir().string());
  set_env("GPEMU_TORCH_SCRIPT", a.script.front());
  if (!a.json.empty()) set_env("GPEMU_TORCH_JSON", fs::absolute(a.json).string());
  if (!a.trace.empty()) set_env("GPEMU_TORCH_TRACE", fs::absolute(a.trace).string());
  if (!a.report.empty()) set_env("GPEMU_TORCH_REPORT", fs::absolute(a.report).string());
  if (!r.host.empty()) set_env("GPEMU_TORCH_HOST", r.host);
  if (!a.step_marker.empty()) set_env("GPEMU_TORCH_STEP_MARKER", a.step_marker);
  if (!a.model.empty()) {
    if (!zoo::has_model(a.model))
      throw InputError(fmt::format("--model '{}': not a model of the zoo (`gpemu models` lists them)", a.model));
    set_env("GPEMU_TORCH_MODEL", a.model);
  }
}

[[noreturn]] void run_script(const TorchArgs& a) {
  set_script_env(a, check_script_options(a));
  std::vector<std::string> args = {a.python};
  args.insert(args.end(), a.script.begin(), a.script.end());
  std::vector<char*> argv;
  for (std::string& s : args) argv.push_back(s.data());
  argv.push_back(nullptr);
  ::execv(a.python.c_str(), argv.data());
  throw ResourceError(fmt::format("gpemu torch: cannot start {}: {}", a.python, std::strerror(errno)));
}

std::vector<std::string>& script_args() {
  static std::vector<std::string> args;
  return args;
}

}  // namespace

int split_torch_script_args(int argc, char** argv) {
  if (argc < 2 || std::string_view(argv[1]) != "torch") return argc;
  // gpemu torch's options that take a value (as --name value or --name=value).
  static const std::vector<std::string_view> with_value = {"--gpu",         "--gpus",     "--clock",  "--json",
                                                           "--trace",       "--report",   "--model",  "--python",
                                                           "--socket",      "--priority", "--mig",    "--host",
                                                           "--step-marker", "--torch",    "--network"};
  int i = 2, cli_argc = argc;  // i: the script's index; cli_argc: what CLI11 parses
  while (i < argc) {
    const std::string_view arg = argv[i];
    if (arg == "--") {  // the separator: dropped
      cli_argc = i++;
      break;
    }
    if (!arg.starts_with("-")) {  // the script
      cli_argc = i;
      break;
    }
    const bool takes_value = std::find(with_value.begin(), with_value.end(), arg) != with_value.end();
    i += takes_value ? 2 : 1;
  }
  for (int j = i; j < argc; ++j) script_args().emplace_back(argv[j]);
  return cli_argc;
}

void add_torch_command(CLI::App& app) {
  auto* cmd = app.add_subcommand(
      "torch", "Run an unmodified PyTorch script on emulated GPUs: gpemu torch [options] -- script.py [args...]");
  auto a = std::make_shared<TorchArgs>();
  cmd->add_option("--gpu", a->gpu, "GPU to emulate (`gpemu devices` lists them)")->capture_default_str();
  cmd->add_option("--gpus", a->gpus, "Emulated GPUs the script sees (torch.cuda.device_count())")
      ->check(CLI::Range(1, 64))
      ->capture_default_str();
  cmd->add_option("--clock", a->clock,
                  "real: the script runs in wall time, blocking as a real GPU would; virtual: as fast as the CPU "
                  "allows, emulated time reported")
      ->capture_default_str();
  cmd->add_option("--json", a->json, "Write the run's summary (JSON) here when the script ends");
  cmd->add_option("--trace", a->trace, "Write a Perfetto/Chrome trace of the emulated GPUs here");
  cmd->add_option("--report", a->report, "Write an HTML report of the run (summary, time per GPU, utilization) here");
  cmd->add_option("--model", a->model,
                  "The zoo model the script trains, if it is one: its learned time correction is applied, as "
                  "`gpemu predict` applies it (default: none, the per-operator model alone)");
  cmd->add_option("--python", a->python, "Python interpreter with Debian's CPU-only torch 1.13")->capture_default_str();
  cmd->add_option("--host", a->host,
                  "Host profile whose per-op costs the host pays under the virtual clock: a name (gpemu predict "
                  "--host's) or a file from `gpemu bench host --out` (default: h200-2026)");
  cmd->add_option("--step-marker", a->step_marker,
                  "A function (or torch.profiler.record_function label) called once per step: its calls start "
                  "the steps of the summary (default: optimizer.step() calls, else backward calls)");
  cmd->add_option("--torch", a->torch_api,
                  "The PyTorch whose program the script runs: 2 (PyTorch 2's API and defaults: "
                  "F.scaled_dot_product_attention, torch.amp.GradScaler, foreach/fused optimizers, torch.compile "
                  "as eager) or 1 (Debian's torch 1.13 as it is)")
      ->check(CLI::IsMember({1, 2}))
      ->capture_default_str();
  cmd->add_option("--network", a->network,
                  "NIC and switch between nodes when the launcher's ranks span several (WORLD_SIZE over "
                  "LOCAL_WORLD_SIZE, or mpirun's): 10gbe, 25gbe, 100gbe, 400gbe or a JSON file, as gpemu train's")
      ->capture_default_str();
  cmd->add_flag("--connect", a->connect,
                "Share a running `gpemu serve`'s GPUs with other processes (its card, its policy, wall time)");
  cmd->add_option("--socket", a->socket, "With --connect: the server's socket (default: gpemu serve's default)");
  cmd->add_option("--priority", a->priority, "With --connect, policy priority: larger goes first")
      ->check(CLI::Range(-1000, 1000));
  cmd->add_option("--mig", a->mig, "With --connect, policy mig: this script's slice, e.g. 3g.20gb");
  cmd->footer("The script and its arguments follow the options (after --): they are the script's, untouched.");
  cmd->callback([a, cmd] {
    TorchArgs args = *a;
    args.script = script_args();
    args.gpu_given = cmd->count("--gpu") > 0;
    run_script(args);
  });
}

}  // namespace gpemu::cli
