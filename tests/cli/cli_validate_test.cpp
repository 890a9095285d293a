// `gpemu validate`, `gpemu calibrate` and `gpemu bench crossval` as a user
// runs them, on a tiny GPEmu-layout profile folder.
#include <gtest/gtest.h>

#include "support/run_gpemu.h"

#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include <nlohmann/json.hpp>

namespace {

namespace fs = std::filesystem;

using Output = gpemu::testing::GpemuRun;

Output gpemu(const std::string& args) { return gpemu::testing::run_gpemu(args); }

// A scratch folder with resnet18 on V100 in GPEmu's layout.
struct TinyDir {
  fs::path root;
  TinyDir() {
    root = fs::temp_directory_path() / ("gpemu-cli-validate-" + std::to_string(::getpid()) + "-" +
                                        std::to_string(std::chrono::steady_clock::now().time_since_epoch().count()));
    write("time/compute/forward/Tesla_V100-PCIE-32GB/resnet18/time_by_batch_size.csv",
          "Batch_Size,Time_In_SECONDS\n1,0.0061\n2,0.0063\n4,0.0071\n");
    write("time/compute/backward/Tesla_V100-PCIE-32GB/resnet18/time_by_batch_size.csv",
          "Batch_Size,Time_In_SECONDS\n1,0.0120\n2,0.0125\n4,0.0139\n");
    write("time/transfer/Tesla_V100-PCIE-32GB/resnet18/data_transfer_time_by_batch_size.csv",
          "Batch_Size,Time_In_SECONDS\n1,0.0004\n2,0.0006\n4,0.0009\n");
    write("time/transfer/Tesla_V100-PCIE-32GB/resnet18/model_transfer_time.txt", "0.01\n");
    write("memory/Tesla_V100-PCIE-32GB/resnet18/memory.csv",
          "batch_size,peak,persistent\n1,180.0,134.5\n2,215.0,135.1\n4,290.0,136.2\n");
  }
  ~TinyDir() {
    std::error_code ec;
    fs::remove_all(root, ec);
  }
  void write(const std::string& rel, const std::string& text) const {
    fs::create_directories((root / rel).parent_path());
    std::ofstream(root / rel) << text;
  }
  // A second model's time tables, so that a family has the two models a
  // calibration needs.
  void add_resnet50() const {
    write("time/compute/forward/Tesla_V100-PCIE-32GB/resnet50/time_by_batch_size.csv",
          "Batch_Size,Time_In_SECONDS\n1,0.0112\n2,0.0121\n4,0.0150\n");
    write("time/compute/backward/Tesla_V100-PCIE-32GB/resnet50/time_by_batch_size.csv",
          "Batch_Size,Time_In_SECONDS\n1,0.0231\n2,0.0252\n4,0.0301\n");
  }
};

std::string slurp(const fs::path& p) {
  std::ifstream in(p);
  return {std::istreambuf_iterator<char>(in), {}};
}

TEST(CliValidate, AnImpossibleRowIsAWarningAndTheRestIsValidated) {
  TinyDir d;
  // GPEmu's fitted rows include impossible values (a negative persistent).
  d.write("memory/Tesla_V100-PCIE-32GB/resnet18/memory.csv",
          "batch_size,peak,persistent\n1,180.0,134.5\n2,215.0,-7\n4,290.0,136.2\n");
  const Output r = gpemu("validate --profiles " + d.root.string() + " --json");
  ASSERT_EQ(r.status, 0) << r.err;
  const std::string file = (d.root / "memory/Tesla_V100-PCIE-32GB/resnet18/memory.csv").string();
  EXPECT_NE(r.err.find("gpemu: warning: " + file + ":3: persistent '-7' is invalid"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("row skipped"), std::string::npos) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  // Forward and backward rows of all three batch sizes are still validated.
  EXPECT_EQ(j["overall"]["iteration"]["n"], 3) << j["overall"].dump();
  EXPECT_EQ(j["overall"]["peak_memory"]["n"], 2);  // the skipped row is not compared
}

// N17: a table that cannot be used (here a folder where the file should be,
// as an unreadable one) became "forward estimated (not in profile)" with no
// word: --profiles runs ask for measured data and say what they left out.
TEST(CliProfiles, RunsSayWhichTablesOfTheirProfilesWereLeftOut) {
  TinyDir d;
  const fs::path forward = d.root / "time/compute/forward/Tesla_V100-PCIE-32GB/resnet18/time_by_batch_size.csv";
  fs::remove(forward);
  fs::create_directory(forward);
  d.write("jobs.json", R"({"jobs": [{"name": "a", "model": "resnet18", "batch_size": 2, "iterations": 2}]})");
  const std::string p = " --profiles " + d.root.string();
  for (const std::string& run :
       {"predict --gpu v100 --model resnet18 -b 2" + p,
        "train --gpu v100 --model resnet18 -b 2 --synthetic -n 2 --clock virtual" + p,
        "share --jobs " + (d.root / "jobs.json").string() + " --gpu v100 --clock virtual" + p}) {
    const Output r = gpemu(run);
    EXPECT_EQ(r.status, 0) << run << "\n" << r.err;
    EXPECT_NE(r.err.find("gpemu: warning: " + forward.string() + ": is a folder, not a regular file"),
              std::string::npos)
        << run << "\n"
        << r.err;
    EXPECT_NE(r.err.find("gpemu: warning: --profiles " + d.root.string() + ": 1 table or row above left out"),
              std::string::npos)
        << run << "\n"
        << r.err;
  }
  // A whole profile stays quiet.
  fs::remove(forward);
  d.write("time/compute/forward/Tesla_V100-PCIE-32GB/resnet18/time_by_batch_size.csv",
          "Batch_Size,Time_In_SECONDS\n1,0.0061\n2,0.0063\n4,0.0071\n");
  const Output clean = gpemu("predict --gpu v100 --model resnet18 -b 2" + p);
  EXPECT_EQ(clean.status, 0) << clean.err;
  EXPECT_EQ(clean.err.find("warning"), std::string::npos) << clean.err;
}

TEST(CliValidate, JsonHasTheDocumentedKeys) {
  TinyDir d;
  const Output r = gpemu("validate --profiles " + d.root.string() + " --json");
  ASSERT_EQ(r.status, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  for (const char* ph : {"forward", "backward", "iteration", "transfer", "peak_memory"})
    for (const char* k : {"median_ape_pct", "mean_ape_pct", "p90_ape_pct", "n"}) {
      EXPECT_TRUE(j["overall"][ph].contains(k)) << ph << "." << k;
      EXPECT_TRUE(j["per_gpu"]["V100-PCIE-32GB"][ph].contains(k)) << ph << "." << k;
    }
  EXPECT_EQ(j["overall"]["forward"]["n"], 3);
  EXPECT_EQ(j["overall"]["peak_memory"]["n"], 3);
  ASSERT_TRUE(j.contains("oom_agreement_pct"));
  EXPECT_DOUBLE_EQ(j["oom_agreement_pct"].get<double>(), 100.0);  // nothing ran out of memory; the model agrees
}

TEST(CliValidate, TableAndPlot) {
  TinyDir d;
  const fs::path svg = d.root / "plot.svg";
  const Output r = gpemu("validate --profiles " + d.root.string() + " --plot " + svg.string());
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("per GPU"), std::string::npos);
  EXPECT_NE(r.out.find("OOM decisions"), std::string::npos);
  std::ifstream in(svg);
  std::string text((std::istreambuf_iterator<char>(in)), {});
  EXPECT_EQ(text.rfind("<svg", 0), 0u);
  EXPECT_NE(text.find("V100-PCIE-32GB"), std::string::npos);
}

TEST(CliValidate, MissingFolderIsAOneLineError) {
  const Output r = gpemu("validate --profiles /nonexistent/gpemu-profiles --json");
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.err.find("gpemu: error:"), std::string::npos) << r.err;
}

TEST(CliCalibrate, WritesACalibrationThatValidateReads) {
  TinyDir d;
  d.add_resnet50();
  const fs::path out = d.root / "cal.json";
  const Output r = gpemu("calibrate --profiles " + d.root.string() + " --out " + out.string() + " --no-crossval");
  ASSERT_EQ(r.status, 0) << r.err;
  ASSERT_TRUE(fs::exists(out));
  const auto cal = nlohmann::json::parse(std::ifstream(out));
  EXPECT_EQ(cal["format"], "gpemu-calibration/1");
  EXPECT_EQ(cal["calibrated_families"], nlohmann::json::array({"Volta"}));
  EXPECT_TRUE(cal["families"].contains("Hopper"));
  const Output v =
      gpemu("validate --profiles " + d.root.string() + " --json --no-memory --calibration " + out.string());
  ASSERT_EQ(v.status, 0) << v.err;
  EXPECT_LT(nlohmann::json::parse(v.out)["overall"]["iteration"]["median_ape_pct"].get<double>(), 50);
}

// S7: one (GPU, model) table gave every family's factors (conv efficiency 3.2,
// over the card's peak) without a word.
TEST(CliCalibrate, AFamilyWithOneModelIsRefused) {
  TinyDir d;
  const fs::path out = d.root / "cal.json";
  const Output r = gpemu("calibrate --profiles " + d.root.string() + " --out " + out.string() + " --no-crossval");
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.err.find("the Volta family has rows of 1 model (resnet18) only"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(out));
}

// S7: a family with forward rows of two models and backward rows of one was
// "calibrated on" its GPU with the backward factor and launch times left at
// their defaults.
TEST(CliCalibrate, AFamilyWithoutBackwardRowsOfTwoModelsIsRefused) {
  TinyDir d;
  d.write("time/compute/forward/Tesla_V100-PCIE-32GB/resnet50/time_by_batch_size.csv",
          "Batch_Size,Time_In_SECONDS\n1,0.0112\n2,0.0121\n4,0.0150\n");
  const fs::path out = d.root / "cal.json";
  const Output r = gpemu("calibrate --profiles " + d.root.string() + " --out " + out.string() + " --no-crossval");
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.err.find("the Volta family has backward rows of 1 model (resnet18) and forward rows of resnet18, "
                       "resnet50; calibrating a family needs forward and backward rows of at least 2 models each"),
            std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find("add time/compute/backward/<GPU>/<model>/time_by_batch_size.csv tables"), std::string::npos)
      << r.err;
  EXPECT_EQ(r.out, "") << "nothing is fitted or printed";
  EXPECT_FALSE(fs::exists(out));
}

TEST(CliCalibrate, FamiliesWithoutRowsAreNamedAsNotFitted) {
  TinyDir d;
  d.add_resnet50();
  const Output r =
      gpemu("calibrate --profiles " + d.root.string() + " --out " + (d.root / "c.json").string() + " --no-crossval");
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.err.find("note: no measured rows for"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("Hopper"), std::string::npos) << r.err;
}

// S7: without --out, calibrate replaced data/calibration.json, which every
// later prediction reads.
TEST(CliCalibrate, TheShippedCalibrationIsReplacedOnlyWhenAskedFor) {
  TinyDir d;
  d.add_resnet50();
  const fs::path data = d.root / "datadir";
  fs::create_directories(data / "data");
  fs::create_directory_symlink(fs::path(GPEMU_SOURCE_DIR) / "zoo", data / "zoo");
  const fs::path shipped = data / "data" / "calibration.json";
  std::ofstream(shipped) << "{}";
  const std::string env = "GPEMU_DATA_DIR=" + data.string() + " ";
  const std::string args = "calibrate --profiles " + d.root.string() + " --no-crossval";
  const Output refused = gpemu::testing::run_gpemu(args, env);
  EXPECT_EQ(refused.status, 1);
  EXPECT_NE(refused.err.find("--replace-shipped"), std::string::npos) << refused.err;
  EXPECT_EQ(slurp(shipped), "{}");
  const Output asked = gpemu::testing::run_gpemu(args + " --replace-shipped", env);
  ASSERT_EQ(asked.status, 0) << asked.err;
  EXPECT_NE(slurp(shipped).find("gpemu-calibration/1"), std::string::npos);
}

TEST(CliCalibrate, AnUnwritableOutIsFoundBeforeFittingAndZeroRoundsRefused) {
  TinyDir d;
  d.add_resnet50();
  Output r = gpemu("calibrate --profiles " + d.root.string() + " --out /nonexistent/dir/c.json --no-crossval");
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.err.find("No such file or directory"), std::string::npos) << r.err;
  EXPECT_EQ(r.out, "") << "nothing is fitted or printed";
  r = gpemu("calibrate --profiles " + d.root.string() + " --out " + (d.root / "c.json").string() + " --rounds 0");
  EXPECT_NE(r.status, 0);
  EXPECT_NE(r.err.find("--rounds"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("from 1 to 100"), std::string::npos) << r.err;
}

// U1/U4: --out naming a folder gave a raw filesystem_error and left DIR.tmp.
TEST(CliCalibrate, AFolderAsOutIsAClearErrorAndLeavesNothing) {
  TinyDir d;
  d.add_resnet50();
  fs::create_directory(d.root / "outdir");
  const Output r =
      gpemu("calibrate --profiles " + d.root.string() + " --out " + (d.root / "outdir").string() + " --no-crossval");
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.err.find("is a folder"), std::string::npos) << r.err;
  for (const auto& e : fs::directory_iterator(d.root))
    EXPECT_EQ(e.path().filename().string().find(".tmp"), std::string::npos) << e.path();
}

TEST(CliValidate, PlotAndPointsOnAFullDiskFail) {
  if (!fs::exists("/dev/full")) GTEST_SKIP() << "no /dev/full";
  TinyDir d;
  for (const char* opt : {"--plot", "--points"}) {
    const Output r = gpemu("validate --profiles " + d.root.string() + " " + opt + " /dev/full");
    EXPECT_EQ(r.status, 1) << opt;
    EXPECT_NE(r.err.find("No space left on device"), std::string::npos) << opt << ": " << r.err;
  }
}

TEST(CliBench, CrossvalIsRegistered) {
  const Output r = gpemu("bench crossval --help");
  EXPECT_EQ(r.status, 0);
  EXPECT_NE(r.out.find("--profiles"), std::string::npos);
  EXPECT_NE(r.out.find("--step-times"), std::string::npos);
  EXPECT_NE(r.out.find("--per-model"), std::string::npos);
  const Output missing = gpemu("bench crossval --quick --step-times /nonexistent/st.csv");
  EXPECT_NE(missing.status, 0);
  EXPECT_NE(missing.err.find("/nonexistent/st.csv"), std::string::npos) << missing.err;
}

}  // namespace

namespace {

const char* kStepTimeHeader =
    "gpu,model,precision,batch_size,seq_len,task,optimizer,matmul_precision,conv_precision,amp,memory_format,"
    "attention,fused_ops,mlm_positions,includes_h2d,includes_loss_and_optimizer,micro_steps,confidence,"
    "published_iteration_ms,published_figure,source,notes\n";

TEST(CliValidate, StepTimesListRowsItCannotExpressAndComparesTheRest) {
  TinyDir d;
  d.write("st.csv", std::string(kStepTimeHeader) +
                        "V100-SXM2-16GB,resnet50,fp32,128,,classification,sgd,fp32,fp32,none,nchw,n/a,none,n/a,no,"
                        "yes,1,inferred,346.88,369 img/s,lambdal/deeplearning-benchmark@a:b,n\n"
                        "V100-SXM2-32GB,bert_large,amp,16,384,squad,adamw,fp16,n/a,pure_half,n/a,fused,some,n/a,"
                        "yes,yes,1,stated,307.69,52 seq/s,NVIDIA/DeepLearningExamples@a:b,n\n"
                        "V100-SXM2-32GB,bert_large,amp,16,128,pretraining,lamb,fp16,n/a,pure_half,n/a,fused,most,"
                        "masked,yes,yes,1,stated,100,160 seq/s,NVIDIA/DeepLearningExamples@a:b,n\n");
  const Output r = gpemu("validate --step-times " + (d.root / "st.csv").string() + " --json");
  ASSERT_EQ(r.status, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["overall"]["n"], 2);
  ASSERT_EQ(j["rows"].size(), 2u);
  EXPECT_EQ(j["rows"][0]["gpu"], "V100-SXM2-16GB");
  // fused attention is the zoo's _sdpa graph; with the fused chains too there is no graph
  EXPECT_NE(j["rows"].dump().find("bert_large_squad_sdpa"), std::string::npos) << j["rows"].dump();
  ASSERT_EQ(j["not_compared"].size(), 1u);
  EXPECT_EQ(j["not_compared"][0]["line"], 4);
  EXPECT_NE(j["not_compared"][0]["why"].dump().find("no graph with both fused attention"), std::string::npos)
      << j["not_compared"].dump();
  for (const char* k : {"per_gpu", "per_family", "per_precision", "per_family_precision", "per_source"})
    EXPECT_TRUE(j.contains(k)) << k;

  const Output text = gpemu("validate --step-times " + (d.root / "st.csv").string() + " --nearest");
  ASSERT_EQ(text.status, 0) << text.err;
  EXPECT_NE(text.out.find("per family x precision"), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("nearest program"), std::string::npos) << text.out;
}

TEST(CliValidate, StepTimesAndProfilesAreOneOrTheOther) {
  TinyDir d;
  const Output none = gpemu("validate");
  EXPECT_NE(none.status, 0);
  EXPECT_NE(none.err.find("--step-times"), std::string::npos) << none.err;
  d.write("bad.csv", std::string(kStepTimeHeader) +
                         "V100-SXM2-16GB,resnet50,fp32,128,,classification,sgd,fp32,fp32,none,nchw,n/a,none,n/a,no,"
                         "yes,1,guessed,346.88,x,y,n\n");
  const Output bad = gpemu("validate --step-times " + (d.root / "bad.csv").string());
  EXPECT_NE(bad.status, 0);
  EXPECT_NE(bad.err.find("bad.csv:2"), std::string::npos) << bad.err;
  EXPECT_NE(bad.err.find("confidence"), std::string::npos) << bad.err;
}

// --keep-output off: measure.py's `m(input_ids=ids, labels=ids).loss` drops
// BERT's MLM logits once the loss is computed; the same time, less memory.
TEST(CliPredict, KeepOutputOffDropsTheLogitsAfterTheLoss) {
  const std::string base = "predict --gpu h200 --model bert_base -b 8 --seq-len 128 --optimizer adam --torch 2 --json";
  const Output kept = gpemu(base), dropped = gpemu(base + " --keep-output off");
  ASSERT_EQ(kept.status, 0) << kept.err;
  ASSERT_EQ(dropped.status, 0) << dropped.err;
  const auto k = nlohmann::json::parse(kept.out), d = nlohmann::json::parse(dropped.out);
  EXPECT_EQ(k["keep_output"], true);
  EXPECT_EQ(d["keep_output"], false);
  EXPECT_EQ(k["iteration_ms"], d["iteration_ms"]);
  // The FP32 logits are 8 x 128 x 30522 x 4 bytes = 119.2 MiB.
  EXPECT_GT(k["peak_allocated_mib"].get<double>() - d["peak_allocated_mib"].get<double>(), 60.0);
  const Output bad = gpemu("predict --gpu h200 --model bert_base -b 8 --keep-output maybe");
  EXPECT_NE(bad.status, 0);
  EXPECT_NE(bad.err.find("--keep-output 'maybe'"), std::string::npos) << bad.err;
  EXPECT_EQ(bad.err.find('\n'), bad.err.size() - 1) << bad.err;
}

TEST(CliPredict, VariantFlagsChangeTheProgram) {
  const Output highest =
      gpemu("predict --gpu A100-SXM4-80GB --model bert_base --task squad -b 32 --seq-len 384 --json");
  const Output high = gpemu(
      "predict --gpu A100-SXM4-80GB --model bert_base --task squad -b 32 --seq-len 384 --matmul-precision high --json");
  ASSERT_EQ(highest.status, 0) << highest.err;
  ASSERT_EQ(high.status, 0) << high.err;
  const auto a = nlohmann::json::parse(highest.out), b = nlohmann::json::parse(high.out);
  EXPECT_EQ(a["model"], "bert_base_squad");
  EXPECT_LT(b["iteration_ms"].get<double>(), a["iteration_ms"].get<double>());  // TF32 GEMMs
  EXPECT_NE(b["program_variant"].get<std::string>().find("matmul precision high"), std::string::npos);
  const Output autocast =
      gpemu("predict --gpu A100-SXM4-80GB --model bert_base --task squad -b 32 --seq-len 384 --precision amp --json");
  const Output pure = gpemu(
      "predict --gpu A100-SXM4-80GB --model bert_base --task squad -b 32 --seq-len 384 --precision amp --amp "
      "pure_half --json");
  ASSERT_EQ(autocast.status, 0) << autocast.err;
  ASSERT_EQ(pure.status, 0) << pure.err;
  const auto c = nlohmann::json::parse(autocast.out), p = nlohmann::json::parse(pure.out);
  EXPECT_EQ(p["precision"], "half");
  EXPECT_NE(p["program_variant"].get<std::string>().find("amp pure_half fp16"), std::string::npos);
  EXPECT_LT(p["iteration_ms"].get<double>(), c["iteration_ms"].get<double>());
  EXPECT_LT(p["peak_allocated_mib"].get<double>(), c["peak_allocated_mib"].get<double>());
  const Output refused = gpemu("predict --gpu A100-SXM4-80GB --model resnet50 -b 8 --precision amp --amp pure_half");
  EXPECT_NE(refused.status, 0);
  EXPECT_NE(refused.err.find("pure-half"), std::string::npos) << refused.err;
  const Output fused = gpemu(
      "predict --gpu A100-SXM4-80GB --model bert_base --task squad -b 32 --seq-len 384 --precision amp --amp "
      "pure_half --fused softmax,layer_norm,gelu --json");
  ASSERT_EQ(fused.status, 0) << fused.err;
  const auto fj = nlohmann::json::parse(fused.out);
  EXPECT_EQ(fj["model"], "bert_base_squad_fused");
  EXPECT_LT(fj["iteration_ms"].get<double>(), p["iteration_ms"].get<double>());
  const std::string gpt = "predict --gpu H100-SXM5-80GB --model gpt2_small -b 8 --seq-len 1024 --precision bf16 --json";
  const Output eager_attention = gpemu(gpt), sdpa = gpemu(gpt + " --attention fused");
  ASSERT_EQ(eager_attention.status, 0) << eager_attention.err;
  ASSERT_EQ(sdpa.status, 0) << sdpa.err;
  const auto ea = nlohmann::json::parse(eager_attention.out), sa = nlohmann::json::parse(sdpa.out);
  EXPECT_EQ(sa["model"], "gpt2_small_sdpa");
  EXPECT_NE(sa["program_variant"].get<std::string>().find("fused attention"), std::string::npos);
  EXPECT_LT(sa["iteration_ms"].get<double>(), ea["iteration_ms"].get<double>());
  EXPECT_LT(sa["peak_allocated_mib"].get<double>(), ea["peak_allocated_mib"].get<double>());  // no S x S tensors
  const Output gelu_only = gpemu("predict --gpu A100-SXM4-80GB --model bert_base --task squad -b 8 --fused gelu");
  EXPECT_NE(gelu_only.status, 0);
  EXPECT_NE(gelu_only.err.find("softmax,layer_norm,gelu"), std::string::npos) << gelu_only.err;
  const Output badflag = gpemu("predict --gpu A100-SXM4-80GB --model bert_base -b 8 --matmul-precision medium");
  EXPECT_NE(badflag.status, 0);
  EXPECT_NE(badflag.err.find("--matmul-precision"), std::string::npos) << badflag.err;
}

}  // namespace
