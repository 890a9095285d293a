// The JSON of a DLIO run, written from its typed record at the edge: a
// training run's figures at the top level, evaluation's under "eval" without
// the verdict, a generation-only run without figures, what is optional left out.
#include <gtest/gtest.h>

#include "dlio/run_json.h"

namespace gpemu::dlio {
namespace {

DlioPhaseResult phase(double au) {
  DlioPhaseResult p;
  p.epochs = 2;
  p.steps = 8;
  p.measured_steps = 6;
  p.au_pct = au;
  p.au_threshold_pct = 90;
  p.au_pass = au >= 90;
  p.steps_per_epoch = 4;
  return p;
}

TEST(DlioRunJson, TrainingAtTheTopEvaluationUnderEvalWithoutItsVerdict) {
  DlioRunRecord r;
  r.workload = "w.yaml";
  r.gpus = 2;
  r.ranks = {0, 1};
  r.train = phase(95);
  DlioEpoch e;
  e.epoch = 1;
  e.au_pct = 94;
  e.ranks = std::vector<DlioRankEpoch>(2);
  (*e.ranks)[1].rank = 1;
  r.train->per_epoch = std::vector<DlioEpoch>{e};
  r.eval = phase(50);
  r.dataset = DlioDataset{};
  r.dataset->format = DataFormat::Npy;
  r.checkpoints.resize(1);
  r.checkpoints[0].bytes_read = 10;
  r.checkpoint_gb_per_s = 1.5;
  const nlohmann::json j = dlio_run_json(r);
  EXPECT_EQ(j["gpus"], 2);
  EXPECT_DOUBLE_EQ(j["au_pct"].get<double>(), 95.0);
  EXPECT_TRUE(j["au_pass"].get<bool>());
  EXPECT_EQ(j["epochs"], 2);
  EXPECT_EQ(j["steps_per_epoch"], 0);  // the run's (not set here), not evaluation's
  ASSERT_EQ(j["per_epoch"].size(), 1u);
  EXPECT_EQ(j["per_epoch"][0]["ranks"][1]["rank"], 1);
  EXPECT_FALSE(j["per_epoch"][0].contains("step_records"));
  EXPECT_DOUBLE_EQ(j["eval"]["au_pct"].get<double>(), 50.0);
  EXPECT_EQ(j["eval"]["steps_per_epoch"], 4);
  EXPECT_FALSE(j["eval"].contains("au_pass"));
  EXPECT_FALSE(j["eval"].contains("au_threshold_pct"));
  EXPECT_EQ(j["dataset"]["format"], "npy");
  EXPECT_EQ(j["checkpoints"][0]["bytes_read"], 10);
  EXPECT_DOUBLE_EQ(j["checkpoint_gb_per_s"].get<double>(), 1.5);
  EXPECT_FALSE(j.contains("checkpoint_read_gb_per_s"));
  EXPECT_FALSE(j.contains("stopped"));
}

TEST(DlioRunJson, CheckpointOnlyAndGenerationOnly) {
  DlioRunRecord r;
  r.checkpoints.resize(2);
  nlohmann::json j = dlio_run_json(r);
  EXPECT_EQ(j["epochs"], 0);
  EXPECT_TRUE(j["dataset"].is_null());
  EXPECT_FALSE(j.contains("au_pct"));
  EXPECT_FALSE(j["checkpoints"][0].contains("bytes_read"));
  EXPECT_EQ(j["step_time_source"], "config");

  r.generation_only = true;
  r.generated_train = DlioGenerated{};
  r.generated_train->files = 3;
  r.stopped = "why";
  j = dlio_run_json(r);
  EXPECT_EQ(j["generation"]["train"]["files"], 3);
  EXPECT_FALSE(j["generation"].contains("eval"));
  for (const char* k : {"epochs", "checkpoints", "dataset", "step_time_source", "emulated_s"})
    EXPECT_FALSE(j.contains(k)) << k;
  EXPECT_EQ(j["stopped"], "why");
}

}  // namespace
}  // namespace gpemu::dlio
