#include "cli/dlio_train.h"

#include <fstream>
#include <iostream>

#include <fmt/format.h>

#include "cli/output.h"
#include "gpemu/catalog.h"
#include "gpemu/dlio/runner.h"
#include "gpemu/error.h"
#include "gpemu/trace.h"

namespace gpemu::cli {

void run_dlio_train(const DlioTrainArgs& a) {
  dlio::DlioRunOptions o;
  o.clock = a.clock;
  if (a.gpu) o.default_gpu = find_gpu(*a.gpu).id;
  if (!a.profiles.empty()) o.profiles_dir = a.profiles;
  if (!a.trace.empty()) {
    o.trace = true;
    o.on_timeline = [&a](Timeline& t, const std::vector<TraceDeviceName>& names) {
      write_chrome_trace_file(t.trace_records(), t.host_spans(), names, a.trace);
    };
  }
  auto print = [&a](const nlohmann::json& result) {
    if (a.json)
      std::cout << result.dump(2) << '\n';
    else
      dlio::print_dlio_result(result, std::cout);
  };
  // A run that stops early (a full disk at a checkpoint, ^C) still reports the
  // epochs it finished before the error ends the command.
  o.on_stopped = print;
  print(dlio::run_dlio_config(a.config, a.overrides, o));
}

}  // namespace gpemu::cli
