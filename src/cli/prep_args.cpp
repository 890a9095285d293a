#include "cli/prep_args.h"

#include <filesystem>

#include <fmt/format.h>

#include "cli/option_checks.h"
#include "gpemu/error.h"
#include "gpemu/interconnect.h"
#include "gpemu/prep_serve.h"
#include "gpemu/prep_service.h"

namespace gpemu::cli {

void add_prep_options(CLI::App* cmd, PrepArgs& a) {
  CLI::Option* workers =
      cmd->add_option("--prep-workers", a.workers,
                      "Modelled loader: remote preprocessing workers (tf.data service's), each with --prep-worker-cpus "
                      "cores of its own; 0: none")
          ->check(whole_number_in(0, 4096));
  cmd->add_option("--prep-worker-cpus", a.cpus_per_worker, "CPU cores of each remote preprocessing worker")
      ->needs(workers)
      ->capture_default_str()
      ->check(whole_number_in(1, 4096));
  cmd->add_option("--prep-offload", a.offload,
                  "What the remote workers run: none, read (they read and send the files; the client decodes and "
                  "batches), decode (they also decode and augment; the client batches), all (they send batches), or "
                  "fastflow (FastFlow's policy profiles the job and chooses, with a local share)")
      ->capture_default_str();
  cmd->add_option("--prep-local-share", a.local_share,
                  "Share of the batches the client makes whole itself beside the workers (FastFlow's ratio_local)")
      ->needs(workers)
      ->capture_default_str()
      ->check(finite_number_in(0, 1));
  cmd->add_option("--prep-network", a.network,
                  "Network between the workers and the client: 10gbe, 25gbe, 100gbe, 400gbe or a JSON file (default: "
                  "--network)")
      ->needs(workers);
  cmd->add_option("--prep-worker-buffer", a.worker_buffer,
                  "Finished batches a remote worker holds that the client has not taken")
      ->needs(workers)
      ->capture_default_str()
      ->check(whole_number_in(1, 1 << 20));
  cmd->add_option("--prep-service", a.service,
                  "Real clock: take the batches from a running 'gpemu prep serve' at HOST:PORT, its workers running "
                  "--prep-offload read, decode or all of the pipeline");
  cmd->add_option("--prep-data", a.service_data,
                  "With --prep-service: the dataset folder as the service's workers see it (default: --data's)");
  cmd->add_option("--image-size", a.image_size,
                  "The loader's output images, N x N pixels (default: 224, RandomResizedCrop's)")
      ->check(whole_number_in(1, 1 << 15));
}

namespace {

// --prep-service: the real-clock loader's batches from a running service.
void use_prep_service(const PrepArgs& a, JobSpec& spec) {
  if (a.workers > 0)
    throw InputError(
        "--prep-service takes batches from a running service and --prep-workers models one: give one of them");
  const auto [host, port] = prep::parse_host_port(a.service);
  if (a.offload != "read" && a.offload != "decode" && a.offload != "all")
    throw InputError(fmt::format(
        "--prep-service needs --prep-offload read, decode or all (what the service's workers run), not '{}'",
        a.offload));
  if (spec.data.source != DataSource::Loader)
    throw InputError(
        "--prep-service feeds the real-clock loader: give --clock real and --data DIR (the modelled service under "
        "--clock virtual is --prep-workers)");
  if (spec.cluster.gpus > 1) throw InputError("--prep-service serves one training process: give --gpus 1");
  if (spec.data.loader.gpu_decode || spec.data.loader.cache || spec.data.cold)
    throw InputError(
        "--prep-service: the service's workers read and decode the images, so --decode gpu, --cache-bytes and "
        "--cold do not apply");
  prep::PrepClientOptions o;
  o.host = host;
  o.port = port;
  const pipeline::LoaderOptions& lo = spec.data.loader;
  o.job.dataset = a.service_data.empty() ? std::filesystem::absolute(spec.data.dataset.root).string() : a.service_data;
  o.job.batch_size = static_cast<std::size_t>(spec.batch_size);
  o.job.seed = lo.seed;
  o.job.shuffle = lo.shuffle;
  o.job.drop_last = lo.drop_last;
  o.job.offload = pipeline::parse_prep_offload(a.offload);
  o.job.transform = lo.transform;
  o.job.jpeg_validation = lo.jpeg_validation;
  o.local_workers = std::max(lo.num_workers, 1);
  o.prefetch_factor = lo.prefetch_factor;
  spec.data.source = DataSource::Custom;
  spec.data.custom = [o](int, Clock& clock, Timeline&) -> std::unique_ptr<pipeline::BatchSource> {
    return std::make_unique<prep::PrepServiceSource>(clock, o);
  };
}

}  // namespace

std::optional<FastFlowChoice> apply_prep_args(const PrepArgs& a, const std::string& job_network, const CostModel& costs,
                                              JobSpec& spec, std::vector<std::string>& notes) {
  if (a.image_size > 0) {
    spec.data.loader.transform.height = a.image_size;
    spec.data.loader.transform.width = a.image_size;
  }
  if (!a.service.empty()) {
    use_prep_service(a, spec);
    return std::nullopt;
  }
  if (!a.service_data.empty())
    throw InputError("--prep-data names the folder a running service reads: give --prep-service too");
  const bool fastflow = a.offload == "fastflow";
  pipeline::PrepOffload offload = pipeline::PrepOffload::All;
  if (!fastflow) try {
      offload = pipeline::parse_prep_offload(a.offload);
    } catch (const InputError&) {
      throw InputError(fmt::format(
          "unknown --prep-offload '{}': accepted none, read, decode, all, or fastflow (FastFlow's policy chooses)",
          a.offload));
    }
  if (a.workers == 0) {
    if (offload != pipeline::PrepOffload::None)
      throw InputError(
          fmt::format("--prep-offload {} sends work to remote workers: give --prep-workers N too", a.offload));
    return std::nullopt;
  }
  if (fastflow && a.local_share > 0)
    throw InputError("--prep-offload fastflow chooses the local share itself: leave out --prep-local-share");
  if (spec.data.source != DataSource::Modelled)
    throw InputError(
        fmt::format("--prep-workers {} is a modelled preprocessing service: give --clock virtual and a dataset "
                    "(--virtual-dataset or --data)",
                    a.workers));
  if (spec.cluster.gpus > 1)
    throw InputError(fmt::format(
        "--prep-workers {} serves one training process: give --gpus 1 (--gpemu-gpus N for GPEmu's N GPUs)", a.workers));
  const NetworkSpec net = parse_network(a.network.empty() ? job_network : a.network);
  pipeline::PrepServiceOptions p;
  p.workers = a.workers;
  p.cpus_per_worker = a.cpus_per_worker;
  p.offload = offload;
  p.local_share = a.local_share;
  p.nic_bytes_per_s = net.nic_bytes_per_s();
  p.latency = net.latency;
  p.network = net.name;
  p.worker_buffer = a.worker_buffer;
  pipeline::validate(p);
  if (offload == pipeline::PrepOffload::None)
    notes.push_back(fmt::format("--prep-workers {} with --prep-offload none: the workers stay idle", a.workers));
  spec.data.model.prep_service = p;
  if (!fastflow) return std::nullopt;
  FastFlowChoice choice = fastflow_choice(costs, spec);
  spec.data.model.prep_service->offload = choice.offload;
  spec.data.model.prep_service->local_share = choice.local_share;
  notes.push_back(choice.describe());
  return choice;
}

void add_prep_service_notes(const PrepArgs& a, const RunRecord& record, std::vector<std::string>& notes) {
  if (a.service.empty()) return;
  for (const pipeline::LoaderStats& st : record.loader_stats)
    for (const std::string& n : st.notes)
      if (n.rfind("preprocessing service", 0) == 0) notes.push_back(n);
}

nlohmann::json prep_service_json(const JobSpec& spec, const std::optional<FastFlowChoice>& fastflow) {
  const auto& p = spec.data.model.prep_service;
  if (!p) return nullptr;
  nlohmann::json ff = nullptr;
  if (fastflow) {
    nlohmann::json candidates = nlohmann::json::array();
    for (const FastFlowCandidate& k : fastflow->candidates)
      candidates.push_back({{"offload", pipeline::to_string(k.offload)},
                            {"rthp", k.rthp},
                            {"cycles_s", k.cycles},
                            {"calibrated", k.calibrated}});
    ff = {{"lthp", fastflow->lthp},
          {"gthp", fastflow->gthp},
          {"pcycle_s", fastflow->pcycle},
          {"bottleneck", fastflow->bottleneck},
          {"candidates", candidates},
          {"offload", pipeline::to_string(fastflow->offload)},
          {"local_share", fastflow->local_share}};
  }
  return {{"fastflow", ff},
          {"workers", p->workers},
          {"cpus_per_worker", p->cpus_per_worker},
          {"offload", pipeline::to_string(p->offload)},
          {"local_share", p->local_share},
          {"network", p->network},
          {"nic_bytes_per_s", p->nic_bytes_per_s},
          {"worker_buffer", p->worker_buffer}};
}

}  // namespace gpemu::cli
