// `gpemu share --connect` (serve.h, run_shared_remote): a jobs file's jobs as
// clients of a running `gpemu serve`, each sending its job for the server to
// run as `gpemu share` runs it in one process.
#include <algorithm>
#include <chrono>
#include <filesystem>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "common/message_text.h"
#include "gpemu/error.h"
#include "gpemu/share.h"
#include "share/job_entry.h"
#include "share/results.h"
#include "share/serve.h"

namespace gpemu {

namespace {

// The first thing a jobs file can say, or the job needs, that `sent` lost on
// its way through its entry (`back`, read as the server reads it); "" when
// nothing: a served job is what its entry says.
std::string lost_in_entry(const SharedJobSpec& sent, const SharedJobSpec& back) {
  const JobSpec &a = sent.job, &b = back.job;
  const ModelSpec &ma = a.compute.model, &mb = b.compute.model;
  const std::pair<const char*, bool> same[] = {
      {"the model", ma.name == mb.name},
      {"the precision", ma.precision == mb.precision},
      {"the optimizer", ma.optimizer == mb.optimizer},
      {"zero_grad (keep_grads)", ma.keep_grads == mb.keep_grads},
      {"keep_output", ma.keep_output == mb.keep_output},
      {"the sequence length", ma.seq_len == mb.seq_len},
      {"a program variant", ma.variant.has_value() == mb.variant.has_value()},
      {"a host profile (give ShareSpec's host, by name or file)", ma.host.has_value() == mb.host.has_value()},
      {"how steps are issued (sync)", ma.sync == mb.sync},
      {"the step time", a.compute.step_time == b.compute.step_time && a.compute.fixed_train == b.compute.fixed_train},
      {"what the step does (copy, allocator, loss.item())", a.compute.copy_batch == b.compute.copy_batch &&
                                                                a.compute.use_allocator == b.compute.use_allocator &&
                                                                a.compute.sync == b.compute.sync},
      {"the variation", a.compute.variation.cv == b.compute.variation.cv},
      {"the batches", a.batch_size == b.batch_size && a.data.synthetic_batches == b.data.synthetic_batches &&
                          a.data.synthetic_bytes_per_sample == b.data.synthetic_bytes_per_sample},
      {"the schedule",
       a.schedule.epochs == b.schedule.epochs && a.schedule.max_iterations == b.schedule.max_iterations},
      {"torch", sent.torch == back.torch}};
  for (const auto& [what, equal] : same)
    if (!equal) return what;
  return "";
}

// A count or time of a "job" reply; Error for anything else (not a reply of gpemu serve's).
std::int64_t reply_count(const nlohmann::json& reply, const char* key) {
  const auto v = reply.find(key);
  if (v == reply.end() || !v->is_number_integer() || v->get<std::int64_t>() < 0)
    throw Error(fmt::format("gpemu serve: a job reply whose '{}' is not a count or time ({})", key,
                            v == reply.end() ? "none" : one_line_message(v->dump()).substr(0, 60)));
  return v->get<std::int64_t>();
}

// The job's result from its "job" reply (and the pages of its step ends),
// in the client's times: the server's start of it is the job's arrival. Its
// record holds what the reply carries: its rank's totals and train steps.
void take_served_job(ServeClient& client, const nlohmann::json& reply, SharedJobResult& r) {
  const Time start = reply_count(reply, "start_ns"), end = reply_count(reply, "end_ns");
  if (end < start)
    throw Error(fmt::format("gpemu serve: a job reply that ends ({}) before it starts ({})", end, start));
  RankRecord rank;
  rank.iterations = reply_count(reply, "iterations");
  rank.train.samples = reply_count(reply, "samples");
  rank.compute_busy = reply_count(reply, "compute_busy_ns");
  rank.peak_allocated_bytes = static_cast<std::uint64_t>(reply_count(reply, "peak_allocated_bytes"));
  rank.peak_reserved_bytes = static_cast<std::uint64_t>(reply_count(reply, "peak_reserved_bytes"));
  if (const auto e = reply.find("error"); e != reply.end() && !e->is_null())
    r.error = e->is_string() ? e->get<std::string>() : "the server's error is not text";
  const auto steps = static_cast<std::size_t>(reply_count(reply, "steps"));
  if (steps > static_cast<std::size_t>(rank.iterations))
    throw Error(fmt::format("gpemu serve: a job reply of {} steps for {} iterations", steps, rank.iterations));
  std::vector<StepRecord>& kept = r.record.steps;
  const Time shift = r.arrival - start;
  for (nlohmann::json page = reply;;) {
    const auto ends = page.find("step_end_ns"), samples = page.find("step_samples");
    if (ends == page.end() || samples == page.end() || !ends->is_array() || !samples->is_array() ||
        ends->size() != samples->size() || (ends->empty() && kept.size() < steps) || kept.size() + ends->size() > steps)
      throw Error("gpemu serve: a job reply whose step ends do not match its steps");
    for (std::size_t i = 0; i < ends->size(); ++i) {
      const nlohmann::json& t = (*ends)[i];
      if (!t.is_number_integer() || t.get<Time>() < start || t.get<Time>() > end ||
          (!kept.empty() && t.get<Time>() + shift < kept.back().step_end) || !(*samples)[i].is_number_integer())
        throw Error("gpemu serve: a job reply whose step ends are not in order within the job");
      StepRecord& s = kept.emplace_back();
      s.iteration = static_cast<std::int64_t>(kept.size()) - 1;
      s.index = kept.size() - 1;
      s.step_end = t.get<Time>() + shift;
      s.samples = (*samples)[i].get<std::int64_t>();
    }
    if (kept.size() == steps) break;
    page = client.call({{"op", "job_steps"}, {"from", kept.size()}});
  }
  r.record.ranks = {std::move(rank)};
  r.end = end + shift;
}

}  // namespace

ShareResult run_shared_remote(const std::filesystem::path& socket, ShareSpec spec,
                              const std::optional<std::filesystem::path>& profiles) {
  if (spec.jobs.empty() || spec.jobs.size() > kMaxSharedJobs)
    throw InputError(fmt::format("share --connect: {} jobs: give 1 to {}", spec.jobs.size(), kMaxSharedJobs));
  for (const SharedJobSpec& j : spec.jobs)
    if (!j.after.empty() || j.job.data.source != DataSource::Synthetic)
      throw InputError(fmt::format(
          "share --connect: job '{}': 'after' and 'dataset' run in one process only (gpemu share without --connect); "
          "a server's clients are in-memory steps",
          one_line_message(j.name)));
  // Each job as the server will read it: its jobs-file entry, checked here
  // (what the entry cannot say; then the models, torch and host on the
  // server's card) before any job connects.
  std::vector<nlohmann::json> entries;
  for (const SharedJobSpec& j : spec.jobs) {
    entries.push_back(share_detail::job_entry_json(j));
    const std::string lost = lost_in_entry(j, share_detail::parse_job_entry(entries.back(), "share --connect"));
    if (!lost.empty())
      throw InputError(fmt::format(
          "share --connect: job '{}': {} is not what a jobs file's job says; a server runs a jobs file's jobs",
          one_line_message(j.name), lost));
  }
  {
    // The server's card and policy.
    const nlohmann::json gpus = served_gpus(socket);
    spec.gpu = &find_gpu(gpus[0]["id"].get<std::string>());
    spec.options.policy = parse_share_policy(gpus[0]["policy"].get<std::string>());
  }
  {
    ShareSpec checked = spec;
    give_cost_models(checked, profiles);
    (void)share_detail::model_steps(*checked.jobs.front().costs, checked);  // on the server's card
  }
  ShareResult out;
  out.gpu = spec.gpu->id;
  out.policy = spec.options.policy;
  out.options = spec.options;
  out.clock = "real";
  out.jobs.resize(spec.jobs.size());
  double planned = 0;  // each step's end is kept, as in run_shared
  for (const SharedJobSpec& j : spec.jobs) planned += static_cast<double>(planned_share_steps(j));
  if (planned > static_cast<double>(kMaxSharedSteps))
    throw InputError(
        fmt::format("share --connect: the jobs' iterations come to {:.0f} steps in all; accepted: at "
                    "most {} in all",
                    planned, kMaxSharedSteps));
  std::optional<std::string> folder;
  if (profiles) folder = std::filesystem::absolute(*profiles).string();  // the server may run in another folder
  const auto t0 = std::chrono::steady_clock::now();
  std::vector<std::thread> threads;
  for (std::size_t i = 0; i < spec.jobs.size(); ++i) {
    threads.emplace_back([&, i] {
      const SharedJobSpec& js = spec.jobs[i];
      SharedJobResult& r = out.jobs[i];
      r = share_detail::start_result(js, *spec.gpu);
      std::this_thread::sleep_until(t0 + std::chrono::nanoseconds(js.arrival));
      try {
        ServeClient client(socket, ClientHello{js.name, 0, js.priority, js.mig});
        if (client.hello_reply().value("protocol", 1) < kServeProtocol)
          throw Error(fmt::format(
              "gpemu serve at {} runs no jobs (its protocol is older than this client's); restart it with this gpemu",
              socket.string()));
        nlohmann::json request = {{"op", "job"}, {"job", entries[i]}, {"steps", spec.per_step}};
        if (folder) request["profiles"] = *folder;
        take_served_job(client, client.call(request), r);
      } catch (const std::exception& e) {
        r.error = e.what();
      }
    });
  }
  for (auto& t : threads) t.join();
  share_detail::sum_up(out);
  return out;
}

}  // namespace gpemu
