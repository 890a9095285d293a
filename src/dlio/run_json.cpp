// DLIO's result as JSON: the keys `gpemu train --dlio-config --json` prints.
#include "dlio/run_json.h"

namespace gpemu::dlio {

namespace {

nlohmann::json metrics_json(const DlioMetrics& f) {
  return {{"steps", f.steps},
          {"measured_steps", f.measured_steps},
          {"au_pct", f.au_pct},
          {"samples_per_s", f.samples_per_s},
          {"mb_per_s", f.mb_per_s},
          {"compute_s", f.compute_s},
          {"total_s", f.total_s},
          {"emulated_compute_s", f.emulated_compute_s},
          {"load_wait_s", f.load_wait_s}};
}

// Training's figures go to the top level, evaluation's to "eval" (without the verdict).
void phase_json(const DlioPhaseResult& p, bool train, nlohmann::json& j) {
  j["epochs"] = p.epochs;
  j["steps"] = p.steps;
  j["au_pct"] = p.au_pct;
  j["au_stdev_pct"] = p.au_stdev_pct;
  if (train) {
    j["au_threshold_pct"] = p.au_threshold_pct;
    j["au_pass"] = p.au_pass;
  } else {
    j["steps_per_epoch"] = p.steps_per_epoch;
  }
  j["samples_per_s"] = p.samples_per_s;
  j["mb_per_s"] = p.mb_per_s;
  j["mb_per_s_dlio"] = p.mb_per_s_dlio;
  j["compute_s"] = p.compute_s;
  j["total_s"] = p.total_s;
  j["emulated_compute_s"] = p.emulated_compute_s;
  j["load_wait_s"] = p.load_wait_s;
  j["measured_steps"] = p.measured_steps;
  if (p.per_epoch) {
    nlohmann::json list = nlohmann::json::array();
    for (const DlioEpoch& e : *p.per_epoch) list.push_back(dlio_epoch_json(e));
    j["per_epoch"] = std::move(list);
  }
}

nlohmann::json generated_json(const DlioGenerated& d) {
  return {{"folder", d.folder},       {"files", d.files},     {"samples", d.samples}, {"bytes", d.bytes},
          {"generated", d.generated}, {"skipped", d.skipped}, {"seconds", d.seconds}};
}

nlohmann::json checkpoint_json(const DlioCheckpointResult& c) {
  nlohmann::json e = {{"epoch", c.epoch},          {"step", c.step},       {"ranks", c.ranks},
                      {"bytes", c.bytes},          {"write_s", c.write_s}, {"write_gb_per_s", c.write_gb_per_s},
                      {"emulated_s", c.emulated_s}};
  if (c.bytes_read > 0) {
    e["bytes_read"] = c.bytes_read;
    e["read_s"] = c.read_s;
    e["read_gb_per_s"] = c.read_gb_per_s;
  }
  return e;
}

}  // namespace

nlohmann::json dlio_epoch_json(const DlioEpoch& e) {
  nlohmann::json j = metrics_json(e);
  j["epoch"] = e.epoch;
  if (e.ranks) {
    nlohmann::json ranks = nlohmann::json::array();
    for (const DlioRankEpoch& r : *e.ranks) {
      nlohmann::json rj = metrics_json(r);
      rj["rank"] = r.rank;
      ranks.push_back(std::move(rj));
    }
    j["ranks"] = std::move(ranks);
  }
  if (e.step_records) {
    nlohmann::json steps = nlohmann::json::array();
    for (const DlioStepRow& s : *e.step_records)
      steps.push_back({{"rank", s.rank},
                       {"block", s.block},
                       {"step", s.step},
                       {"load_s", s.load_s},
                       {"compute_s", s.compute_s},
                       {"proc_s", s.proc_s},
                       {"emulated_s", s.emulated_s},
                       {"bytes", s.bytes}});
    j["step_records"] = std::move(steps);
  }
  return j;
}

nlohmann::json dlio_loader_json(const DlioLoaderSummary& l) {
  return {
      {"batches", l.batches},
      {"samples", l.samples},
      {"bytes_read", l.bytes_read},
      {"cache_hits", l.cache_hits},
      {"cache_misses", l.cache_misses},
      {"out_of_order", l.out_of_order},
      {"direct_io_active", l.direct_io_active},
      {"notes", l.notes},
      {"read_threads", l.read_threads},
      {"prefetch_batches_per_worker", l.prefetch_batches_per_worker},
      {"modelled",
       {{"preprocess", l.preprocess},
        {"storage_bytes_per_s", l.storage_bytes_per_s ? nlohmann::json(*l.storage_bytes_per_s) : nlohmann::json()}}}};
}

nlohmann::json dlio_run_json(const DlioRunRecord& r) {
  nlohmann::json j;
  j["workload"] = r.workload;
  j["model"] = r.model;
  j["clock"] = r.clock;
  j["gpus"] = r.gpus;    // DLIO's world size, under the key every command uses
  j["nodes"] = r.nodes;  // as gpemu train's JSON
  j["network"] = r.nodes > 1 ? nlohmann::json(r.network) : nlohmann::json();
  j["ranks"] = r.ranks;
  j["gpu"] = r.gpu;
  j["synthetic_data"] = r.synthetic_data;
  nlohmann::json generation = nlohmann::json::object();
  if (r.generated_train) generation["train"] = generated_json(*r.generated_train);
  if (r.generated_eval) generation["eval"] = generated_json(*r.generated_eval);
  j["generation"] = std::move(generation);
  if (!r.generation_only) {
    j["step_time_source"] = std::string(to_string(r.step_time_source));
    j["step_time_s"] = r.step_time_s;
    if (r.cost_model)
      j["cost_model"] = {{"model", r.cost_model->model},
                         {"batch_size", r.cost_model->batch_size},
                         {"forward_s", r.cost_model->forward_s},
                         {"backward_s", r.cost_model->backward_s},
                         {"note", r.cost_model->note}};
    nlohmann::json dataset;  // null without training
    if (r.dataset)
      dataset = {{"folder", r.dataset->folder},
                 {"format", std::string(to_string(r.dataset->format))},
                 {"files", r.dataset->files},
                 {"samples", r.dataset->samples},
                 {"bytes", r.dataset->bytes}};
    j["dataset"] = std::move(dataset);
    j["steps_per_epoch"] = r.steps_per_epoch;
    if (r.train) {
      phase_json(*r.train, true, j);
    } else {
      j["epochs"] = 0;
      j["steps"] = 0;
    }
    if (r.loader) j["loader"] = dlio_loader_json(*r.loader);
    if (r.eval) {
      nlohmann::json e;
      phase_json(*r.eval, false, e);
      j["eval"] = std::move(e);
    }
    nlohmann::json checkpoints = nlohmann::json::array();
    for (const DlioCheckpointResult& c : r.checkpoints) checkpoints.push_back(checkpoint_json(c));
    j["checkpoints"] = std::move(checkpoints);
    if (r.checkpoint_gb_per_s) j["checkpoint_gb_per_s"] = *r.checkpoint_gb_per_s;
    if (r.checkpoint_read_gb_per_s) j["checkpoint_read_gb_per_s"] = *r.checkpoint_read_gb_per_s;
    j["emulated_s"] = r.emulated_s;
  }
  j["wall_s"] = r.wall_s;
  j["warnings"] = r.warnings;
  j["not_emulated"] = r.not_emulated;
  if (!r.stopped.empty()) j["stopped"] = r.stopped;
  return j;
}

}  // namespace gpemu::dlio
