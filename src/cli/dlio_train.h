// `gpemu train --dlio-config FILE.yaml [++workload.<section>.<key>=<value> ...]`:
// a DLIO / MLPerf Storage workload on emulated accelerators (src/dlio).
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "gpemu/clock.h"

namespace gpemu::cli {

struct DlioTrainArgs {
  std::string config;
  std::vector<std::string> overrides;
  ClockKind clock = ClockKind::Real;
  std::optional<std::string> gpu;      // when --gpu was given
  std::optional<int> world_size;       // --gpus
  std::optional<int> nodes;            // --nodes: workload.gpemu.nodes
  std::optional<std::string> network;  // --network: workload.gpemu.network
  std::optional<std::uint64_t> seed;   // --seed: workload.train.seed
  std::string profiles;
  std::string trace;
  std::string report;
  bool json = false;
  std::chrono::milliseconds dist_timeout{30'000};  // under mpirun or torchrun: the rendezvous
};

void run_dlio_train(const DlioTrainArgs& a);

}  // namespace gpemu::cli
