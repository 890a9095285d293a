// A Philly-derived trace as Synergy's generator defines it (cluster.h): the
// laws of msr-fiddle/synergy@1bb2bed6 simulator/helpers/utils.py
// (poisson_next_arrival_time, get_job_gpu_demand, get_gavel_like_iter), which
// repeat Gavel's (stanford-futuredata/gavel scheduler/utils.py,
// generate_job's duration law), drawn from gpemu's own seeded RNG.
#include <cmath>

#include <fmt/format.h>

#include "common/random.h"
#include "gpemu/cluster.h"
#include "gpemu/error.h"
#include "gpemu/zoo.h"

namespace gpemu::cluster {

Trace generate_trace(const TraceOptions& o) {
  if (o.jobs < 1 || o.jobs > 10'000'000)
    throw InputError(fmt::format("--jobs {}: expected 1 to 10,000,000 jobs", o.jobs));
  if (!(o.jobs_per_hour > 0) || !std::isfinite(o.jobs_per_hour))
    throw InputError(fmt::format("--load {}: expected a positive number of jobs per hour", o.jobs_per_hour));
  if (o.models.empty()) throw InputError("--models: expected at least one model:batch");
  if (o.users < 1) throw InputError(fmt::format("--users {}: expected at least 1", o.users));
  for (const auto& m : o.models)
    if (!zoo::has_model(m.name))
      throw InputError(fmt::format("--models: '{}' is not a model of the zoo (gpemu models lists them)", m.name));
  common::Rng rng(common::mix_seed(o.seed, 0x7472616365ULL));
  Trace t;
  t.jobs.reserve(static_cast<std::size_t>(o.jobs));
  double arrival = 0;
  for (std::int64_t i = 0; i < o.jobs; ++i) {
    TraceJob j;
    j.id = fmt::format("job{}", i + 1);
    if (!o.static_arrivals) {
      // Exponential inter-arrival in hours at the load, rounded up to whole
      // seconds (poisson_next_arrival_time); the first job comes after one too.
      const double hours = -std::log(common::unit_open_closed(rng.next())) / o.jobs_per_hour;
      arrival += std::ceil(hours * 3600);
    }
    j.arrival_s = arrival;
    const double g = rng.uniform();  // get_job_gpu_demand
    j.gpus = g >= 0.95 ? 8 : g >= 0.8 ? 4 : g >= 0.7 ? 2 : 1;
    j.gpus = std::min(j.gpus, o.max_gpus);
    // get_gavel_like_iter: seconds at the job's fair-share speed.
    const bool long_job = rng.uniform() >= 0.8;
    j.duration_s = std::round(60 * std::pow(10.0, long_job ? rng.uniform(3, 4) : rng.uniform(1.5, 3)));
    const auto& m = o.models[rng.below(o.models.size())];
    j.model = m.name;
    j.model_spec.name = zoo::canonical_name(m.name);
    j.batch = m.batch;
    if (m.reads_dataset) j.dataset = o.dataset;
    j.user = fmt::format("user{}", rng.below(static_cast<std::uint64_t>(o.users)) + 1);
    t.jobs.push_back(std::move(j));
  }
  return t;
}

}  // namespace gpemu::cluster
