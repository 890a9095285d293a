#include "workload/session_storage.h"

#include <vector>

namespace gpemu {

bool reads_samples(const DataSpec& phase) {
  const pipeline::LoaderModelOptions& m = phase.model;
  const bool service =
      m.prep_service && m.prep_service->workers > 0 && m.prep_service->offload != pipeline::PrepOffload::None;
  return phase.source == DataSource::Modelled && !m.preprocess && !m.storage_link && !service;
}

bool read_from_session_storage(JobSpec& job, const pipeline::StorageDevice& device, bool shared,
                               const std::shared_ptr<pipeline::StorageShare>& share) {
  std::vector<DataSpec*> phases;
  if (reads_samples(job.data)) phases.push_back(&job.data);
  const EvalSpec& eval = job.schedule.eval;
  if (eval.first_epoch > 0 && eval.steps > 0 && reads_samples(eval.data)) phases.push_back(&job.schedule.eval.data);
  if (phases.empty()) return false;
  // One tenancy for the job, held by each of its loaders' options (its
  // Job's spec, the loaders): it counts from the job's start to its end.
  std::shared_ptr<const pipeline::StorageTenancy> tenancy;
  if (share) tenancy = std::make_shared<const pipeline::StorageTenancy>(share);
  for (DataSpec* d : phases) {
    d->model.storage = device;
    d->model.storage_tenancy = tenancy;
  }
  if (job.cluster.nodes > 1) job.data.shared_storage = shared;
  return tenancy != nullptr;
}

}  // namespace gpemu
