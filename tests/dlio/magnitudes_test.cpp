// DLIO workloads that ask for the impossible or the absurd: figures past the
// emulated clock, runs of years, counts that exhaust memory, YAML that
// expands without bound. Each is an InputError naming the key (and file
// line), the value and the limit, before anything runs (issue 10: C3, H2, H3,
// H4, S1, S4, S13, U1, U6).
#include <filesystem>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "gpemu/dlio.h"
#include "gpemu/dlio/runner.h"
#include "gpemu/error.h"
#include "pipeline/npy.h"
#include "support/dlio_test_util.h"

namespace gpemu::dlio {
namespace {

using testing::TempDir;

const char* const kSmall = R"(
framework: pytorch
dataset:
  format: npz
  num_files_train: 8
  num_samples_per_file: 2
  record_length_bytes: 4096
reader:
  data_loader: pytorch
  batch_size: 1
train:
  epochs: 1
  computation_time: 0.01
)";

std::string error_of(const std::string& yaml, const std::vector<std::string>& overrides = {}) {
  try {
    parse_dlio_config_string(yaml, overrides, {}, "w.yaml");
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

TEST(DlioMagnitudes, TheSmallWorkloadParses) { EXPECT_EQ(error_of(kSmall), ""); }

TEST(DlioMagnitudes, AComputationTimePastTheLimitIsRefused) {
  // 1e12 s per step wrapped the clock: "emulated compute -18446744073.7 s", AU 4.94 %.
  const std::string err = error_of(kSmall, {"++workload.train.computation_time=1e12"});
  EXPECT_CONTAINS(err, "override '++workload.train.computation_time=1e12'");
  EXPECT_CONTAINS(err, "seconds from 0 to 1e6");
}

TEST(DlioMagnitudes, ARunPastTheClockIsRefusedWithItsFigures) {
  // 16 steps of 1e6 s fit; 1e6 s x 16 epochs of 16 steps x 1000 do not.
  EXPECT_EQ(error_of(kSmall, {"++workload.train.computation_time=1000000"}), "");
  const std::string err =
      error_of(kSmall, {"++workload.train.computation_time=1000000", "++workload.train.epochs=1000"});
  EXPECT_CONTAINS(err, "train.computation_time = 1e+06 s per step is not valid");
  EXPECT_CONTAINS(err, "1.6e+04 steps x 1e+06 s = 1.6e+10 s, past the limit of 2.31e+09 s");
}

TEST(DlioMagnitudes, PreprocessingTimeCountsPerSample) {
  const std::string err = error_of(kSmall, {"++workload.reader.preprocess_time=1000000",
                                            "++workload.reader.batch_size=16", "++workload.train.epochs=1000"});
  EXPECT_CONTAINS(err, "reader.preprocess_time");
}

TEST(DlioMagnitudes, EpochsPastTheLimitAreRefused) {
  // 2147483647 epochs ran 17e9 steps even under the virtual clock.
  const std::string err = error_of(kSmall, {"++workload.train.epochs=2147483647"});
  EXPECT_CONTAINS(err, "train.epochs = 2147483647 is not valid; accepted: an integer from 1 to 1000000");
  const std::string steps = error_of(kSmall, {"++workload.train.epochs=1000000"});
  EXPECT_CONTAINS(steps, "a run of at most 10000000 steps in all; 1000000 epochs of 16 steps are 1.6e+07");
}

// N18: a dataset whose one epoch is past the steps' limit blames its own
// size, not train.epochs (which said "epochs = 1 is not valid").
TEST(DlioMagnitudes, AnEpochTooLongBlamesTheDatasetsKey) {
  const std::string err = error_of(kSmall, {"++workload.dataset.num_samples_per_file=1000000000"});
  EXPECT_CONTAINS(err,
                  "override '++workload.dataset.num_samples_per_file=1000000000': "
                  "dataset.num_samples_per_file = 1000000000 is not valid; accepted: a dataset of at most "
                  "10000000 steps per epoch; 8 files x 1000000000 samples / (1 per batch x 1 rank) are 8e+09");
  EXPECT_EQ(err.find("train.epochs"), std::string::npos) << err;
  EXPECT_CONTAINS(error_of(kSmall, {"++workload.dataset.num_files_train=20000000"}),
                  "dataset.num_files_train = 20000000 is not valid");
}

// S13: a value tagged or quoted as a string is text (epochs: !!str 2 ran 2
// epochs), and an empty GPU name is no GPU's name (gpemu.gpu='' ran with
// the config's step time, without a word).
TEST(DlioMagnitudes, TextWhereANumberGoesAndAnEmptyGpuAreRefused) {
  std::string tagged = kSmall;
  tagged.replace(tagged.find("epochs: 1"), 9, "epochs: !!str 2");
  EXPECT_CONTAINS(error_of(tagged), "train.epochs");
  std::string quoted = kSmall;
  quoted.replace(quoted.find("batch_size: 1"), 13, "batch_size: '1'");
  EXPECT_CONTAINS(error_of(quoted), "reader.batch_size");
  EXPECT_CONTAINS(error_of(kSmall, {"++workload.train.epochs='2'"}), "train.epochs");
  EXPECT_CONTAINS(error_of(kSmall, {"++workload.gpemu.gpu=''"}), "gpemu.gpu = '': an empty name; accepted: a GPU");
  EXPECT_EQ(error_of(kSmall, {"++workload.gpemu.gpu=null"}), "");
  EXPECT_EQ(error_of(kSmall, {"++workload.train.epochs=2"}), "");
}

TEST(DlioMagnitudes, CountsThatWouldExhaustMemoryAreRefused) {
  EXPECT_CONTAINS(
      error_of(kSmall, {"++workload.dataset.num_files_train=9223372036854775807"}),
      "dataset.num_files_train = 9223372036854775807 is not valid; accepted: an integer from 0 to 67108864");
  EXPECT_CONTAINS(error_of(kSmall, {"++workload.dataset.num_samples_per_file=9000000000"}),
                  "dataset.num_samples_per_file = 9000000000 is not valid; accepted: an integer from 1 to 4294967296");
  EXPECT_CONTAINS(error_of(kSmall, {"++workload.dataset.record_length_bytes=1e12"}),
                  "accepted: records of at most 4.29497e+09 bytes (4 GiB)");
  EXPECT_CONTAINS(error_of(kSmall, {"++workload.reader.read_threads=100000"}),
                  "reader.read_threads = 100000 is not valid; accepted: an integer from 0 to 1024");
  EXPECT_CONTAINS(error_of(kSmall, {"++workload.checkpoint.num_checkpoints_write=1000000000"}),
                  "checkpoint.num_checkpoints_write = 1000000000 is not valid");
}

TEST(DlioMagnitudes, SamplesPastTheLoadersLimitAreRefusedBeforeListing) {
  // 10^9 samples per file parse (DLIO's dlrm lists 4.7 million) but cannot
  // be generated or read: it used to end in std::bad_alloc.
  TempDir dir;
  std::filesystem::create_directories(dir.path() / "train");
  DlioWorkload w = parse_dlio_config_string(kSmall, {"++workload.dataset.data_folder=" + dir.path().string(),
                                                     "++workload.dataset.num_samples_per_file=1000000000",
                                                     "++workload.reader.batch_size=1000"});
  try {
    open_dlio_data(w, DlioSplit::Train);
    FAIL() << "8e9 samples were listed";
  } catch (const InputError& e) {
    EXPECT_CONTAINS(e.what(),
                    "dataset.num_files_train x dataset.num_samples_per_file = 8 x 1000000000 = 8e+09 samples; "
                    "gpemu generates and reads at most 67108864 samples per split");
  }
}

TEST(DlioMagnitudes, AGammaOfShapeZeroIsRefused) {
  EXPECT_CONTAINS(error_of(kSmall, {"++workload.train.computation_time={type: gamma, shape: 0, scale: 0}"}),
                  "train.computation_time");
  EXPECT_EQ(error_of(kSmall, {"++workload.train.computation_time={type: gamma, shape: 2, scale: 0.1}"}), "");
}

TEST(DlioMagnitudes, AliasFanOutIsRefusedBeforeItExpands) {
  // Nine levels of nine aliases: 9^9 leaves from 1.2 KB; it used to take 6 GB.
  std::string yaml = "a: &a [x,x,x,x,x,x,x,x,x]\n";
  for (char p = 'a'; p < 'i'; ++p) {
    const char n = static_cast<char>(p + 1);
    yaml += std::string(1, n) + ": &" + n + " [";
    for (int i = 0; i < 9; ++i) yaml += std::string(i ? "," : "") + "*" + p;
    yaml += "]\n";
  }
  const std::string err = error_of(yaml + kSmall);
  EXPECT_CONTAINS(err, "expands to more than 100000 values");
}

TEST(DlioMagnitudes, ManyKeysStillFindADuplicate) {
  // The duplicate check now uses a set (a map of 100k keys took 36 s).
  std::string yaml = std::string(kSmall) + "hydra:\n";
  for (int i = 0; i < 20000; ++i) yaml += "  k" + std::to_string(i) + ": 1\n";
  yaml += "  k17: 2\n";
  EXPECT_CONTAINS(error_of(yaml), "key 'k17' is given twice in the same map");
}

TEST(DlioMagnitudes, ASecondDocumentIsRefused) {
  EXPECT_CONTAINS(error_of(std::string(kSmall) + "---\ntrain:\n  epochs: 3\n"),
                  "w.yaml:14: a second YAML document ('---'); expected one workload per file");
  // A marker before any content starts the first document.
  EXPECT_EQ(error_of(std::string("# c\n---\n") + kSmall), "");
}

TEST(DlioMagnitudes, AStrayCommaIsAnErrorNotAHang) {
  // yaml-cpp's LoadAll looped forever on it, and Load reads it as an empty
  // document, which would be DLIO's defaults (fuzz/dlio_yaml_fuzz.cpp).
  EXPECT_CONTAINS(error_of(std::string(",") + kSmall), "w.yaml: no YAML value could be read");
}

TEST(DlioMagnitudes, MessagesStayOneLine) {
  // A quoted value with a newline was echoed as two lines (fuzz/dlio_yaml_fuzz.cpp).
  const std::string err = error_of("\"mm\\nwo#r oed\"\n");
  EXPECT_CONTAINS(err, "the configuration = 'mm\\nwo#r oed' is not valid");
  EXPECT_EQ(err.find('\n'), std::string::npos) << err;
}

TEST(DlioMagnitudes, ANulByteIsNamed) {
  EXPECT_CONTAINS(error_of(std::string(kSmall) + "x: a" + std::string(1, '\0') + "b\n"), "a NUL byte");
}

TEST(DlioMagnitudes, TheFilesystemRootIsNotADataFolder) {
  EXPECT_CONTAINS(error_of(kSmall, {"++workload.dataset.data_folder=/"}),
                  "dataset.data_folder = / is not valid; accepted: a folder below the filesystem root");
}

TEST(DlioMagnitudes, ACheckpointLargerThanTheDiskIsRefusedBeforeWriting) {
  TempDir dir;
  DlioWorkload w = parse_dlio_config_string(kSmall, {"++workload.model.model_size_bytes=1e15",
                                                     "++workload.checkpoint.checkpoint_folder=" + dir.path().string()});
  CheckpointIoOptions o;
  try {
    write_checkpoint(w, o);
    FAIL() << "a 1 PB checkpoint was started";
  } catch (const InputError& e) {
    EXPECT_CONTAINS(e.what(), "checkpoint (model.model_size_bytes): needs 1000000000000000 bytes (1e+06 GB)");
  }
  for (const auto& e : std::filesystem::recursive_directory_iterator(dir.path()))
    EXPECT_FALSE(e.is_regular_file()) << e.path();
  // Nor an empty epoch1-step0 folder (H4).
  EXPECT_TRUE(std::filesystem::is_empty(dir.path()));
}

// H4: a run found out after its first epoch had trained (and its data was
// generated) that no checkpoint would fit; it is refused before either.
TEST(DlioMagnitudes, ARunWhoseCheckpointCannotFitIsRefusedBeforeItStarts) {
  TempDir dir;
  DlioWorkload w =
      parse_dlio_config_string(kSmall, {"++workload.model.model_size_bytes=1e15", "++workload.workflow.checkpoint=True",
                                        "++workload.workflow.generate_data=True",
                                        "++workload.dataset.data_folder=" + (dir.path() / "data").string(),
                                        "++workload.checkpoint.checkpoint_folder=" + (dir.path() / "ckpt").string()});
  DlioRunOptions o;
  o.clock = ClockKind::Virtual;
  o.base_dir = dir.path();
  try {
    run_dlio_workload(w, o);
    FAIL() << "the run started";
  } catch (const InputError& e) {
    EXPECT_CONTAINS(e.what(), "checkpoint (model.model_size_bytes): needs 1000000000000000 bytes");
  }
  EXPECT_TRUE(std::filesystem::is_empty(dir.path()));  // no data generated, no checkpoint folder
}

TEST(DlioMagnitudes, DliosOwnNpzLayoutIsRefusedNotMisread) {
  // DLIO's generator writes x with shape (dim1, dim2, samples): reading the
  // first axis gave 512 records of 128 bytes instead of 16 of 4096.
  TempDir dir;
  std::filesystem::create_directories(dir.path() / "train");
  for (int i = 0; i < 8; ++i) {
    auto x = pipeline::make_npy_header("|u1", {64, 64, 2});
    x.resize(x.size() + 64 * 64 * 2);
    pipeline::write_stored_zip(dir.path() / "train" / ("img_" + std::to_string(i) + "_of_8.npz"), {{"x.npy", x}});
  }
  DlioWorkload w = parse_dlio_config_string(kSmall, {"++workload.dataset.data_folder=" + dir.path().string()});
  try {
    open_dlio_data(w, DlioSplit::Train);
    FAIL() << "DLIO-layout files were read as records";
  } catch (const InputError& e) {
    EXPECT_CONTAINS(e.what(), "holds 64 records of 128 bytes, but the workload says 2 samples of 4096 bytes");
  }
}

TEST(DlioMagnitudes, AMalformedManifestIsNotReadAndNoLibraryTextReachesTheUser) {
  // It used to be the JSON library's "[json.exception.type_error.302] type must be number".
  // A manifest with a bad field is refused when the data is read (and
  // regenerated when generate_data is on, D8), naming the manifest.
  TempDir dir;
  dir.write("train/.gpemu-dlio-dataset.json",
            R"({"gpemu_dlio_dataset": 1, "params": {}, "files": [{"path": "a.npz", "bytes": "5634", "samples": 2,
               "record_length": 4096, "first_offset": 128}]})");
  DlioWorkload w = parse_dlio_config_string(kSmall, {"++workload.dataset.data_folder=" + dir.path().string()});
  try {
    open_dlio_data(w, DlioSplit::Train);
    FAIL() << "a malformed manifest was read";
  } catch (const InputError& e) {
    EXPECT_EQ(std::string(e.what()).find("json.exception"), std::string::npos) << e.what();
    EXPECT_CONTAINS(e.what(), dir.path().string());
  }
}

}  // namespace
}  // namespace gpemu::dlio
