// Files the DLIO runner writes and reads, faults and interruptions (issue 10;
// IDs from the reliability findings).
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "common/folder_lock.h"
#include "common/interrupt.h"
#include "gpemu/dlio.h"
#include "gpemu/dlio/runner.h"
#include "gpemu/error.h"
#include "support/dlio_test_util.h"

namespace gpemu::dlio {
namespace {

namespace fs = std::filesystem;
using testing::TempDir;

DlioWorkload tiny(const fs::path& dir, std::int64_t files = 6) {
  DlioWorkload w;
  w.source = "tiny";
  w.model.name = "tiny";
  w.framework = Framework::PyTorch;
  w.reader.data_loader = DataLoaderKind::PyTorch;
  w.workflow.generate_data = true;
  w.workflow.train = true;
  w.dataset.data_folder = (dir / "data").string();
  w.dataset.format = DataFormat::Npy;
  w.dataset.num_files_train = files;
  w.dataset.num_samples_per_file = 2;
  w.dataset.record_length_bytes = 1000;
  w.reader.batch_size = 2;
  w.reader.read_threads = 1;
  w.reader.pin_memory = false;
  w.train.epochs = 1;
  w.train.computation_time = TimeSpec::constant(0.001);
  w.checkpoint.checkpoint_folder = (dir / "ckpt").string();
  w.model.model_size_bytes = 4096;
  validate(w);
  return w;
}

DlioRunOptions virtual_options() {
  DlioRunOptions o;
  o.clock = ClockKind::Virtual;
  return o;
}

std::vector<std::string> names_in(const fs::path& dir) {
  std::vector<std::string> out;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) out.push_back(e.path().filename().string());
  std::sort(out.begin(), out.end());
  return out;
}

std::string slurp(const fs::path& p) {
  std::ifstream in(p);
  return {std::istreambuf_iterator<char>(in), {}};
}

// D2: file_prefix with a path wrote outside the data folder.
TEST(DlioFiles, AFilePrefixThatIsNotAFileNameIsRefused) {
  TempDir tmp;
  for (const std::string& prefix :
       std::vector<std::string>{"../../escape", (tmp.path() / "victim").string(), "..", "a/b"}) {
    DlioWorkload w = tiny(tmp.path());
    w.dataset.file_prefix = prefix;
    try {
      generate_dlio_data(w, DlioSplit::Train);
      FAIL() << prefix;
    } catch (const InputError& e) {
      EXPECT_CONTAINS(e.what(), "dataset.file_prefix");
    }
  }
  EXPECT_TRUE(names_in(tmp.path()).empty()) << "refused before anything is created";
}

// D2, second path: regeneration deleted whatever the old manifest listed.
TEST(DlioFiles, RegenerationNeverDeletesAManifestPathOutsideTheFolder) {
  TempDir tmp;
  DlioWorkload w = tiny(tmp.path());
  generate_dlio_data(w, DlioSplit::Train);
  const fs::path victim = tmp.write("victim.txt", "precious");
  const fs::path manifest = tmp.path() / "data" / "train" / ".gpemu-dlio-dataset.json";
  nlohmann::json m = nlohmann::json::parse(slurp(manifest));
  m["files"][0]["path"] = "../../victim.txt";
  std::ofstream(manifest) << m.dump();
  w.dataset.num_files_train = 4;  // other parameters: regenerate
  const DlioData d = generate_dlio_data(w, DlioSplit::Train);
  EXPECT_TRUE(d.generated);
  EXPECT_EQ(slurp(victim), "precious");
  m["files"][0]["path"] = victim.string();  // absolute
  std::ofstream(manifest) << m.dump();
  w.dataset.num_files_train = 3;
  generate_dlio_data(w, DlioSplit::Train);
  EXPECT_EQ(slurp(victim), "precious");
}

// D8: a manifest field of the wrong type blocked even generate_data: True.
TEST(DlioFiles, AManifestWithABadFieldIsRegenerated) {
  TempDir tmp;
  DlioWorkload w = tiny(tmp.path());
  generate_dlio_data(w, DlioSplit::Train);
  const fs::path manifest = tmp.path() / "data" / "train" / ".gpemu-dlio-dataset.json";
  nlohmann::json m = nlohmann::json::parse(slurp(manifest));
  m["files"][0]["bytes"] = "5634";
  std::ofstream(manifest) << m.dump();
  const DlioData d = generate_dlio_data(w, DlioSplit::Train);
  EXPECT_TRUE(d.generated);
  EXPECT_EQ(d.files.size(), 6u);
  EXPECT_NO_THROW(open_dlio_data(w, DlioSplit::Train));
}

// U6: an empty workload file ran on DLIO's default ./data, and the error
// named that folder as if the file had chosen it.
TEST(DlioFiles, AMissingDefaultDataFolderIsSaidToBeTheDefault) {
  TempDir tmp;
  const DlioWorkload empty = parse_dlio_config_string("", {}, {}, "empty.yaml");
  try {
    open_dlio_data(empty, DlioSplit::Train, tmp.path());
    ADD_FAILURE() << "a missing folder was opened";
  } catch (const InputError& e) {
    EXPECT_CONTAINS(e.what(), "does not exist (dataset.data_folder is DLIO's default './data/', resolved against '" +
                                  tmp.path().string() + "': empty.yaml sets no key at all)");
  }
  DlioWorkload chosen = tiny(tmp.path());
  try {
    open_dlio_data(chosen, DlioSplit::Train);
    ADD_FAILURE() << "a missing folder was opened";
  } catch (const InputError& e) {
    EXPECT_EQ(std::string(e.what()).find("default"), std::string::npos) << e.what();
  }
}

// S5: a manifest saying "record_length": 0 was used as it stood: 0 bytes read
// per step, AU 93 %, exit 0.
TEST(DlioFiles, AManifestOfZeroByteRecordsIsRefusedOrRegenerated) {
  TempDir tmp;
  DlioWorkload w = tiny(tmp.path());
  generate_dlio_data(w, DlioSplit::Train);
  const fs::path manifest = tmp.path() / "data" / "train" / ".gpemu-dlio-dataset.json";
  const nlohmann::json good = nlohmann::json::parse(slurp(manifest));
  auto expect_refused = [&](const std::string& field, std::uint64_t value, const std::string& says) {
    nlohmann::json m = good;
    m["files"][1][field] = value;
    std::ofstream(manifest) << m.dump();
    try {
      open_dlio_data(w, DlioSplit::Train);
      ADD_FAILURE() << field << " = " << value << " was used";
    } catch (const InputError& e) {
      EXPECT_CONTAINS(e.what(), "DLIO data: the manifest '" + manifest.string() + "' is not valid: file 1");
      EXPECT_CONTAINS(e.what(), says);
      EXPECT_CONTAINS(e.what(), "accepted: at least one record of at least 1 byte, all inside the file");
      EXPECT_CONTAINS(e.what(), "workflow.generate_data: true");
    }
  };
  expect_refused("record_length", 0, "says 2 records of 0 bytes");
  expect_refused("samples", 0, "says 0 records of 1000 bytes");
  expect_refused("first_offset", 1u << 20, "from byte 1048576");
  expect_refused("record_length", std::uint64_t{1} << 63, "says 2 records of 9223372036854775808 bytes");

  nlohmann::json m = good;
  m["files"][1]["record_length"] = 0;
  std::ofstream(manifest) << m.dump();
  const DlioData d = generate_dlio_data(w, DlioSplit::Train);
  EXPECT_TRUE(d.generated);
  EXPECT_CONTAINS(d.manifest_problem, "the manifest '" + manifest.string() + "' was not valid (file 1");
  EXPECT_CONTAINS(d.manifest_problem, "the folder was generated again");
  const DlioData read = open_dlio_data(w, DlioSplit::Train);
  ASSERT_EQ(read.files.size(), 6u);
  for (const auto& f : read.files) EXPECT_EQ(f.record_length, 1000u);
}

// U1: a link loop in a data folder without a manifest gave std::filesystem's
// text as the whole message.
TEST(DlioFiles, ASymlinkLoopInTheDataFolderIsAnInputErrorNamingIt) {
  TempDir tmp;
  DlioWorkload w = tiny(tmp.path());
  generate_dlio_data(w, DlioSplit::Train);
  const fs::path train = tmp.path() / "data" / "train";
  fs::remove(train / ".gpemu-dlio-dataset.json");
  fs::create_symlink(train / "sub", train / "sub");
  try {
    open_dlio_data(w, DlioSplit::Train);
    FAIL() << "expected an InputError";
  } catch (const InputError& e) {
    EXPECT_EQ(std::string(e.what()), "DLIO data: cannot read '" + (train / "sub").string() +
                                         "': it is a symbolic link loop (Too many levels of symbolic links); remove "
                                         "the link or point it at a file or folder that exists");
  }
}

// D9: a listed file truncated after generation was found only mid-epoch.
TEST(DlioFiles, ATruncatedListedFileIsFoundWhenTheDataIsOpened) {
  TempDir tmp;
  DlioWorkload w = tiny(tmp.path());
  const DlioData d = generate_dlio_data(w, DlioSplit::Train);
  fs::resize_file(d.files.at(2).path, 100);
  try {
    open_dlio_data(w, DlioSplit::Train);
    FAIL() << "expected an InputError";
  } catch (const InputError& e) {
    EXPECT_CONTAINS(e.what(), d.files.at(2).path.string());
    EXPECT_CONTAINS(e.what(), "holds 100 bytes");
  }
}

// D7 and SIGINT during generation: the staging folder and manifest are gone.
TEST(DlioFiles, AnInterruptedGenerationLeavesNoStagingAndNoManifest) {
  TempDir tmp;
  DlioWorkload w = tiny(tmp.path());
  fs::create_directories(tmp.path() / "data" / "train" / ".gpemu-dlio-generating");  // a killed run's
  request_interrupt(SIGINT);
  EXPECT_THROW(generate_dlio_data(w, DlioSplit::Train), Interrupted);
  clear_interrupt();
  EXPECT_EQ(names_in(tmp.path() / "data" / "train"), std::vector<std::string>{FolderLock::kFileName});
}

// U8: generation takes the data folder's lock, so a second run waits.
TEST(DlioFiles, GenerationHoldsTheDataFolderLock) {
  TempDir tmp;
  DlioWorkload w = tiny(tmp.path());
  std::optional<bool> free_during;
  DlioRunOptions o = virtual_options();
  o.progress = [&](const DlioProgress& p) {
    if (p.phase == DlioPhase::Generate && !free_during)
      free_during = FolderLock::try_lock(tmp.path() / "data" / "train").has_value();
  };
  w.workflow.train = false;
  run_dlio_workload(w, o);
  ASSERT_TRUE(free_during.has_value());
  EXPECT_FALSE(*free_during);
  EXPECT_TRUE(FolderLock::try_lock(tmp.path() / "data" / "train").has_value());
}

// U9: a failed checkpoint lost every finished epoch's figures.
TEST(DlioFiles, AFailedCheckpointStillReportsTheFinishedEpochs) {
  TempDir tmp;
  DlioWorkload w = tiny(tmp.path());
  w.train.epochs = 3;
  w.workflow.checkpoint = true;
  w.checkpoint.checkpoint_after_epoch = 2;
  w.checkpoint.checkpoint_folder = tmp.write("a-file", "x").string();  // cannot be a folder
  DlioRunOptions o = virtual_options();
  std::optional<DlioRunRecord> partial;
  o.on_stopped = [&](const DlioRunRecord& r) { partial = r; };
  EXPECT_THROW(run_dlio_workload(w, o), InputError);
  ASSERT_TRUE(partial.has_value());
  ASSERT_TRUE(partial->train.has_value());
  EXPECT_EQ(partial->train->epochs, 2u);
  EXPECT_CONTAINS(partial->stopped, "checkpoint");
  std::ostringstream text;
  print_dlio_result(*partial, text);
  EXPECT_CONTAINS(text.str(), "[METRIC] Epoch 2:");
  EXPECT_CONTAINS(text.str(), "Stopped early");
}

// S6: no measured step gave "AU 0 %, fail" with no word.
TEST(DlioFiles, NoMeasuredStepIsAWarningAndNoVerdict) {
  TempDir tmp;
  DlioWorkload w = tiny(tmp.path());
  w.output.exclude_start_steps = 1000;
  const DlioRunRecord r = run_dlio_workload(w, virtual_options());
  EXPECT_EQ(r.train->measured_steps, 0u);
  ASSERT_FALSE(r.warnings.empty());
  EXPECT_CONTAINS(r.warnings.back(), "no step was measured");
  std::ostringstream text;
  print_dlio_result(r, text);
  EXPECT_CONTAINS(text.str(), "train_au_meet_expectation: undefined");
}

// U9 and a full disk during checkpointing: no partial checkpoint file stays.
TEST(DlioCheckpointFiles, AFailedWriteRemovesThePartialCheckpoint) {
  TempDir tmp;
  DlioWorkload w = tiny(tmp.path());
  w.model.model_size_bytes = 1 << 20;
  const pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    ::signal(SIGXFSZ, SIG_IGN);
    rlimit lim{100000, 100000};
    ::setrlimit(RLIMIT_FSIZE, &lim);
    try {
      write_checkpoint(w);
      ::_exit(1);
    } catch (const InputError& e) {
      ::_exit(std::string(e.what()).find("File too large") != std::string::npos ? 0 : 2);
    } catch (...) {
      ::_exit(3);
    }
  }
  int st = 0;
  ASSERT_EQ(::waitpid(pid, &st, 0), pid);
  ASSERT_TRUE(WIFEXITED(st));
  EXPECT_EQ(WEXITSTATUS(st), 0);
  EXPECT_TRUE(names_in(tmp.path() / "ckpt").empty()) << "the epoch folder and any partial file must go";
}

TEST(DlioCheckpointFiles, AnInterruptedWriteLeavesNothing) {
  TempDir tmp;
  DlioWorkload w = tiny(tmp.path());
  request_interrupt(SIGTERM);
  EXPECT_THROW(write_checkpoint(w), Interrupted);
  clear_interrupt();
  EXPECT_TRUE(names_in(tmp.path() / "ckpt").empty());
}

}  // namespace
}  // namespace gpemu::dlio
