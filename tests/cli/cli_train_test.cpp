// `gpemu train` fed by a data pipeline and `gpemu dataset synth`, as a user runs them.
#include <gtest/gtest.h>

#include "support/run_gpemu.h"

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <set>
#include <string>

#include <nlohmann/json.hpp>

namespace {

using Outcome = gpemu::testing::GpemuRun;

using gpemu::testing::run_gpemu;

nlohmann::json json_of(const Outcome& r) {
  EXPECT_EQ(r.status, 0) << r.err;
  return nlohmann::json::parse(r.out);
}

class TempFolder {
 public:
  TempFolder() {
    static int counter = 0;
    path_ = std::filesystem::temp_directory_path() /
            ("gpemu-cli-train-" + std::to_string(::getpid()) + "-" + std::to_string(counter++));
    std::filesystem::remove_all(path_);
    std::filesystem::create_directories(path_);
  }
  ~TempFolder() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  std::string str() const { return path_.string(); }
  std::filesystem::path operator/(const std::string& s) const { return path_ / s; }

 private:
  std::filesystem::path path_;
};

// A tiny dataset made with `gpemu dataset synth`.
std::string make_dataset(const TempFolder& dir, int images = 16) {
  const std::string data = (dir / "data").string();
  Outcome r = run_gpemu("dataset synth --out " + data + " --images " + std::to_string(images) +
                        " --classes 2 --median-kb 20 --seed 3 --json");
  EXPECT_EQ(r.status, 0) << r.err;
  auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["images"], images);
  return data;
}

TEST(CliTrain, DatasetSynthThenTrainOnTwoGpusEmitsTheJsonKeys) {
  TempFolder dir;
  const std::string data = make_dataset(dir);
  auto j = json_of(
      run_gpemu("train --data " + data + " --clock real --gpus 2 -b 2 -n 3 --workers 1 --pin-mode account --json"));
  for (const char* k : {"epoch_s", "samples_per_s", "gpu_util_pct", "data_stall_pct", "h2d_pct", "peak_allocated_mib",
                        "iterations", "samples", "all_reduce_pct", "all_reduces", "per_gpu", "elapsed_s"})
    EXPECT_TRUE(j.contains(k)) << k;
  EXPECT_EQ(j["gpus"], 2);
  EXPECT_EQ(j["iterations"], 3);
  EXPECT_EQ(j["samples"], 2 * 3 * 2);
  EXPECT_EQ(j["loader"], "real");
  EXPECT_GT(j["samples_per_s"].get<double>(), 0);
  EXPECT_GE(j["data_stall_pct"].get<double>(), 0);
  EXPECT_LE(j["data_stall_pct"].get<double>(), 100);
  EXPECT_GT(j["all_reduces"].get<int>(), 0);
  EXPECT_EQ(j["per_gpu"].size(), 2u);
}

TEST(CliTrain, IoUringReadsFeedTheRunOrSayInOneLineWhyNot) {
  TempFolder dir;
  const std::string data = make_dataset(dir, 8);
  Outcome r = run_gpemu("train --data " + data +
                        " --clock real -b 2 -n 2 --workers 1 --pin-mode account --read-method io_uring --json");
  if (r.status != 0) {
    EXPECT_NE(r.err.find("io_uring reads are unavailable"), std::string::npos) << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
    GTEST_SKIP() << r.err;
  }
  auto j = json_of(r);
  EXPECT_EQ(j["read_method"], "io_uring");
  EXPECT_EQ(j["samples"], 4);
}

TEST(CliTrain, AMissingDataFolderIsOneLineNamingIt) {
  Outcome r = run_gpemu("train --data /nonexistent/gpemu-train-data");
  EXPECT_NE(r.status, 0);
  EXPECT_NE(r.err.find("/nonexistent/gpemu-train-data"), std::string::npos) << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
}

TEST(CliTrain, VirtualClockWritesTraceAndReportAndIsDeterministic) {
  TempFolder dir;
  const std::string data = make_dataset(dir);
  const std::string trace = (dir / "trace.json").string();
  const std::string report = (dir / "run.html").string();
  const std::string args = "train --data " + data + " --clock virtual --gpus 2 -b 4 --workers 1 --cores 2 --json";
  auto a = json_of(run_gpemu(args + " --trace " + trace + " --report " + report));
  EXPECT_EQ(a["loader"], "modelled");
  EXPECT_EQ(a["samples"], 16);
  EXPECT_GT(a["data_stall_pct"].get<double>(), 0);
  auto b = json_of(run_gpemu(args));
  EXPECT_EQ(a["elapsed_s"], b["elapsed_s"]);
  EXPECT_EQ(a["data_stall_pct"], b["data_stall_pct"]);

  std::ifstream in(trace);
  auto t = nlohmann::json::parse(in);
  std::set<std::string> tracks, names;
  for (auto& e : t["traceEvents"]) {
    if (e["ph"] == "M" && e["name"] == "thread_name") tracks.insert(e["args"]["name"].get<std::string>());
    if (e["ph"] == "X") names.insert(e["name"].get<std::string>());
  }
  EXPECT_TRUE(tracks.count("GPU 0 loader worker 0"));
  EXPECT_TRUE(tracks.count("GPU 1 loader worker 0"));
  EXPECT_TRUE(tracks.count("train loop 1"));
  EXPECT_TRUE(names.count("decode"));
  EXPECT_TRUE(names.count("data stall"));
  EXPECT_TRUE(names.count("optimizer step"));
  std::ifstream html(report);
  const std::string page((std::istreambuf_iterator<char>(html)), {});
  EXPECT_NE(page.find("<svg"), std::string::npos);
}

TEST(CliTrain, TextSummaryAndSyntheticGpus) {
  Outcome r = run_gpemu("train --synthetic --clock virtual -n 4 --gpus 2");
  ASSERT_EQ(r.status, 0) << r.err;
  for (const char* k : {"epoch time", "samples/s", "GPU utilization", "data stall share", "H2D share",
                        "all-reduce share", "peak GPU memory"})
    EXPECT_NE(r.out.find(k), std::string::npos) << k << "\n" << r.out;
}

TEST(CliTrain, AGlobalBatchSizeIsSplitEvenlyOverTheGpus) {
  auto j = json_of(run_gpemu("train --synthetic --clock virtual -n 2 --gpus 4 --global-batch-size 256 --json"));
  EXPECT_EQ(j["batch_size"], 64);
  EXPECT_EQ(j["global_batch_size"], 256);
  EXPECT_EQ(j["samples"], 256 * 2);
  Outcome uneven = run_gpemu("train --synthetic --clock virtual -n 2 --gpus 3 --global-batch-size 256");
  EXPECT_NE(uneven.status, 0);
  EXPECT_NE(uneven.err.find("--global-batch-size 256 over --gpus 3"), std::string::npos) << uneven.err;
  EXPECT_NE(uneven.err.find("multiple of 3"), std::string::npos) << uneven.err;
  Outcome both = run_gpemu("train --synthetic --clock virtual -n 2 -b 32 --global-batch-size 256");
  EXPECT_NE(both.status, 0);
  EXPECT_NE(both.err.find("--global-batch-size"), std::string::npos) << both.err;
}

TEST(CliTrain, GpemuCompatibleGpusAreLabelledWhereverTheyRun) {
  Outcome r = run_gpemu("train --synthetic --clock virtual -n 2 --gpemu-gpus 8 --global-batch-size 256");
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("GPEmu-compatible (--gpemu-gpus 8): one process standing for 8 GPUs"), std::string::npos)
      << r.out;
  auto j = json_of(run_gpemu("train --synthetic --clock virtual -n 2 --gpemu-gpus 8 --global-batch-size 256 --json"));
  EXPECT_EQ(j["gpemu_gpus"], 8);
  EXPECT_EQ(j["batch_size"], 256);  // one process takes the global batch
  EXPECT_EQ(j["gpus"], 1);          // one process, so no all-reduce
  Outcome gpus = run_gpemu("train --synthetic --clock virtual -n 2 --gpemu-gpus 8 --gpus 2");
  EXPECT_NE(gpus.status, 0);
  EXPECT_NE(gpus.err.find("--gpemu-gpus 8"), std::string::npos) << gpus.err;
}

TEST(CliTrain, AVirtualDatasetFeedsTheModelledLoaderAtFullScale) {
  auto j = json_of(run_gpemu("train --virtual-dataset imagenette10g --clock virtual -n 3 --json"));
  EXPECT_EQ(j["dataset_images"], 87473);
  EXPECT_EQ(j["data"], "virtual:imagenette10g");
  EXPECT_EQ(j["virtual_dataset"], true);
  EXPECT_EQ(j["loader"], "modelled");
  EXPECT_EQ(j["iterations"], 3);
  Outcome text = run_gpemu("train --virtual-dataset imagenette10g --clock virtual -n 2");
  ASSERT_EQ(text.status, 0) << text.err;
  EXPECT_NE(text.out.find("data: virtual:imagenette10g, sizes without files (87473 images"), std::string::npos)
      << text.out;
  EXPECT_NE(text.out.find("emulated s per wall s"), std::string::npos) << text.out;
  for (const std::string args : {"--clock real", "--clock virtual --synthetic", "--clock virtual --data /tmp"}) {
    Outcome r = run_gpemu("train --virtual-dataset imagenette10g -n 1 " + args);
    EXPECT_NE(r.status, 0) << args;
    EXPECT_NE(r.err.find("--virtual-dataset"), std::string::npos) << args << ": " << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << args << ": " << r.err;
  }
}

TEST(CliTrain, StorageCachesAndTheirFiguresInTheJson) {
  const std::string base = "train --virtual-dataset imagenette10g --clock virtual --epochs 2 --json --storage hdd ";
  auto minio = json_of(run_gpemu(base + "--page-cache-bytes 0 --cache-bytes 2G"));
  auto sff = json_of(run_gpemu(base + "--page-cache-bytes 0 --cache-bytes 2G --cache-policy sff"));
  for (const auto* j : {&minio, &sff}) {
    const auto& r = (*j)["reads"];
    EXPECT_EQ(r["storage"], "hdd");
    EXPECT_EQ(r["page_cache_bytes"], 0);
    EXPECT_EQ(r["samples"], 2 * 87473);
    // Every sample the loader cache missed was a request to the disk.
    EXPECT_EQ(r["storage_requests"].get<std::uint64_t>() + r["cache_hits"].get<std::uint64_t>(), 2u * 87473);
    EXPECT_LE(r["cache_resident_pct"].get<double>(), 100.0 * 2147483648.0 / (*j)["dataset_bytes"].get<double>());
    EXPECT_GT(r["cache_resident_pct"].get<double>(), 20.0);
  }
  EXPECT_EQ(sff["reads"]["cache_policy"], "sff");
  // The same bytes in more, smaller files: more hits, fewer disk requests, a shorter second epoch.
  EXPECT_GT(sff["reads"]["cache_hits"].get<double>(), 1.5 * minio["reads"]["cache_hits"].get<double>());
  EXPECT_LT(sff["epoch_times_s"][1].get<double>(), minio["epoch_times_s"][1].get<double>());
  // An unlimited page cache: the second epoch reads nothing from the disk.
  auto warm = json_of(run_gpemu(base));
  EXPECT_EQ(warm["reads"]["storage_requests"], 87473);
  EXPECT_EQ(warm["reads"]["page_cache_bytes"], "unlimited");
  EXPECT_DOUBLE_EQ(warm["reads"]["page_cache_resident_pct"].get<double>(), 100.0);
  auto cold = json_of(run_gpemu(base + "--cold"));
  EXPECT_EQ(cold["reads"]["storage_requests"], 2 * 87473);

  for (const std::string args :
       {"--clock real --storage hdd -n 1", "--clock virtual --virtual-dataset imagenette10g --page-cache-bytes 1G -n 1",
        "--clock virtual --virtual-dataset imagenette10g --cache-policy sff -n 1",
        "--clock virtual --virtual-dataset imagenette10g --cache-bytes 1G --cache-policy lru -n 1",
        "--clock virtual --virtual-dataset imagenette10g --storage tape -n 1"}) {
    Outcome r = run_gpemu("train " + args);
    EXPECT_NE(r.status, 0) << args;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << args << ": " << r.err;
  }
  EXPECT_NE(run_gpemu("train --clock real --storage hdd -n 1").err.find("modelled loader"), std::string::npos);
  EXPECT_NE(run_gpemu("train --clock virtual --virtual-dataset imagenette10g --cache-policy sff -n 1")
                .err.find("--cache-bytes"),
            std::string::npos);
}

TEST(CliTrain, GroupedFilesAreReadWithFewerRequests) {
  const std::string base =
      "train --virtual-dataset imagenette10g --clock virtual --epochs 1 --json --storage hdd --model alexnet -b 256 ";
  auto single = json_of(run_gpemu(base));
  auto grouped = json_of(run_gpemu(base + "--group-size 64"));
  EXPECT_EQ(single["reads"]["storage_requests"], 87473);
  // 1,367 files of 64; a batch of 256 that cuts a file reads its rest apart.
  EXPECT_GE(grouped["reads"]["storage_requests"].get<int>(), 1367);
  EXPECT_LT(grouped["reads"]["storage_requests"].get<int>(), 2 * 1367);
  EXPECT_EQ(grouped["reads"]["group_size"], 64);
  EXPECT_EQ(grouped["reads"]["bytes_from_storage"], single["reads"]["bytes_from_storage"]);
  EXPECT_LT(grouped["epoch_times_s"][0].get<double>(), single["epoch_times_s"][0].get<double>() / 2);
  // A folder of images not grouped on disk refuses --group-size (a real
  // dataset: a folder's contents must not decide which check speaks first).
  TempFolder dir;
  Outcome folder = run_gpemu("train --clock real --data " + make_dataset(dir) + " --group-size 8 -n 1");
  EXPECT_NE(folder.status, 0);
  EXPECT_NE(folder.err.find("--group-size 8"), std::string::npos) << folder.err;
}

TEST(CliTrain, ADatasetGroupedOnDiskTrainsByGroups) {
  TempFolder dir;
  const std::string images = make_dataset(dir), groups = (dir / "groups").string();
  auto g = json_of(run_gpemu("dataset group --data " + images + " --out " + groups + " --size 4 --json"));
  EXPECT_EQ(g["files"], 4);
  EXPECT_EQ(g["samples"], 16);
  auto j = json_of(run_gpemu("train --data " + groups + " --clock real -b 4 --workers 1 --epochs 1 --json"));
  EXPECT_EQ(j["dataset_images"], 16);
  EXPECT_EQ(j["reads"]["group_size"], 4);
  EXPECT_EQ(j["samples"], 16);
  EXPECT_EQ(j["reads"]["bytes_read"], g["total_bytes"]);
  Outcome again = run_gpemu("dataset group --data " + images + " --out " + groups + " --size 4");
  EXPECT_NE(again.status, 0);  // not empty: refused, nothing touched
  EXPECT_NE(again.err.find("not empty"), std::string::npos) << again.err;
  EXPECT_NE(run_gpemu("dataset group --data " + images + " --out " + groups + "2 --size 0").status, 0);
}

TEST(CliTrain, AnFfcvStyleFileTrainsMemoryMappedOnBothClocks) {
  TempFolder dir;
  const std::string images = make_dataset(dir), file = (dir / "train.ffcv").string();
  auto f = json_of(run_gpemu("dataset ffcv --data " + images + " --out " + file + " --max-resolution 64 --json"));
  EXPECT_EQ(f["samples"], 16);
  EXPECT_EQ(f["jpeg"].get<int>() + f["raw"].get<int>(), 16);
  auto real = json_of(run_gpemu("train --data " + file + " --clock real -b 4 --workers 1 --epochs 1 --json"));
  EXPECT_EQ(real["loader"], "real");
  EXPECT_EQ(real["read_method"], "mmap");
  EXPECT_EQ(real["samples"], 16);
  auto modelled = json_of(run_gpemu("train --data " + file + " --clock virtual -b 4 --workers 1 --json"));
  EXPECT_EQ(modelled["loader"], "modelled");
  EXPECT_EQ(modelled["read_method"], "mmap");
  Outcome again = run_gpemu("dataset ffcv --data " + images + " --out " + file);
  EXPECT_NE(again.status, 0);  // exists: refused, nothing touched
  EXPECT_NE(again.err.find("exists"), std::string::npos) << again.err;
  Outcome folder = run_gpemu("train --data " + images + " --clock real --read-method mmap -b 4 -n 1");
  EXPECT_NE(folder.status, 0);
  EXPECT_NE(folder.err.find("FFCV-style"), std::string::npos) << folder.err;
}

TEST(CliTrain, BadOptionsAreOneLine) {
  for (std::string args :
       {"train --gpus 0 -n 1", "train --synthetic --data /tmp -n 1", "train --pin-mode glue -n 1",
        "train --cache-bytes lots -n 1", "train --read-method aio -n 1", "dataset synth --out /tmp/x --images 0"}) {
    Outcome r = run_gpemu(args);
    EXPECT_NE(r.status, 0) << args;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << args << ": " << r.err;
  }
}

// train accepts predict's model options and agrees with predict on memory:
// the same zoo replay through the caching allocator, the same OOM batch.
TEST(CliTrain, ModelOptionsAndMemoryAgreeWithPredict) {
  const std::string model =
      "--gpu v100 --model bert_base --precision amp --optimizer adam --zero-grad none --seq-len 128";
  const nlohmann::json t = json_of(run_gpemu("train --synthetic --clock virtual -n 4 -b 16 --json " + model));
  const nlohmann::json p = json_of(run_gpemu("predict -b 16 --json " + model));
  EXPECT_EQ(t["precision"], "amp");
  EXPECT_EQ(t["optimizer"], "adam");
  EXPECT_EQ(t["seq_len"], 128);
  EXPECT_EQ(t["memory_plan"], "model zoo (traced tensor lifetimes)");
  EXPECT_DOUBLE_EQ(t["peak_allocated_mib"].get<double>(), p["peak_allocated_mib"].get<double>());
  EXPECT_DOUBLE_EQ(t["peak_reserved_mib"].get<double>(), p["peak_reserved_mib"].get<double>());
  // AMP is faster than FP32 for the same model in train as in predict.
  const nlohmann::json fp32 =
      json_of(run_gpemu("train --synthetic --clock virtual -n 4 -b 16 --json --gpu v100 "
                        "--model bert_base --optimizer adam --zero-grad none --seq-len 128"));
  EXPECT_LT(t["forward_ms_mean"].get<double>(), fp32["forward_ms_mean"].get<double>());

  const nlohmann::json mb = json_of(run_gpemu("predict --max-batch --json --gpu v100 --model resnet50"));
  const int best = mb["max_batch"].get<int>();
  Outcome fits =
      run_gpemu("train --synthetic --clock virtual -n 6 --gpu v100 --model resnet50 -b " + std::to_string(best));
  EXPECT_EQ(fits.status, 0) << fits.err;
  Outcome oom =
      run_gpemu("train --synthetic --clock virtual -n 6 --gpu v100 --model resnet50 -b " + std::to_string(best + 1));
  EXPECT_EQ(oom.status, 3) << oom.err;
  EXPECT_NE(oom.err.find("out of memory"), std::string::npos) << oom.err;
}

// The program variant is a train input as it is a predict input: the same
// flags pick the same graph and give the same step (virtual clock, no noise,
// no warm-up), and a DLIO run, whose YAML replaces the model, refuses them.
TEST(CliTrainVariant, TaskAndVariantFlagsTrainWhatPredictPredicts) {
  const std::string flags =
      "--gpu A100-SXM4-80GB --model bert_base --task squad --seq-len 384 -b 16 --precision amp --amp pure_half "
      "--fused softmax,layer_norm,gelu";
  const auto t = json_of(run_gpemu("train " + flags + " --clock virtual -n 3 --cv 0 --warmup 1 --synthetic --json"));
  const auto p = json_of(run_gpemu("predict " + flags + " --json"));
  EXPECT_EQ(t["model"], "bert_base_squad_fused");
  EXPECT_EQ(t["program_variant"], p["program_variant"]);
  EXPECT_NE(t["program_variant"].get<std::string>().find("amp pure_half fp16"), std::string::npos);
  EXPECT_NEAR(t["forward_ms_mean"].get<double>(), p["forward_ms"].get<double>(), 1e-6 * p["forward_ms"].get<double>());
  EXPECT_NEAR(t["backward_ms_mean"].get<double>(), p["backward_ms"].get<double>(),
              1e-6 * p["backward_ms"].get<double>());
  const Outcome bad = run_gpemu("train --model bert_base --amp o3 --clock virtual -n 1 --synthetic");
  EXPECT_NE(bad.status, 0);
  EXPECT_NE(bad.err.find("--amp"), std::string::npos) << bad.err;
  const Outcome dlio = run_gpemu("train --dlio-config " +
                                 (std::filesystem::path(GPEMU_SOURCE_DIR) / "configs/dlio/unet3d_a100.yaml").string() +
                                 " --matmul-precision high");
  EXPECT_NE(dlio.status, 0);
  EXPECT_NE(dlio.err.find("--matmul-precision"), std::string::npos) << dlio.err;
}

// --loader-scaling: a measured curve slows the modelled loader's workers by
// its efficiency (a CPU-bound epoch of 4 workers on 4 cores at 0.5 of
// linear takes twice as long), says so in the loader line, and a bad file
// is one line naming it.
TEST(CliTrain, AMeasuredLoaderScalingSlowsTheModelledWorkers) {
  TempFolder dir;
  const auto file = dir / "scaling.csv";
  std::ofstream(file) << "workers,images_per_s\n1,100\n4,200\n";
  const std::string base =
      "train --clock virtual --virtual-dataset imagenette10g --model alexnet --gpu h100 -b 64 --iterations 40 "
      "--workers 4 --cores 4 --decode-us 20000 --cv 0 --json";
  const auto linear = json_of(run_gpemu(base));
  const auto scaled = json_of(run_gpemu(base + " --loader-scaling " + file.string()));
  EXPECT_NEAR(scaled["elapsed_s"].get<double>() / linear["elapsed_s"].get<double>(), 2.0, 0.02);
  const Outcome text = run_gpemu(
      "train --clock virtual --virtual-dataset imagenette10g --model alexnet -b 8 "
      "--iterations 2 --workers 4 --cores 4 --loader-scaling " +
      file.string());
  ASSERT_EQ(text.status, 0) << text.err;
  EXPECT_NE(text.out.find("per-worker efficiency 0.500 (" + file.string() + ")"), std::string::npos) << text.out;
  const Outcome bad = run_gpemu("train --clock virtual --synthetic -n 1 --loader-scaling /nonexistent/s.csv");
  EXPECT_NE(bad.status, 0);
  EXPECT_NE(bad.err.find("loader scaling /nonexistent/s.csv: cannot be read"), std::string::npos) << bad.err;
}

}  // namespace
