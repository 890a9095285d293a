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
      std::ofstream out(a.trace);
      if (!out) throw InputError(fmt::format("cannot write trace file '{}'", a.trace));
      write_chrome_trace(t.trace_records(), t.host_spans(), names, out);
    };
  }
  const nlohmann::json result = dlio::run_dlio_config(a.config, a.overrides, o);
  if (a.json)
    std::cout << result.dump(2) << '\n';
  else
    dlio::print_dlio_result(result, std::cout);
}

}  // namespace gpemu::cli
