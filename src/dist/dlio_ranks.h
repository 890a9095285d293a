// DLIO's ranks as processes, as under DLIO's own launcher (`mpirun -np N
// gpemu train --dlio-config ...`, or torchrun): each process runs one rank,
// reading its shard of the files, with no collective (DLIO's steps only
// compute). What the processes share is the data: rank 0 generates it, and
// the others wait, through the rendezvous store at MASTER_ADDR:MASTER_PORT
// (tcp_store.h), until it says the files are there. A rank that dies after
// that is the launcher's to handle (mpirun ends the job).
#pragma once

#include <chrono>
#include <memory>

#include "dist/launch_env.h"
#include "dist/tcp_store.h"

namespace gpemu::dist {

class DlioRanks {
 public:
  // Rank 0 serves the store; every rank connects within `timeout`.
  DlioRanks(const LaunchEnv& env, std::chrono::milliseconds timeout);
  ~DlioRanks();
  DlioRanks(const DlioRanks&) = delete;
  DlioRanks& operator=(const DlioRanks&) = delete;

  // Rank 0: the data is generated; it waits (up to the timeout) until every
  // other rank has heard, since the store leaves with its process. Others:
  // wait for that, as long as rank 0 lives; Error naming the rank that did
  // not join, or rank 0 when it went away first.
  void wait_for_data();

 private:
  LaunchEnv env_;
  std::chrono::milliseconds timeout_;
  std::unique_ptr<TcpStoreServer> server_;
  std::unique_ptr<TcpStoreClient> client_;
};

}  // namespace gpemu::dist
