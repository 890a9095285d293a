// `gpemu prep serve` and `gpemu train --clock real --prep-service HOST:PORT`
// as a user runs them: the service in one process (its workers in theirs),
// the training job in another, a few hundred tiny JPEGs between them.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <regex>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "gpemu/pipeline/generator.h"
#include "support/run_gpemu.h"
#include "support/temp_dir.h"

namespace {

using gpemu::testing::run_gpemu;

// `gpemu prep serve --port 0 ...` as a child; its first line gives the port and the workers' pids.
class PrepServeChild {
 public:
  explicit PrepServeChild(const std::vector<std::string>& flags) {
    int p[2];
    EXPECT_EQ(::pipe(p), 0);
    pid_ = ::fork();
    if (pid_ == 0) {
      ::dup2(p[1], 1);
      ::close(p[0]);
      ::close(p[1]);
      std::vector<std::string> args = {GPEMU_BINARY, "prep", "serve", "--port", "0"};
      args.insert(args.end(), flags.begin(), flags.end());
      std::vector<char*> argv;
      for (auto& a : args) argv.push_back(a.data());
      argv.push_back(nullptr);
      ::execv(GPEMU_BINARY, argv.data());
      ::_exit(127);
    }
    ::close(p[1]);
    out_ = ::fdopen(p[0], "r");
    char line[4096] = "";
    if (out_ && std::fgets(line, sizeof line, out_)) first_line_ = line;
    std::smatch m;
    if (std::regex_search(first_line_, m, std::regex("listening on 127\\.0\\.0\\.1:([0-9]+)"))) port_ = std::stoi(m[1]);
    const std::regex pid(": ([0-9]+) \\(port|, ([0-9]+) \\(port");
    for (auto it = std::sregex_iterator(first_line_.begin(), first_line_.end(), pid); it != std::sregex_iterator();
         ++it)
      worker_pids_.push_back(std::stoi((*it)[1].matched ? (*it)[1] : (*it)[2]));
  }
  ~PrepServeChild() {
    if (pid_ > 0) terminate();
    if (out_) std::fclose(out_);
  }
  // SIGTERM; the exit status.
  int terminate() {
    ::kill(pid_, SIGTERM);
    int status = 0;
    ::waitpid(pid_, &status, 0);
    pid_ = -1;
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  }
  int port() const { return port_; }
  const std::string& first_line() const { return first_line_; }
  const std::vector<int>& worker_pids() const { return worker_pids_; }

 private:
  pid_t pid_ = -1;
  FILE* out_ = nullptr;
  std::string first_line_;
  int port_ = -1;
  std::vector<int> worker_pids_;
};

TEST(CliPrepServe, ATrainingJobTakesAnEpochFromTheServiceAndSigtermEndsIt) {
  gpemu::testing::TempDir dir;
  gpemu::pipeline::generate_image_dataset(dir.path(), 4, 200, 5, 1.5);
  PrepServeChild service({"--workers", "2", "--worker-cpus", "1"});
  ASSERT_GT(service.port(), 0) << service.first_line();
  ASSERT_EQ(service.worker_pids().size(), 2u) << service.first_line();
  const std::string train = "train --clock real --data " + dir.path().string() +
                            " --model resnet18 --gpu a100 -b 20 --workers 1 --image-size 32 --json --prep-service "
                            "127.0.0.1:" +
                            std::to_string(service.port());
  for (const char* offload : {"read", "all"}) {
    SCOPED_TRACE(offload);
    const auto r = run_gpemu(train + " --prep-offload " + offload);
    ASSERT_EQ(r.status, 0) << r.err;
    const nlohmann::json j = nlohmann::json::parse(r.out);
    EXPECT_NE(j["source"].get<std::string>().find("preprocessing service 127.0.0.1:"), std::string::npos)
        << j["source"];
    EXPECT_EQ(j["iterations"], 10) << r.out;
    std::string counters;
    for (const auto& n : j["notes"])
      if (n.get<std::string>().rfind("preprocessing service:", 0) == 0) counters = n;
    const bool read = std::string(offload) == "read";
    EXPECT_NE(counters.find(read ? "the workers read 200 samples" : "the workers read 200 samples"), std::string::npos)
        << j["notes"];
    EXPECT_NE(counters.find(read ? "decoded 0," : "decoded 200,"), std::string::npos) << counters;
    EXPECT_NE(counters.find(read ? "the client decoded 200" : "the client decoded 0"), std::string::npos) << counters;
  }
  // The folder as the workers see it may be another path to it.
  const std::filesystem::path link = dir.path().string() + "-link";
  std::filesystem::create_directory_symlink(dir.path(), link);
  const auto r = run_gpemu(train + " --prep-offload decode --prep-data " + link.string());
  std::filesystem::remove(link);
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("the client decoded 0 and batched 10"), std::string::npos) << r.out;
  EXPECT_EQ(service.terminate(), 143);  // 128 + SIGTERM
  for (int pid : service.worker_pids()) EXPECT_NE(::kill(pid, 0), 0) << "worker pid " << pid << " outlived SIGTERM";
}

// The benches run the service in their own process: `bench prep` beside its model, `bench loader`
// beside the other loaders. Their figures are timings; what is checked is that each ran its work.
TEST(CliPrepServe, TheBenchesRunTheServiceOverTheirImages) {
  gpemu::testing::TempDir dir;
  auto r = run_gpemu("bench prep --images 40 --batch-size 8 --image-size 32 --epochs 1 --json --dataset-dir " +
                     (dir.path() / "prep").string());
  ASSERT_EQ(r.status, 0) << r.err;
  nlohmann::json j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["images"], 40);
  EXPECT_EQ(j["service"]["worker_samples_decoded"], 80) << j.dump();  // an epoch to warm, one timed
  EXPECT_GT(j["service"]["modelled_images_per_s"].get<double>(), 0);
  EXPECT_GT(j["local"]["ratio"].get<double>(), 0);
  r = run_gpemu(
      "bench loader --images 12 --workers 1 --no-torch --no-ffcv --gpu-decode '' --json "
      "--service-workers 2 --dataset-dir " +
      (dir.path() / "loader").string());
  ASSERT_EQ(r.status, 0) << r.err;
  j = nlohmann::json::parse(r.out);
  ASSERT_TRUE(j["service"].is_object()) << j.dump();
  EXPECT_EQ(j["service"]["images"], 12);
  EXPECT_EQ(j["service"]["workers"], 2);
  EXPECT_EQ(j["service"]["worker_samples_decoded"], 24);
  EXPECT_GT(j["service_images_per_s"].get<double>(), 0);
}

TEST(CliPrepServe, WhatTheClientCannotUseIsRefusedInOneLine) {
  auto r = run_gpemu(
      "train --clock virtual --virtual-dataset imagenette -n 1 --prep-service 127.0.0.1:1 "
      "--prep-offload all");
  EXPECT_NE(r.status, 0);
  EXPECT_NE(r.err.find("--prep-service feeds the real-clock loader: give --clock real and --data DIR"),
            std::string::npos)
      << r.err;
  r = run_gpemu("train --synthetic -n 1 --prep-service nohost --prep-offload all");
  EXPECT_NE(r.status, 0);
  EXPECT_NE(r.err.find("--prep-service 'nohost': give HOST:PORT"), std::string::npos) << r.err;
  r = run_gpemu("train --synthetic -n 1 --prep-service 127.0.0.1:1");
  EXPECT_NE(r.status, 0);
  EXPECT_NE(r.err.find("--prep-service needs --prep-offload read, decode or all"), std::string::npos) << r.err;
  r = run_gpemu("train --synthetic -n 1 --prep-data /tmp");
  EXPECT_NE(r.status, 0);
  EXPECT_NE(r.err.find("--prep-data names the folder a running service reads: give --prep-service too"),
            std::string::npos)
      << r.err;
  r = run_gpemu("prep serve --workers 0");
  EXPECT_NE(r.status, 0);
  EXPECT_NE(r.err.find("--workers"), std::string::npos) << r.err;
}

}  // namespace
