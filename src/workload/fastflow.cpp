// FastFlow's offloading policy (include/gpemu/fastflow.h).
#include "gpemu/fastflow.h"

#include <algorithm>

#include <fmt/format.h>

#include "gpemu/clock.h"
#include "gpemu/error.h"
#include "gpemu/session.h"

namespace gpemu {
namespace {

struct Profiled {
  double thp = 0;     // steps/s over the timed steps
  double cycles = 0;  // the client's loader CPU seconds over them
};

Profiled profile(const CostModel& costs, JobSpec job, const FastFlowOptions& o) {
  job.schedule.epochs = 1;
  job.schedule.max_iterations = o.profile_steps;
  job.record = RecordSpec{};
  job.trace = false;
  auto clock = make_virtual_clock();
  const RunRecord rec = run_alone(*clock, costs, job);
  std::vector<const StepRecord*> steps;
  for (const StepRecord& s : rec.steps)
    if (s.gpu == 0 && s.phase == RunPhase::Train) steps.push_back(&s);
  const std::size_t first = static_cast<std::size_t>(std::max(o.initial_steps, 1));
  if (steps.size() <= first)
    throw InputError(
        fmt::format("FastFlow: the epoch has {} steps, too few to profile past the first {}", steps.size(), first));
  Profiled p;
  const Duration span = steps.back()->step_end - steps[first - 1]->step_end;
  p.thp = static_cast<double>(steps.size() - first) / std::max(to_seconds(span), 1e-12);
  for (std::size_t i = first; i < steps.size(); ++i) p.cycles += to_seconds(steps[i]->read + steps[i]->decode);
  return p;
}

}  // namespace

double fastflow_local_ratio(double gthp, double lthp, double rthp, double pcycle, double dcycle) {
  const double dc_ratio = pcycle > 0 ? dcycle / pcycle : 0;
  const double ideal_off = gthp - lthp;
  const double decode_off = ideal_off + ideal_off * dc_ratio;
  const double off = lthp > rthp ? (rthp + decode_off) / 2 : std::max(rthp, decode_off);
  const double ratio = lthp + rthp < gthp ? lthp / (lthp + rthp) : (gthp - off) / gthp;
  return std::max(ratio, 0.0);
}

FastFlowChoice fastflow_choice(const CostModel& costs, const JobSpec& job, const FastFlowOptions& o) {
  if (!job.data.model.prep_service || job.data.model.prep_service->workers < 1)
    throw InputError("FastFlow chooses what to offload to a preprocessing service: give the job one (--prep-workers)");
  if (o.profile_steps <= o.initial_steps || o.initial_steps < 0)
    throw InputError(fmt::format("FastFlow: {} profiled steps after {} initial ones is impossible", o.profile_steps,
                                 o.initial_steps));
  FastFlowChoice c;
  JobSpec local = job;
  local.data.model.prep_service->offload = pipeline::PrepOffload::None;
  const Profiled l = profile(costs, local, o);
  c.lthp = l.thp;
  c.pcycle = l.cycles;
  JobSpec gpu = local;  // the pipeline cached: batches always ready (FastFlow's take(1).cache().repeat())
  gpu.data.source = DataSource::Synthetic;
  gpu.data.synthetic_batches = o.profile_steps;
  const pipeline::ImageTransformOptions& out = job.data.loader.transform;
  gpu.data.synthetic_bytes_per_sample =
      3ull * static_cast<std::uint64_t>(out.height) * static_cast<std::uint64_t>(out.width) * sizeof(float);
  c.gthp = profile(costs, gpu, o).thp;
  c.bottleneck = c.gthp / c.lthp > o.cpu_bottleneck_threshold;
  if (!c.bottleneck) return c;
  for (pipeline::PrepOffload off :
       {pipeline::PrepOffload::Decode, pipeline::PrepOffload::All, pipeline::PrepOffload::Read}) {
    JobSpec remote = job;
    remote.data.model.prep_service->offload = off;
    remote.data.model.prep_service->local_share = 0;
    const Profiled r = profile(costs, remote, o);
    const double freed = c.pcycle > 0 ? c.lthp * (1 - r.cycles / c.pcycle) : 0;
    c.candidates.push_back({off, r.thp, r.cycles, r.thp + freed});
  }
  const auto best = std::max_element(c.candidates.begin(), c.candidates.end(),
                                     [](const auto& a, const auto& b) { return a.calibrated < b.calibrated; });
  c.offload = best->offload;
  c.local_share = fastflow_local_ratio(c.gthp, c.lthp, best->rthp, c.pcycle, best->cycles);
  return c;
}

std::string FastFlowChoice::describe() const {
  if (!bottleneck)
    return fmt::format(
        "FastFlow: no offloading (throughput {:.2f} steps/s with the local pipeline, {:.2f} with "
        "batches always ready: no CPU bottleneck)",
        lthp, gthp);
  std::string each;
  for (const auto& k : candidates)
    each += fmt::format("{}{} {:.2f}", each.empty() ? "" : ", ", pipeline::to_string(k.offload), k.rthp);
  return fmt::format(
      "FastFlow: offload {}, {:.3f} of the batches local (steps/s: local {:.2f}, batches ready {:.2f}, "
      "remote {})",
      pipeline::to_string(offload), local_share, lthp, gthp, each);
}

}  // namespace gpemu
