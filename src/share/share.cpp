#include "gpemu/share.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <tuple>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "common/checked.h"
#include "common/host_memory.h"
#include "common/message_text.h"
#include "gpemu/calibration.h"
#include "gpemu/error.h"
#include "gpemu/report.h"
#include "gpemu/session.h"
#include "gpemu/sharing_policy.h"
#include "report/busy_union.h"
#include "report/configuration_rows.h"
#include "share/results.h"
#include "share/share_json.h"

namespace gpemu {

// A step's row as the edge writes it with per-step rows (its end and
// samples: --steps' JSON, the report's series), beside its record.
constexpr double kShareRowBytes = 16;

void validate(const ShareSpec& spec) {
  if (!spec.gpu) throw InputError("share: no GPU given; give one of 'gpemu devices'");
  if (spec.jobs.empty() || spec.jobs.size() > kMaxSharedJobs)
    throw InputError(fmt::format("share: {} jobs: give 1 to {}", spec.jobs.size(), kMaxSharedJobs));
  if (spec.cpu_cores < 0)
    throw InputError(
        fmt::format("share: {} CPU cores: give a positive count, or 0 for this machine's", spec.cpu_cores));
  if (spec.utilization_window <= 0)
    throw InputError(fmt::format("share: utilisation window {} ns: it must be positive", spec.utilization_window));
  // With per-step rows every step of every job keeps its records (the job's
  // RunRecord, its kernels' spans, the result's step ends) until the run
  // ends: about 300 bytes a step. The steps in all are bounded so that the
  // records fit (a jobs file's bound too).
  double steps = 0;
  for (const SharedJobSpec& j : spec.jobs) steps += static_cast<double>(planned_share_steps(j));
  if (steps > static_cast<double>(kMaxSharedSteps)) {
    std::string each;
    for (std::size_t i = 0; i < spec.jobs.size() && each.size() < 200; ++i)
      each += fmt::format("{}'{}' {}", each.empty() ? "" : ", ", one_line_message(spec.jobs[i].name),
                          planned_share_steps(spec.jobs[i]));
    throw InputError(fmt::format(
        "share: the jobs' iterations come to {:.0f} steps in all ({}); accepted: at most {} in all (a record of "
        "each step is kept, about 300 bytes)",
        steps, each, kMaxSharedSteps));
  }
  // Within that bound, what per-step rows keep must still fit in what this
  // process may allocate now (ulimit -v, the machine's free memory): refused
  // up front, not ended by std::bad_alloc.
  if (spec.per_step) {
    double need = 0;
    for (const SharedJobSpec& j : spec.jobs) {
      JobSpec kept = j.job;
      kept.record.steps = kept.record.kernels = true;
      const auto planned = planned_share_steps(j);
      need += kept_record_bytes(kept, planned) + kShareRowBytes * static_cast<double>(planned);
    }
    const double have = allocatable_bytes();
    if (need >= 64.0 * (1 << 20) && have > 0 && need > have)
      throw InputError(
          fmt::format("share: the jobs' {:.0f} steps keep a record each with per-step rows (--steps, --report), "
                      "{:.2f} GB in all, more than this process can allocate now ({:.2f} GB: the machine's available "
                      "memory or ulimit -v); accepted: fewer iterations, or no per-step rows",
                      steps, need / 1e9, have / 1e9));
  }
  // The policy's own checks (a card without MIG, a bad quantum), on a scratch GPU.
  const std::unique_ptr<Clock> scratch_clock = make_virtual_clock();
  Timeline scratch_timeline(*scratch_clock);
  SharedGpu scratch(scratch_timeline, *spec.gpu, spec.options);
  std::set<std::string, std::less<>> names;
  for (std::size_t i = 0; i < spec.jobs.size(); ++i) {
    const SharedJobSpec& j = spec.jobs[i];
    const std::string who = fmt::format("share: job {} ('{}')", i + 1, one_line_message(j.name));
    if (!names.insert(j.name).second) throw InputError(fmt::format("{}: the name is taken by an earlier job", who));
    // Names are printed in tables on a terminal.
    if (has_control_characters(j.name))
      throw InputError(fmt::format("{}: the name holds control characters; give printable text", who));
    if (j.arrival < 0) throw InputError(fmt::format("{}: arrival {} ns is before the start", who, j.arrival));
    if (!j.after.empty() && (j.after == j.name || !names.contains(j.after)))
      throw InputError(fmt::format("{}: after '{}': name an earlier job (a queue runs in the spec's order)", who,
                                   one_line_message(j.after)));
    if (sharing_policy(spec.options.policy).slices()) {
      if (j.mig.empty())
        throw InputError(
            fmt::format("{}: policy mig needs each job's slice ('mig': a profile of the {})", who, spec.gpu->id));
      try {
        // MIG slices are set up before the jobs run: they must all fit at once.
        scratch.take_slice(j.mig);
      } catch (const InputError& e) {
        throw InputError(fmt::format("{}: {}", who, e.what()));
      }
    } else if (!j.mig.empty()) {
      throw InputError(
          fmt::format("{}: 'mig' ({}) is for policy mig, not {}", who, j.mig, to_string(spec.options.policy)));
    }
    try {
      JobSpec probe = j.job;
      probe.cluster.gpu = spec.gpu;
      probe.cluster.gpus = 1;
      validate(probe);
    } catch (const InputError& e) {
      throw InputError(fmt::format("{}: {}", who, e.what()));
    }
  }
}

Duration utilization_window_for(Time makespan, Duration asked) {
  if (asked <= 0 || makespan / asked < static_cast<Time>(kMaxUtilizationWindows)) return asked;
  const Time widen = makespan / asked / static_cast<Time>(kMaxUtilizationWindows) + 1;
  return asked * widen;
}

std::int64_t planned_share_steps(const SharedJobSpec& j) {
  const JobSpec& job = j.job;
  if (job.data.source == DataSource::Synthetic) return std::max<std::int64_t>(0, job.data.synthetic_batches);
  const double per_epoch = std::ceil(static_cast<double>(job.data.dataset.size()) / std::max(1, job.batch_size));
  double steps = per_epoch * static_cast<double>(job.schedule.epochs);
  if (job.schedule.max_iterations >= 0) steps = std::min(steps, static_cast<double>(job.schedule.max_iterations));
  return steps >= 9e18 ? std::numeric_limits<std::int64_t>::max() : static_cast<std::int64_t>(steps);
}

namespace {

// Every job's kernels, as they settle, into the union of the GPU's busy
// time (flat in steps: busy_union.h).
class KernelUnion final : public RecordSink {
 public:
  explicit KernelUnion(Duration window) : union_(window) {}
  void on_kernel(int, const KernelSpan& k) override {
    std::lock_guard lock(mu_);  // the jobs' host threads (real clock)
    union_.add(k.start, k.end);
  }
  const BusyUnion& busy() const { return union_; }

 private:
  std::mutex mu_;
  BusyUnion union_;
};

}  // namespace

// ---- a job's figures, from its record ----

namespace {
const RankRecord* only_rank(const RunRecord& r) { return r.ranks.empty() ? nullptr : &r.ranks.front(); }
}  // namespace

std::int64_t SharedJobResult::iterations() const {
  const RankRecord* rank = only_rank(record);
  return rank ? rank->iterations : 0;
}
std::int64_t SharedJobResult::samples() const {
  const RankRecord* rank = only_rank(record);
  return rank ? rank->train.samples : 0;
}
Duration SharedJobResult::compute_busy() const {
  const RankRecord* rank = only_rank(record);
  return rank ? rank->compute_busy : 0;
}
std::uint64_t SharedJobResult::peak_allocated_bytes() const {
  const RankRecord* rank = only_rank(record);
  return rank ? rank->peak_allocated_bytes : 0;
}
std::uint64_t SharedJobResult::peak_reserved_bytes() const {
  const RankRecord* rank = only_rank(record);
  return rank ? rank->peak_reserved_bytes : 0;
}
std::span<const KernelSpan> SharedJobResult::kernels() const {
  const RankRecord* rank = only_rank(record);
  return rank ? std::span<const KernelSpan>(rank->compute_intervals) : std::span<const KernelSpan>();
}
std::vector<Time> SharedJobResult::step_ends() const {
  std::vector<Time> out;
  for (const StepRecord& s : record.steps)
    if (s.phase == RunPhase::Train) out.push_back(s.step_end);
  return out;
}
std::vector<std::int64_t> SharedJobResult::step_samples() const {
  std::vector<std::int64_t> out;
  for (const StepRecord& s : record.steps)
    if (s.phase == RunPhase::Train) out.push_back(s.samples);
  return out;
}
double SharedJobResult::jct_s() const { return to_seconds(end - arrival); }
double SharedJobResult::samples_per_s() const {
  const double jct = jct_s();
  return jct > 0 ? static_cast<double>(samples()) / jct : 0;
}
double SharedJobResult::gpu_share_pct() const {
  const double jct = jct_s();
  return jct > 0 ? 100.0 * to_seconds(compute_busy()) / jct : 0;
}

namespace share_detail {

void check_fits_clock(const ShareSpec& spec, const std::vector<StepCost>& steps) {
  // The longest the run can take: every arrival and every step one after
  // the other (a queue of 'after' jobs, or FIFO). It must fit the emulated
  // clock (int64 ns), with the same margin as DLIO's runs.
  double total_s = 0, longest_s = -1;
  std::size_t longest = 0;
  for (std::size_t i = 0; i < spec.jobs.size(); ++i) {
    const SharedJobSpec& j = spec.jobs[i];
    const double step_s = j.job.compute.step_time == StepTime::CostModel
                              ? to_seconds(steps[i].forward + steps[i].backward)
                              : j.job.compute.fixed_train.expected();
    const double job_s = to_seconds(j.arrival) + step_s * static_cast<double>(planned_share_steps(j));
    total_s += job_s;
    if (job_s > longest_s) longest_s = job_s, longest = i;
  }
  if (total_s > kClockRangeSeconds / 4)
    throw InputError(fmt::format(
        "share: the jobs' arrivals and steps add up to {:.3g} s of emulated time (job {} ('{}'): {:.3g} s); "
        "accepted: a run that fits the emulated clock, at most {:.3g} s (73 years); give fewer iterations or "
        "shorter steps",
        total_s, longest + 1, one_line_message(spec.jobs[longest].name), longest_s, kClockRangeSeconds / 4));
}

std::vector<StepCost> model_steps(const CostModel& costs, const ShareSpec& spec) {
  std::vector<StepCost> steps(spec.jobs.size());
  for (std::size_t i = 0; i < spec.jobs.size(); ++i) {
    const SharedJobSpec& j = spec.jobs[i];
    if (j.job.compute.step_time != StepTime::CostModel) continue;
    try {
      steps[i] = (j.costs ? *j.costs : costs).step_cost(*spec.gpu, j.job.compute.model.name, j.job.batch_size);
    } catch (const InputError& e) {
      throw InputError(fmt::format("share: job {} ('{}'): {}", i + 1, one_line_message(j.name), e.what()));
    }
  }
  return steps;
}

SharedJobResult start_result(const SharedJobSpec& js, const GpuSpec& gpu) {
  SharedJobResult r;
  r.name = js.name;
  r.priority = js.priority;
  r.mig = js.mig;
  r.arrival = js.arrival;
  r.end = js.arrival;
  RunRecord& rec = r.record;
  if (js.job.compute.step_time == StepTime::CostModel) rec.model = canonical_model_name(js.job.compute.model.name);
  rec.gpu = gpu.id;
  rec.batch_size = js.job.batch_size;
  rec.step_time = js.job.compute.step_time;
  return r;
}

SessionJob session_job(const SharedJobSpec& js, int gpu) {
  SessionJob j;
  j.name = js.name;
  j.job = js.job;
  j.arrival = js.arrival;
  j.gpu = gpu;
  j.priority = js.priority;
  j.mig = js.mig;
  j.costs = js.costs;
  return j;
}

SharedJobResult job_result(const SharedJobSpec& js, const GpuSpec& gpu, JobOutcome outcome) {
  SharedJobResult r = start_result(js, gpu);
  r.arrival = outcome.arrival;
  r.end = outcome.end;
  r.error = std::move(outcome.error);
  if (outcome.record) r.record = std::move(*outcome.record);
  return r;
}

void sum_up(ShareResult& out) {
  double jct = 0;
  int finished = 0;
  for (const SharedJobResult& r : out.jobs) {
    out.makespan = std::max(out.makespan, r.end);
    if (r.error.empty()) {
      jct += r.jct_s();
      ++finished;
    }
  }
  out.mean_jct_s = finished > 0 ? jct / finished : 0;
  out.jobs_finished = finished;
}

}  // namespace share_detail

using namespace share_detail;

void give_cost_models(ShareSpec& spec, const std::optional<std::filesystem::path>& profiles) {
  for (SharedJobSpec& j : spec.jobs) {
    ModelSpec& m = j.job.compute.model;
    try {
      if (!j.torch.empty()) apply_torch_preset(m, torch_preset(j.torch, "torch"));
      if (!j.host.empty()) m.host = find_host(j.host, "host");
    } catch (const InputError& e) {
      throw InputError(fmt::format("job '{}': {}", j.name, e.what()));
    }
    j.torch.clear();
    j.host.clear();
  }
  // One cost model per program (a job's precision, optimizer, zero_grad,
  // sequence length, variant, host and how its steps are issued).
  std::map<std::string, std::shared_ptr<const CostModel>> made;
  for (SharedJobSpec& j : spec.jobs) {
    if (j.costs) continue;
    const ModelSpec& m = j.job.compute.model;
    const std::string key =
        fmt::format("{}|{}|{}|{}|{}|{}|{}", zoo::to_string(m.precision), zoo::to_string(m.optimizer), m.keep_grads,
                    m.seq_len, describe(program_variant(m)), m.host ? m.host->name : "", to_string(m.sync));
    auto& c = made[key];
    if (!c) c = job_cost_model(m, profiles);
    j.costs = c;
  }
}

ShareResult run_shared(Clock& clock, const CostModel& costs, const ShareSpec& spec) {
  validate(spec);
  const std::vector<StepCost> step_costs = model_steps(costs, spec);  // an unknown model is refused here
  check_fits_clock(spec, step_costs);
  // One GPU, every job pinned to it from its arrival; the machine's cores
  // and disk, which the jobs' loaders share while they run.
  SessionSpec world;
  world.gpu = spec.gpu;
  world.share = spec.options;
  world.placement = placement_policy("pinned");
  world.cpu_cores_per_node = spec.cpu_cores;
  world.data_storage = spec.storage;
  world.trace = spec.trace;
  Session session(clock, costs, world);
  KernelUnion kernels(spec.utilization_window);
  std::map<std::string, JobId, std::less<>> id_of;
  for (const SharedJobSpec& js : spec.jobs) {
    SessionJob j = session_job(js, 0);
    j.job.record.steps = j.job.record.kernels = spec.per_step;
    j.job.record.sink = &kernels;
    if (!js.after.empty()) j.after = id_of.at(js.after);  // a queue: its arrival counts from that job's end
    id_of.emplace(js.name, session.add_job(std::move(j)));
  }
  session.run();

  ShareResult out;
  out.gpu = spec.gpu->id;
  out.policy = spec.options.policy;
  out.options = spec.options;
  out.clock = std::string(clock.name());
  out.utilization_window = spec.utilization_window;
  out.memory_capacity_bytes = session.gpu(0).memory().capacity();
  for (std::size_t i = 0; i < spec.jobs.size(); ++i)
    out.jobs.push_back(job_result(spec.jobs[i], *spec.gpu, session.take_outcome(static_cast<JobId>(i))));

  sum_up(out);
  // At most kMaxUtilizationWindows windows: a longer run's windows are
  // widened (to a whole number of the asked window) and the result says so.
  // Each is the share of its time in which some kernel ran.
  out.utilization_window = utilization_window_for(out.makespan, spec.utilization_window);
  const std::vector<Duration> busy = kernels.busy().busy(out.makespan, out.utilization_window);
  Duration all = 0;
  for (std::size_t k = 0; k < busy.size(); ++k) {
    const Time w0 = static_cast<Time>(k) * out.utilization_window;
    const Duration length = std::min(w0 + out.utilization_window, out.makespan) - w0;
    out.utilization_pct.push_back(100.0 * (static_cast<double>(busy[k]) / static_cast<double>(length)));
    all += busy[k];
  }
  out.mean_utilization_pct =
      out.makespan > 0 ? 100.0 * (static_cast<double>(all) / static_cast<double>(out.makespan)) : 0;
  out.peak_memory_used_bytes = session.gpu(0).memory().peak_used();
  if (spec.trace) {
    out.trace = session.timeline().trace_records();
    out.host_spans = session.timeline().host_spans();
    for (std::size_t i = 0; i < spec.jobs.size(); ++i)
      out.trace_devices.push_back({static_cast<int>(i), fmt::format("job {} on {} ({})", spec.jobs[i].name,
                                                                    spec.gpu->id, to_string(spec.options.policy))});
  }
  return out;
}

nlohmann::json shared_job_json(const SharedJobResult& j, bool with_steps) {
  nlohmann::json o = {{"name", j.name},
                      {"model", j.model().empty() ? nlohmann::json() : nlohmann::json(j.model())},
                      {"batch_size", j.batch_size()},
                      {"priority", j.priority},
                      {"mig", j.mig.empty() ? nlohmann::json() : nlohmann::json(j.mig)},
                      {"arrival_s", to_seconds(j.arrival)},
                      {"end_s", to_seconds(j.end)},
                      {"jct_s", j.jct_s()},
                      {"iterations", j.iterations()},
                      {"samples", j.samples()},
                      {"samples_per_s", j.samples_per_s()},
                      {"gpu_share_pct", j.gpu_share_pct()},
                      {"peak_allocated_bytes", j.peak_allocated_bytes()},
                      {"peak_reserved_bytes", j.peak_reserved_bytes()},
                      {"finished", j.error.empty()},
                      {"error", j.error.empty() ? nlohmann::json() : nlohmann::json(j.error)}};
  if (with_steps) {
    nlohmann::json ends = nlohmann::json::array();
    for (const Time t : j.step_ends()) ends.push_back(to_seconds(t));
    o["steps"] = {{"end_s", std::move(ends)}, {"samples", j.step_samples()}};
  }
  return o;
}

nlohmann::json share_json(const ShareResult& r, bool with_steps) {
  nlohmann::json jobs = nlohmann::json::array();
  for (const SharedJobResult& j : r.jobs) jobs.push_back(shared_job_json(j, with_steps));
  nlohmann::json out = {{"gpu", r.gpu},
                        {"policy", to_string(r.policy)},
                        {"clock", r.clock},
                        {"makespan_s", to_seconds(r.makespan)},
                        {"mean_jct_s", r.jobs_finished > 0 ? nlohmann::json(r.mean_jct_s) : nlohmann::json()},
                        {"jobs_finished", r.jobs_finished},
                        {"mean_utilization_pct", r.mean_utilization_pct},
                        {"memory_capacity_bytes", r.memory_capacity_bytes},
                        {"peak_memory_used_bytes", r.peak_memory_used_bytes},
                        {"utilization", {{"window_s", to_seconds(r.utilization_window)}, {"pct", r.utilization_pct}}},
                        {"jobs", std::move(jobs)}};
  if (r.policy == SharePolicy::TimeSlice)
    out["timeslice"] = {{"quantum_s", to_seconds(r.options.timeslice)},
                        {"switch_s", to_seconds(r.options.switch_cost)}};
  return out;
}

std::string mean_jct_text(const ShareResult& r) {
  if (r.jobs_finished == 0) return "none: no job finished";
  return fmt::format("{:.2f} s ({} of {} jobs finished)", r.mean_jct_s, r.jobs_finished, r.jobs.size());
}

RunReport share_report(const ShareResult& r) {
  RunReport rep;
  rep.title = fmt::format("{} jobs sharing one emulated {} ({})", r.jobs.size(), r.gpu, to_string(r.policy));
  rep.summary = {{"GPU", r.gpu},
                 {"policy", std::string(to_string(r.policy))},
                 {"clock", r.clock},
                 {"makespan", fmt::format("{:.2f} s", to_seconds(r.makespan))},
                 {"mean JCT", mean_jct_text(r)},
                 {"GPU utilisation", fmt::format("{:.1f} % (a kernel running)", r.mean_utilization_pct)}};
  if (!sharing_policy(r.policy).slices())
    rep.summary.push_back({"GPU memory", fmt::format("peak {:.0f} MiB of {:.0f} MiB",
                                                     static_cast<double>(r.peak_memory_used_bytes) / 1048576.0,
                                                     static_cast<double>(r.memory_capacity_bytes) / 1048576.0)});
  std::vector<BusyInterval> all;
  for (const SharedJobResult& j : r.jobs) {
    const double kernels_s = j.gpu_share_pct() / 100 * j.jct_s();
    rep.breakdown.push_back(
        {j.name, {{"kernels (time alone)", kernels_s}, {"waiting and other", j.jct_s() - kernels_s}}});
    for (const KernelSpan& k : j.kernels()) all.push_back({k.start, k.end});
    if (!j.error.empty()) rep.notes.push_back(fmt::format("{} ended early: {}", j.name, j.error));
  }
  rep.utilization.push_back(utilization_from_intervals("GPU (all jobs)", all, r.utilization_window, 0, r.makespan));
  for (const SharedJobResult& j : r.jobs) {
    std::vector<BusyInterval> mine;
    for (const KernelSpan& k : j.kernels()) mine.push_back({k.start, k.end});
    rep.utilization.push_back(utilization_from_intervals(j.name, mine, r.utilization_window, 0, r.makespan));
    BatchSeries steps{fmt::format("{}: step time", j.name), "ms", {}, 1};
    const std::vector<Time> ends = j.step_ends();
    for (std::size_t i = 1; i < ends.size(); ++i) steps.values.push_back(to_seconds(ends[i] - ends[i - 1]) * 1e3);
    if (!steps.values.empty()) rep.per_batch.push_back(std::move(steps));
  }
  nlohmann::json config = share_json(r);
  config.erase("utilization");
  config.erase("jobs");
  rep.configuration = configuration_rows(config);
  return rep;
}

}  // namespace gpemu
