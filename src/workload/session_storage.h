// The session's storage for the jobs' data (SessionSpec::data_storage): what
// a placed job's modelled loaders read their samples from.
#pragma once

#include <memory>

#include "gpemu/job.h"
#include "gpemu/pipeline/storage_model.h"

namespace gpemu {

// Whether a phase's batches come from a modelled loader that reads samples
// from a storage device: not DLIO's timeline path (its storage is a link)
// nor a preprocessing service's workers (they read from memory).
bool reads_samples(const DataSpec& phase);

// Points the job's modelled loaders that read samples (its data's and its
// evaluation's) at `device`, with a tenancy of `share` for the job (null:
// the job reads it alone, as a job of several nodes reads their disks);
// `shared`: one store every node reads (DataSpec::shared_storage). Returns
// whether the job took a tenancy.
bool read_from_session_storage(JobSpec& job, const pipeline::StorageDevice& device, bool shared,
                               const std::shared_ptr<pipeline::StorageShare>& share);

}  // namespace gpemu
