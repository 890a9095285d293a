#include "torch/settings.h"

#include <fmt/format.h>

#include <unistd.h>
#include <cstdlib>

#include "common/env_number.h"
#include "common/message_text.h"
#include "gpemu/catalog.h"
#include "gpemu/error.h"
#include "gpemu/zoo.h"

namespace gpemu::torch_backend {

namespace detail {

std::optional<std::string> env(const char* name) {
  const char* v = std::getenv(name);
  if (v == nullptr || *v == '\0') return std::nullopt;
  return std::string(v);
}

std::string rank_label() {
  if (auto r = env("RANK")) return "rank " + *r;
  return fmt::format("pid {}", ::getpid());
}

std::string client_name(const Settings& s) {
  const std::string script = s.script.empty() ? "torch" : std::filesystem::path(s.script).filename().string();
  // The server refuses control characters and names over 200 bytes; a file
  // name may hold any byte and be 255 long.
  return fmt::format("{} ({})", printable_excerpt(script, 160), rank_label());
}

}  // namespace detail

using detail::env;

Settings Settings::from_env() {
  Settings s;
  if (auto v = env("GPEMU_TORCH_GPU")) {
    if (try_find_gpu(*v) == nullptr)
      throw InputError(fmt::format("GPEMU_TORCH_GPU '{}': not a catalogued GPU (`gpemu devices` lists them)", *v));
    s.gpu = *v;
  }
  if (auto v = env("GPEMU_TORCH_GPUS")) s.gpus = env_whole_number("GPEMU_TORCH_GPUS", *v, 1, kMaxTorchGpus);
  if (auto v = env("GPEMU_TORCH_NODES")) s.nodes = env_whole_number("GPEMU_TORCH_NODES", *v, 1, 4096);
  if (auto v = env("GPEMU_TORCH_NODE_RANKS")) s.node_ranks = env_whole_number("GPEMU_TORCH_NODE_RANKS", *v, 1, 4096);
  if (auto v = env("GPEMU_TORCH_NETWORK")) s.network = *v;
  if (auto v = env("GPEMU_TORCH_CLOCK")) {
    if (*v != "real" && *v != "virtual")
      throw InputError(fmt::format("GPEMU_TORCH_CLOCK '{}': expected 'real' or 'virtual'", *v));
    s.clock = parse_clock_kind(*v);
  }
  if (auto v = env("GPEMU_TORCH_JSON")) s.json = *v;
  if (auto v = env("GPEMU_TORCH_TRACE")) s.trace = *v;
  if (auto v = env("GPEMU_TORCH_REPORT")) s.report = *v;
  if (auto v = env("GPEMU_TORCH_SCRIPT")) s.script = *v;
  if (auto v = env("GPEMU_TORCH_MAIN_PID")) s.main_process = *v == std::to_string(::getpid());
  if (auto v = env("GPEMU_TORCH_PARTS")) s.parts = *v;
  if (auto v = env("GPEMU_TORCH_SERVE")) s.serve = *v;
  if (auto v = env("GPEMU_TORCH_PRIORITY")) s.priority = env_whole_number("GPEMU_TORCH_PRIORITY", *v, -1000, 1000);
  if (auto v = env("GPEMU_TORCH_MIG")) s.mig = *v;
  if (auto v = env("GPEMU_TORCH_HOST")) s.host = *v;
  if (auto v = env("GPEMU_TORCH_STEP_MARKER")) s.step_marker = *v;
  if (s.serve && (s.trace || s.report))
    throw InputError(
        "GPEMU_TORCH_TRACE / GPEMU_TORCH_REPORT with GPEMU_TORCH_SERVE: the GPU's timeline is the server's; "
        "watch it with gpemu smi (a trace of a shared GPU comes from gpemu share --trace)");
  if (s.serve && s.clock == ClockKind::Virtual)
    throw InputError(
        "GPEMU_TORCH_CLOCK 'virtual' with GPEMU_TORCH_SERVE: a script attached to gpemu serve runs under the real "
        "clock (the server's GPUs are shared with other processes in wall time)");
  if (auto v = env("GPEMU_TORCH_MODEL")) {
    if (!zoo::has_model(*v))
      throw InputError(fmt::format("GPEMU_TORCH_MODEL '{}': not a model of the zoo (`gpemu models` lists them)", *v));
    s.model = *v;
  }
  return s;
}

}  // namespace gpemu::torch_backend
