#include "dist/dlio_ranks.h"

#include <fmt/format.h>

#include "gpemu/error.h"

namespace gpemu::dist {

namespace {
constexpr const char* kDataReady = "gpemu/dlio/data-ready";
constexpr const char* kHeard = "gpemu/dlio/heard";
}  // namespace

DlioRanks::DlioRanks(const LaunchEnv& env, std::chrono::milliseconds timeout) : env_(env), timeout_(timeout) {
  if (env.rank == 0) server_ = std::make_unique<TcpStoreServer>(env.master_addr, env.master_port);
  client_ = std::make_unique<TcpStoreClient>(env.master_addr, env.master_port, env.rank, timeout);
}

DlioRanks::~DlioRanks() = default;

void DlioRanks::wait_for_data() {
  if (env_.rank == 0) {
    client_->set(kDataReady, {'1'});
    // Rank 0 serves the store: it stays until every rank has heard.
    for (int r = 1; r < env_.world_size; ++r) {
      try {
        client_->get(fmt::format("{}/{}", kHeard, r), timeout_);
      } catch (const Error& e) {
        throw Error(fmt::format("rank 0 of {}: rank {} did not join within {} s (--dist-timeout): {}", env_.world_size,
                                r, timeout_.count() / 1000.0, e.what()));
      }
    }
    return;
  }
  try {
    // Generation takes as long as the dataset needs: the wait ends when rank 0
    // says so or goes away, not at a time limit.
    client_->get(kDataReady, std::chrono::hours(24 * 365));
    client_->set(fmt::format("{}/{}", kHeard, env_.rank), {'1'});
  } catch (const Error& e) {
    throw Error(fmt::format("rank {} of {}: rank 0 went away before it had generated the data: {}", env_.rank,
                            env_.world_size, e.what()));
  }
}

}  // namespace gpemu::dist
