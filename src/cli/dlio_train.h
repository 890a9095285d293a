// `gpemu train --dlio-config FILE.yaml [++workload.<section>.<key>=<value> ...]`:
// a DLIO / MLPerf Storage workload on emulated accelerators (src/dlio).
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace gpemu::cli {

struct DlioTrainArgs {
  std::string config;
  std::vector<std::string> overrides;
  std::string clock = "real";
  std::optional<std::string> gpu;  // when --gpu was given
  std::string profiles;
  std::string trace;
  bool json = false;
};

void run_dlio_train(const DlioTrainArgs& a);

}  // namespace gpemu::cli
