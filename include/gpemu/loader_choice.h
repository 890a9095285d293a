// What reads a job's dataset, decided from the clock the job runs on: once,
// here, for every front end (`gpemu train`, `gpemu analyze`, the C++ API).
//
// Thread safety: free functions.
#pragma once

#include <optional>
#include <string>

#include "gpemu/clock.h"
#include "gpemu/job.h"

namespace gpemu {

// The loader of a job that reads a dataset: the modelled loader under the
// virtual clock (real reads take wall time that clock does not see), the
// real loader under the real clock.
DataSource dataset_source(ClockKind clock);

// Pinned staging buffers of the real loader: locked when RLIMIT_MEMLOCK
// allows locking what `ranks` ranks stage, else only accounted. Sets
// data.loader.pin_mode; returns the note that says why it fell back
// (nullopt when it locks).
std::optional<std::string> lock_pinned_if_allowed(DataSpec& data, int ranks);

}  // namespace gpemu
