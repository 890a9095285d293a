// DLIO runner: dataset generation (and skipping it), sharding across ranks,
// AU under the virtual clock (exact), modelled loading, the cost-model step
// time, checkpoints at the configured points, format errors.
#include <algorithm>
#include <cmath>
#include <fstream>
#include <map>
#include <mutex>
#include <set>
#include <sstream>

#include <gtest/gtest.h>

#include "dlio/run_json.h"
#include "gpemu/catalog.h"
#include "gpemu/cost_model.h"
#include "gpemu/dlio.h"
#include "gpemu/dlio/runner.h"
#include "gpemu/error.h"
#include "support/dlio_test_util.h"

namespace gpemu::dlio {
namespace {

namespace fs = std::filesystem;
using testing::TempDir;

// A tiny workload in `dir`: files x samples records of `record` bytes,
// computation_time 10 ms, generate + train.
DlioWorkload tiny(const fs::path& dir, std::int64_t files = 8, std::int64_t samples = 3, double record = 1000) {
  DlioWorkload w;
  w.source = "tiny";
  w.model.name = "tiny";
  w.framework = Framework::PyTorch;
  w.reader.data_loader = DataLoaderKind::PyTorch;
  w.workflow.generate_data = true;
  w.workflow.train = true;
  w.dataset.data_folder = (dir / "data").string();
  w.dataset.format = DataFormat::Npz;
  w.dataset.num_files_train = files;
  w.dataset.num_samples_per_file = samples;
  w.dataset.record_length_bytes = record;
  w.reader.batch_size = 3;
  w.reader.read_threads = 2;
  w.reader.prefetch_size = 2;
  w.reader.pin_memory = false;
  w.train.epochs = 1;
  w.train.computation_time = TimeSpec::constant(0.010);
  w.checkpoint.checkpoint_folder = (dir / "ckpt").string();
  w.model.model_size_bytes = 4096;
  validate(w);
  return w;
}

DlioRunOptions virtual_options(int world_size = 1) {
  DlioRunOptions o;
  o.clock = ClockKind::Virtual;
  o.world_size = world_size;
  return o;
}

std::vector<fs::path> files_in(const fs::path& dir, const std::string& ext) {
  std::vector<fs::path> out;
  for (const auto& e : fs::recursive_directory_iterator(dir)) {
    if (e.is_regular_file() && e.path().extension() == ext) out.push_back(e.path());
  }
  std::sort(out.begin(), out.end());
  return out;
}

// --- Generation -------------------------------------------------------------------

TEST(DlioRunnerData, GeneratesTheFilesAndSkipsThemTheSecondTime) {
  TempDir tmp;
  DlioWorkload w = tiny(tmp.path(), 6, 3, 1000);
  w.workflow.train = false;  // generate only
  const DlioRunRecord first = run_dlio_workload(w, virtual_options());
  const DlioGenerated& g = first.generated_train.value();
  EXPECT_TRUE(g.generated);
  EXPECT_FALSE(g.skipped);
  EXPECT_EQ(g.files, 6u);
  EXPECT_EQ(g.samples, 18u);
  EXPECT_TRUE(first.generation_only);
  EXPECT_FALSE(first.train.has_value());

  const auto files = files_in(tmp.path() / "data" / "train", ".npz");
  ASSERT_EQ(files.size(), 6u);
  EXPECT_EQ(files.front().filename(), "img_0_of_6.npz");
  const DlioData opened = open_dlio_data(w, DlioSplit::Train);
  ASSERT_EQ(opened.files.size(), 6u);
  for (const auto& f : opened.files) {
    EXPECT_EQ(f.samples, 3u);
    EXPECT_EQ(f.record_length, 1000u);
    EXPECT_EQ(f.bytes, fs::file_size(f.path));
    EXPECT_GE(f.bytes, 3000u);
    EXPECT_LT(f.bytes, 3000u + 1024u);  // zip and npy headers
  }
  const auto mtime = fs::last_write_time(files.front());

  const DlioRunRecord second = run_dlio_workload(w, virtual_options());
  EXPECT_FALSE(second.generated_train->generated);
  EXPECT_TRUE(second.generated_train->skipped);
  EXPECT_EQ(fs::last_write_time(files.front()), mtime);

  // Other parameters: generated again, and the old files are gone.
  w.dataset.num_files_train = 4;
  const DlioRunRecord third = run_dlio_workload(w, virtual_options());
  EXPECT_TRUE(third.generated_train->generated);
  EXPECT_EQ(files_in(tmp.path() / "data" / "train", ".npz").size(), 4u);
}

TEST(DlioRunnerData, RawRecordsNpyAndStdevSizes) {
  TempDir tmp;
  DlioWorkload w = tiny(tmp.path(), 5, 4, 512);
  w.dataset.format = DataFormat::IndexedBinary;
  DlioData d = generate_dlio_data(w, DlioSplit::Train);
  ASSERT_EQ(d.files.size(), 5u);
  for (const auto& f : d.files) EXPECT_EQ(fs::file_size(f.path), 4u * 512u);

  TempDir tmp2;
  DlioWorkload v = tiny(tmp2.path(), 40, 2, 10000);
  v.dataset.format = DataFormat::Npy;
  v.dataset.record_length_bytes_stdev = 2000;
  d = generate_dlio_data(v, DlioSplit::Train);
  ASSERT_EQ(d.files.size(), 40u);
  std::set<std::uint64_t> lengths;
  double sum = 0;
  for (const auto& f : d.files) {
    EXPECT_GE(f.record_length, 4000u);
    EXPECT_LE(f.record_length, 16000u);
    EXPECT_EQ(fs::file_size(f.path), f.first_offset + 2 * f.record_length);
    lengths.insert(f.record_length);
    sum += static_cast<double>(f.record_length);
  }
  EXPECT_GT(lengths.size(), 30u);  // sizes vary by file
  EXPECT_NEAR(sum / 40, 10000, 3 * 2000 / std::sqrt(40.0) + 1);
}

TEST(DlioRunnerData, SubfoldersAndFoldersWithoutManifest) {
  TempDir tmp;
  DlioWorkload w = tiny(tmp.path(), 6, 2, 800);
  w.dataset.num_subfolders_train = 2;
  generate_dlio_data(w, DlioSplit::Train);
  EXPECT_EQ(files_in(tmp.path() / "data" / "train" / "0", ".npz").size(), 3u);
  EXPECT_EQ(files_in(tmp.path() / "data" / "train" / "1", ".npz").size(), 3u);
  // Without the manifest the folder is listed (files DLIO or a person wrote).
  fs::remove(tmp.path() / "data" / "train" / ".gpemu-dlio-dataset.json");
  const DlioData d = open_dlio_data(w, DlioSplit::Train);
  ASSERT_EQ(d.files.size(), 6u);
  for (const auto& f : d.files) {
    EXPECT_EQ(f.samples, 2u);
    EXPECT_EQ(f.record_length, 800u);
  }
  w.dataset.num_files_train = 7;
  try {
    open_dlio_data(w, DlioSplit::Train);
    FAIL() << "expected InputError";
  } catch (const InputError& e) {
    EXPECT_CONTAINS(std::string(e.what()), "holds 6");
    EXPECT_CONTAINS(std::string(e.what()), "generate_data");
  }
}

TEST(DlioRunnerData, UnsupportedFormatIsAnInputErrorNamingIt) {
  TempDir tmp;
  DlioWorkload w = tiny(tmp.path());
  w.dataset.format = DataFormat::Parquet;
  try {
    run_dlio_workload(w, virtual_options());
    FAIL() << "expected InputError";
  } catch (const InputError& e) {
    const std::string m = e.what();
    EXPECT_CONTAINS(m, "dataset.format = 'parquet'");
    EXPECT_CONTAINS(m, "accepted: npz, npy, indexed_binary, mmap_indexed_binary");
    EXPECT_CONTAINS(m, "jpeg, tfrecord");
  }
  // Reading an existing folder in that format fails the same way.
  w.workflow.generate_data = false;
  w.dataset.format = DataFormat::Hdf5;
  EXPECT_THROW(run_dlio_workload(w, virtual_options()), InputError);
}

TEST(DlioRunnerData, TrainingWithoutDataSaysHowToGenerateIt) {
  TempDir tmp;
  DlioWorkload w = tiny(tmp.path());
  w.workflow.generate_data = false;
  try {
    run_dlio_workload(w, virtual_options());
    FAIL() << "expected InputError";
  } catch (const InputError& e) {
    EXPECT_CONTAINS(std::string(e.what()), "generate_data");
  }
}

// --- Training -----------------------------------------------------------------------

TEST(DlioRunner, OneEpochReadsEverySampleExactlyOnceAcrossRanks) {
  for (bool shuffle : {false, true}) {
    TempDir tmp;
    DlioWorkload w = tiny(tmp.path(), 8, 3, 1000);  // 24 samples, batch 3, 2 ranks: 4 steps each
    if (shuffle) {
      w.reader.file_shuffle = Shuffle::Seed;
      w.reader.sample_shuffle = Shuffle::Seed;
    }
    std::mutex mu;
    std::map<int, std::vector<std::size_t>> seen;
    DlioRunOptions o = virtual_options(2);
    o.progress = [&](const DlioProgress& p) {
      if (p.phase != DlioPhase::Train) return;
      std::lock_guard lock(mu);
      seen[p.rank].insert(seen[p.rank].end(), p.sample_indices.begin(), p.sample_indices.end());
    };
    const DlioRunRecord r = run_dlio_workload(w, o);
    EXPECT_EQ(r.steps_per_epoch, 4u);
    EXPECT_EQ(r.train->steps, 4u);
    ASSERT_EQ(seen.size(), 2u);
    std::vector<std::size_t> all;
    for (const auto& [rank, v] : seen) {
      EXPECT_EQ(v.size(), 12u) << "rank " << rank;
      all.insert(all.end(), v.begin(), v.end());
    }
    std::sort(all.begin(), all.end());
    std::vector<std::size_t> expected(24);
    for (std::size_t i = 0; i < 24; ++i) expected[i] = i;
    EXPECT_EQ(all, expected) << "shuffle " << shuffle;
    EXPECT_EQ(r.loader->samples >= 24u, true);
  }
}

TEST(DlioRunner, FastLoaderGivesExactlyFullAuUnderTheVirtualClock) {
  TempDir tmp;
  DlioWorkload w = tiny(tmp.path(), 12, 3, 2000);  // 36 samples / 3 / 2 ranks = 6 steps
  w.train.epochs = 2;
  const DlioRunRecord r = run_dlio_workload(w, virtual_options(2));
  EXPECT_EQ(r.clock, "virtual");
  EXPECT_EQ(r.train->epochs, 2u);
  EXPECT_EQ(r.train->steps, 12u);
  EXPECT_DOUBLE_EQ(r.train->au_pct, 100.0);
  EXPECT_TRUE(r.train->au_pass);
  EXPECT_DOUBLE_EQ(r.train->au_threshold_pct, 90.0);
  // 5 measured steps per epoch (the first is left out, DLIO's default), 10 ms each.
  EXPECT_NEAR(r.train->compute_s, 2 * 5 * 0.010, 1e-12);
  EXPECT_NEAR(r.train->total_s, 2 * 5 * 0.010, 1e-12);
  EXPECT_NEAR(r.train->emulated_compute_s, 2 * 5 * 0.010, 1e-12);
  EXPECT_DOUBLE_EQ(r.train->load_wait_s, 0.0);
  // 2 ranks x 3 samples per 10 ms.
  EXPECT_NEAR(r.train->samples_per_s, 600.0, 1e-6);
  EXPECT_NEAR(r.train->mb_per_s, 600.0 * 2000 / (1024.0 * 1024.0), 1e-9);
  ASSERT_EQ(r.train->per_epoch->size(), 2u);
  for (const DlioEpoch& e : *r.train->per_epoch) {
    EXPECT_EQ(e.steps, 6u);
    EXPECT_EQ(e.measured_steps, 5u);
    EXPECT_EQ(e.ranks->size(), 2u);
    EXPECT_DOUBLE_EQ(e.au_pct, 100.0);
  }
  // The whole run took 2 epochs x 6 steps x 10 ms of emulated time.
  EXPECT_NEAR(r.emulated_s, 0.12, 1e-12);
  EXPECT_FALSE(r.checkpoint_gb_per_s.has_value());
}

TEST(DlioRunner, ModelledStorageAndPreprocessingSetTheAuUnderTheVirtualClock) {
  TempDir tmp;
  DlioWorkload w = tiny(tmp.path(), 6, 2, 10000);  // 12 samples, batch 3: 4 steps
  // Loading in the consumer's thread: each step waits for its batch: 3 x 10 kB at 3 MB/s = 10 ms.
  w.reader.read_threads = 0;
  DlioRunOptions o = virtual_options();
  o.storage_bytes_per_s = 3e6;
  DlioRunRecord r = run_dlio_workload(w, o);
  EXPECT_NEAR(r.train->au_pct, 50.0, 1e-6);
  EXPECT_NEAR(r.train->load_wait_s, 3 * 0.010, 1e-9);
  EXPECT_FALSE(r.train->au_pass);

  // DLIO's preprocess_time (per sample), 2 ms x 3 samples + 10 ms of compute: AU 10/16.
  w.workflow.generate_data = false;
  w.reader.preprocess_time = TimeSpec::constant(0.002);
  r = run_dlio_workload(w, virtual_options());
  EXPECT_NEAR(r.train->au_pct, 100.0 * 10 / 16, 1e-6);

  // With two prefetching workers the 6 ms of loading hides behind the 10 ms steps.
  w.reader.read_threads = 2;
  r = run_dlio_workload(w, virtual_options());
  EXPECT_DOUBLE_EQ(r.train->au_pct, 100.0);

  // Counting the first step too (exclude_start_steps 0): it waits 6 ms for its batch.
  w.output.exclude_start_steps = 0;
  r = run_dlio_workload(w, virtual_options());
  EXPECT_NEAR(r.train->au_pct, 100.0 * 0.040 / 0.046, 1e-6);
}

TEST(DlioRunner, ComputationTimeDistributionIsSeeded) {
  TempDir tmp;
  DlioWorkload w = tiny(tmp.path(), 30, 1, 500);  // 10 steps
  w.train.computation_time.stdev = 0.002;
  const DlioRunRecord a = run_dlio_workload(w, virtual_options());
  w.workflow.generate_data = false;
  const DlioRunRecord b = run_dlio_workload(w, virtual_options());
  EXPECT_EQ(a.train->emulated_compute_s, b.train->emulated_compute_s);
  EXPECT_NE(a.train->emulated_compute_s, 9 * 0.010);
  EXPECT_NEAR(a.train->emulated_compute_s, 9 * 0.010, 0.02);
  EXPECT_DOUBLE_EQ(a.train->au_pct, 100.0);
}

TEST(DlioRunner, CostModelStepTimeWhenAGpuIsNamed) {
  TempDir tmp;
  DlioWorkload w = tiny(tmp.path(), 8, 2, 1000);  // 16 samples, batch 4: 4 steps
  w.reader.batch_size = 4;
  w.model.name = "resnet50";
  w.gpemu.gpu = find_gpu("v100").id;
  w.gpemu.step_time = StepTimeSource::Auto;  // auto + gpu: the cost model
  const StepCost cost = make_cost_model(std::nullopt)->step_cost(find_gpu("v100"), "resnet50", 4);
  const double step = to_seconds(cost.forward + cost.backward);
  ASSERT_GT(step, 0.0);
  ASSERT_NE(step, 0.010);

  const DlioRunRecord r = run_dlio_workload(w, virtual_options());
  EXPECT_EQ(r.step_time_source, StepTimeSource::CostModel);
  EXPECT_EQ(r.gpu, find_gpu("v100").id);
  EXPECT_NEAR(r.step_time_s, step, 1e-12);
  EXPECT_NEAR(r.cost_model->forward_s, to_seconds(cost.forward), 1e-12);
  EXPECT_NEAR(r.train->emulated_compute_s, 3 * step, 1e-9);
  EXPECT_NEAR(r.emulated_s, 4 * step, 1e-9);
  EXPECT_DOUBLE_EQ(r.train->au_pct, 100.0);

  // step_time: config uses computation_time even with a GPU.
  w.workflow.generate_data = false;
  w.gpemu.step_time = StepTimeSource::Config;
  const DlioRunRecord c = run_dlio_workload(w, virtual_options());
  EXPECT_EQ(c.step_time_source, StepTimeSource::Config);
  EXPECT_NEAR(c.train->emulated_compute_s, 3 * 0.010, 1e-12);

  // An unknown cost model is an InputError.
  w.gpemu.step_time = StepTimeSource::CostModel;
  w.model.name = "no_such_model";
  EXPECT_THROW(run_dlio_workload(w, virtual_options()), InputError);
}

TEST(DlioRunner, CheckpointsAtTheConfiguredEpochs) {
  TempDir tmp;
  DlioWorkload w = tiny(tmp.path(), 6, 1, 1000);  // 2 steps per epoch
  w.train.epochs = 4;
  w.workflow.checkpoint = true;
  w.checkpoint.checkpoint_after_epoch = 2;
  w.checkpoint.epochs_between_checkpoints = 2;
  std::vector<int> progress_epochs;
  DlioRunOptions o = virtual_options(2);
  o.checkpoint_read_back = true;
  o.progress = [&](const DlioProgress& p) {
    if (p.phase == DlioPhase::Checkpoint) progress_epochs.push_back(p.epoch);
  };
  w.reader.batch_size = 1;  // 6 samples / 2 ranks: 3 steps per epoch
  const DlioRunRecord r = run_dlio_workload(w, o);
  ASSERT_EQ(r.checkpoints.size(), 2u);
  EXPECT_EQ(r.checkpoints[0].epoch, 2);
  EXPECT_EQ(r.checkpoints[0].step, 3u);
  EXPECT_EQ(r.checkpoints[1].epoch, 4);
  EXPECT_EQ(r.checkpoints[0].ranks, std::vector<int>{0});  // rank_zero
  EXPECT_EQ(r.checkpoints[0].bytes, 4096u);
  EXPECT_EQ(r.checkpoints[0].bytes_read, 4096u);
  ASSERT_TRUE(r.checkpoint_gb_per_s.has_value());
  EXPECT_GT(*r.checkpoint_gb_per_s, 0.0);
  EXPECT_EQ(progress_epochs, (std::vector<int>{2, 4}));
  EXPECT_TRUE(fs::exists(tmp.path() / "ckpt" / "epoch2-step3" / "rank0-model.bin"));
  EXPECT_TRUE(fs::exists(tmp.path() / "ckpt" / "epoch4-step3" / "rank0-model.bin"));
  EXPECT_FALSE(fs::exists(tmp.path() / "ckpt" / "epoch3-step3"));
  EXPECT_DOUBLE_EQ(r.train->au_pct, 100.0);  // real writes take no virtual time
}

TEST(DlioRunner, StepCheckpointsSplitTheEpochIntoBlocks) {
  TempDir tmp;
  DlioWorkload w = tiny(tmp.path(), 12, 1, 1000);
  w.reader.batch_size = 2;  // 6 steps
  w.workflow.checkpoint = true;
  w.checkpoint.steps_between_checkpoints = 3;
  w.checkpoint.type = CheckpointType::AllRanks;
  w.reader.read_threads = 0;  // no prefetched reads share the storage link with the checkpoint
  DlioRunOptions o = virtual_options();
  o.storage_bytes_per_s = 4096 / 0.5;  // the 4 kB checkpoint takes 0.5 s of modelled storage
  o.trace = true;
  std::size_t spans = 0;
  o.on_timeline = [&](Timeline& t, const std::vector<TraceDeviceName>& names) {
    spans = t.host_spans().size();
    EXPECT_EQ(names.size(), 1u);
  };
  const DlioRunRecord r = run_dlio_workload(w, o);
  ASSERT_EQ(r.checkpoints.size(), 2u);
  EXPECT_EQ(r.checkpoints[0].step, 3u);
  EXPECT_EQ(r.checkpoints[1].step, 6u);
  EXPECT_NEAR(r.checkpoints[0].emulated_s, 0.5, 1e-6);
  // Checkpoint time is outside the training blocks (as in DLIO); each block
  // leaves its first step out.
  EXPECT_EQ(r.train->per_epoch->at(0).measured_steps, 4u);
  EXPECT_GT(spans, 0u);
  EXPECT_LT(r.train->au_pct, 100.0);  // the data reads are modelled too
}

// The figures are summed as the steps run (the record keeps no step): the
// same whether or not each step's row is kept too, checkpoints splitting blocks.
TEST(DlioRunner, FiguresAreTheSameWithOrWithoutTheStepRows) {
  TempDir tmp;
  DlioWorkload w = tiny(tmp.path(), 12, 1, 1000);
  w.reader.batch_size = 2;  // 6 steps
  w.train.epochs = 2;
  w.workflow.checkpoint = true;
  w.checkpoint.steps_between_checkpoints = 2;
  w.checkpoint.type = CheckpointType::AllRanks;
  w.output.exclude_end_steps = 1;
  DlioRunOptions o = virtual_options();
  o.storage_bytes_per_s = 4096 / 0.25;
  DlioRunRecord flat = run_dlio_workload(w, o);
  o.record_steps = true;
  DlioRunRecord rows = run_dlio_workload(w, o);
  ASSERT_EQ(rows.train->per_epoch->at(0).step_records->size(), 6u);
  for (DlioEpoch& e : *rows.train->per_epoch) e.step_records.reset();
  // (Checkpoint writes and the loader's order are real, timed on the wall.)
  const DlioPhaseResult &f = *flat.train, &t = *rows.train;
  EXPECT_EQ(f.per_epoch, t.per_epoch);
  EXPECT_EQ(f.au_pct, t.au_pct);
  EXPECT_EQ(f.samples_per_s, t.samples_per_s);
  EXPECT_EQ(f.mb_per_s, t.mb_per_s);
  EXPECT_EQ(f.compute_s, t.compute_s);
  EXPECT_EQ(f.total_s, t.total_s);
  EXPECT_EQ(f.measured_steps, t.measured_steps);
  EXPECT_EQ(f.steps, t.steps);
  EXPECT_EQ(flat.emulated_s, rows.emulated_s);
  // Blocks of 2 steps, each leaving its first out, the epoch's last left out.
  EXPECT_EQ(flat.train->per_epoch->at(0).measured_steps, 2u);
}

TEST(DlioRunner, CheckpointOnlyMode) {
  TempDir tmp;
  DlioWorkload w = tiny(tmp.path());
  w.workflow.generate_data = false;
  w.workflow.train = false;
  w.workflow.checkpoint = true;
  w.checkpoint.num_checkpoints_write = 3;
  const DlioRunRecord r = run_dlio_workload(w, virtual_options());
  EXPECT_EQ(r.checkpoints.size(), 3u);
  EXPECT_FALSE(r.train.has_value());  // no training: no figures
  EXPECT_FALSE(r.generation_only);
  EXPECT_TRUE(fs::exists(tmp.path() / "ckpt" / "epoch0-step3" / "rank0-model.bin"));
}

TEST(DlioRunner, EvaluationAfterTheConfiguredEpochs) {
  TempDir tmp;
  DlioWorkload w = tiny(tmp.path(), 6, 2, 1000);
  w.dataset.num_files_eval = 2;
  w.reader.batch_size_eval = 2;
  w.workflow.evaluation = true;
  w.train.epochs = 3;
  w.evaluation.eval_time = TimeSpec::constant(0.004);
  w.evaluation.eval_after_epoch = 2;
  const DlioRunRecord r = run_dlio_workload(w, virtual_options());
  ASSERT_TRUE(r.eval.has_value());
  EXPECT_EQ(r.generated_eval->files, 2u);
  EXPECT_EQ(r.eval->epochs, 2u);  // after epochs 2 and 3
  EXPECT_EQ(r.eval->steps_per_epoch, 2u);
  EXPECT_NEAR(r.eval->emulated_compute_s, 2 * 1 * 0.004, 1e-12);
  EXPECT_TRUE(fs::exists(tmp.path() / "data" / "valid"));
}

TEST(DlioRunner, JpegFilesAreReadAndDecoded) {
  TempDir tmp;
  DlioWorkload w = tiny(tmp.path(), 4, 1, 6000);
  w.dataset.format = DataFormat::Jpeg;
  w.reader.batch_size = 2;
  const DlioRunRecord r = run_dlio_workload(w, virtual_options());
  EXPECT_EQ(files_in(tmp.path() / "data" / "train", ".jpg").size(), 4u);
  EXPECT_EQ(r.train->steps, 2u);
  EXPECT_DOUBLE_EQ(r.train->au_pct, 100.0);
  w.dataset.num_samples_per_file = 2;
  EXPECT_THROW(generate_dlio_data(w, DlioSplit::Train), InputError);
}

TEST(DlioRunner, SyntheticLoaderReadsNoFiles) {
  TempDir tmp;
  DlioWorkload w = tiny(tmp.path(), 8, 3, 1000);
  w.workflow.generate_data = false;  // no files at all
  w.reader.data_loader = DataLoaderKind::Synthetic;
  w.framework = Framework::PyTorch;
  std::set<std::size_t> seen;
  DlioRunOptions o = virtual_options(2);
  o.progress = [&](const DlioProgress& p) { seen.insert(p.sample_indices.begin(), p.sample_indices.end()); };
  const DlioRunRecord r = run_dlio_workload(w, o);
  EXPECT_TRUE(r.synthetic_data);
  EXPECT_EQ(r.train->steps, 4u);
  EXPECT_EQ(seen.size(), 24u);
  EXPECT_DOUBLE_EQ(r.train->au_pct, 100.0);
  EXPECT_EQ(r.loader->bytes_read, 0u);
  EXPECT_NEAR(r.train->mb_per_s, 600.0 * 1000 / (1024.0 * 1024.0), 1e-9);
  EXPECT_FALSE(fs::exists(tmp.path() / "data"));
}

TEST(DlioRunner, BadOptionsAreInputErrors) {
  TempDir tmp;
  DlioWorkload w = tiny(tmp.path());
  DlioRunOptions o = virtual_options(2);
  o.ranks = {2};
  EXPECT_THROW(run_dlio_workload(w, o), InputError);
  o = virtual_options();
  w.reader.batch_size = 100;  // 24 samples: no step
  EXPECT_THROW(run_dlio_workload(w, o), InputError);
}

TEST(DlioRunner, RealClockRunAndPrintedSummary) {
  TempDir tmp;
  DlioWorkload w = tiny(tmp.path(), 4, 3, 1000);  // 4 steps of 2 ms
  w.train.computation_time = TimeSpec::constant(0.002);
  DlioRunOptions o;
  o.clock = ClockKind::Real;
  const DlioRunRecord r = run_dlio_workload(w, o);
  EXPECT_EQ(r.clock, "real");
  EXPECT_EQ(r.train->steps, 4u);
  EXPECT_GT(r.train->au_pct, 0.0);
  EXPECT_GT(r.train->total_s, 0.0);
  std::ostringstream out;
  print_dlio_result(r, out);
  EXPECT_CONTAINS(out.str(), "[METRIC] Training Accelerator Utilization [AU] (%):");
  EXPECT_CONTAINS(out.str(), "train_au_meet_expectation");
  EXPECT_CONTAINS(out.str(), "Number of Simulated Accelerators: 1");
}

// A workload file of 8 samples of 512 bytes in data/ (below the run's base
// folder), batch 2, steps of 5 ms.
constexpr const char* kTinyYaml = R"(model:
  name: tiny
framework: pytorch
workflow:
  generate_data: true
  train: true
dataset:
  data_folder: data
  format: npy
  num_files_train: 4
  num_samples_per_file: 2
  record_length_bytes: 512
reader:
  data_loader: pytorch
  batch_size: 2
train:
  epochs: 1
  computation_time: 0.005
)";

TEST(DlioRunner, RunsAParsedConfigWithOverrides) {
  TempDir tmp;
  const auto file = tmp.write("w.yaml", kTinyYaml);
  DlioRunOptions o = virtual_options();
  o.base_dir = tmp.path();
  const DlioRunRecord r = run_dlio_config(file, {"++workload.train.epochs=2"}, o);
  EXPECT_EQ(r.train->epochs, 2u);
  EXPECT_EQ(r.steps_per_epoch, 4u);
  EXPECT_TRUE(fs::exists(tmp.path() / "data" / "train"));
}

// --- Several nodes (gpemu.nodes, gpemu.network) -------------------------------------

// megatron_deepspeed's 32 ranks (tensor 4 x pipeline 8) as 4 modelled nodes of
// 8: the record and its JSON say so, and no figure moves, since DLIO's steps
// cross no link (its computation_time holds any all-reduce).
TEST(DlioRunner, ThirtyTwoRanksRunAsFourModelledNodesOfEight) {
  TempDir tmp;
  DlioWorkload w = tiny(tmp.path(), 64, 3, 1000);  // 192 samples, batch 3, 32 ranks: 2 steps each
  w.model.parallelism.tensor = 4;
  w.model.parallelism.pipeline = 8;
  w.gpemu.world_size = 32;
  validate(w);
  // World size 0: gpemu.world_size. 32 ranks on one node, as before:
  const DlioRunRecord one = run_dlio_workload(w, virtual_options(0));
  w.gpemu.nodes = 4;
  validate(w);
  const DlioRunRecord four = run_dlio_workload(w, virtual_options(0));
  EXPECT_EQ(one.nodes, 1);
  EXPECT_EQ(one.network, "");
  EXPECT_EQ(four.nodes, 4);
  EXPECT_EQ(four.network, "100gbe");
  EXPECT_EQ(four.gpus, 32);
  EXPECT_EQ(four.ranks.size(), 32u);
  ASSERT_TRUE(one.train && four.train);
  EXPECT_EQ(four.train->steps, 2u);
  EXPECT_DOUBLE_EQ(four.train->au_pct, 100.0);  // the virtual clock's reads take no time
  EXPECT_EQ(four.train->au_pct, one.train->au_pct);
  EXPECT_EQ(four.train->samples_per_s, one.train->samples_per_s);
  EXPECT_EQ(four.train->total_s, one.train->total_s);
  EXPECT_EQ(four.train->compute_s, one.train->compute_s);
  EXPECT_EQ(four.emulated_s, one.emulated_s);
  const nlohmann::json j = dlio_run_json(four);
  EXPECT_EQ(j["nodes"], 4);
  EXPECT_EQ(j["network"], "100gbe");
  EXPECT_EQ(dlio_run_json(one)["nodes"], 1);
  EXPECT_TRUE(dlio_run_json(one)["network"].is_null());
  std::ostringstream out;
  print_dlio_result(four, out);
  EXPECT_CONTAINS(out.str(), "[METRIC] Modelled nodes: 4 of 8 accelerators each, joined by 100gbe");
}

// The nodes' layout, the network's name and the clock are checked before any
// data is written, each refusal one line naming the key and what is accepted.
TEST(DlioRunner, ModelledNodesOutsideTheirRulesAreOneLineErrors) {
  TempDir tmp;
  const auto file = tmp.write("w.yaml", kTinyYaml);
  auto error_of = [&](const std::vector<std::string>& overrides, ClockKind clock = ClockKind::Virtual,
                      int world_size = 0, std::vector<int> ranks = {}) {
    DlioRunOptions o;
    o.clock = clock;
    o.world_size = world_size;
    o.ranks = std::move(ranks);
    o.base_dir = tmp.path();
    try {
      run_dlio_config(file, overrides, o);
    } catch (const InputError& e) {
      EXPECT_EQ(std::string(e.what()).find('\n'), std::string::npos) << e.what();
      return std::string(e.what());
    }
    return std::string("(no error)");
  };
  EXPECT_CONTAINS(error_of({"++workload.gpemu.world_size=32", "++workload.gpemu.nodes=3"}),
                  "override '++workload.gpemu.nodes=3': gpemu.nodes = 3 is not valid; accepted: a divisor of the "
                  "world size 32 (gpemu.world_size, --gpus)");
  EXPECT_CONTAINS(error_of({"++workload.gpemu.world_size=32", "++workload.gpemu.nodes=2"}),
                  "gpemu.nodes = 2 is not valid; accepted: 1, or a divisor of the world size 32 of at least 4, so "
                  "that a node holds at most 8 ranks");
  EXPECT_CONTAINS(error_of({"++workload.gpemu.nodes=0"}), "gpemu.nodes = '0' is not valid; accepted: an integer >= 1");
  // A world size given to the runner rather than the file is checked too.
  EXPECT_CONTAINS(error_of({"++workload.gpemu.world_size=8", "++workload.gpemu.nodes=8"}, ClockKind::Virtual, 12),
                  "gpemu.nodes = 8 is not valid; accepted: a divisor of the world size 12");
  EXPECT_CONTAINS(
      error_of({"++workload.gpemu.world_size=4", "++workload.gpemu.nodes=2", "++workload.gpemu.network=50gbe"}),
      "override '++workload.gpemu.network=50gbe': gpemu.network = '50gbe' is not valid; accepted: 10gbe, 25gbe, "
      "100gbe, 400gbe or a network JSON file");
  EXPECT_CONTAINS(error_of({"++workload.gpemu.world_size=4", "++workload.gpemu.nodes=2"}, ClockKind::Real),
                  "gpemu.nodes = 2 is not valid; accepted: 1 under the real clock: modelled nodes need the virtual "
                  "clock (--clock virtual)");
  EXPECT_CONTAINS(error_of({"++workload.gpemu.world_size=4", "++workload.gpemu.nodes=2"}, ClockKind::Virtual, 0, {1}),
                  "accepted: 1 when this process runs some ranks only");
  EXPECT_FALSE(fs::exists(tmp.path() / "data"));  // refused before anything was generated
}

// --- TimeSampler --------------------------------------------------------------------

TEST(DlioTimeSampler, SeededDrawsOfEachDistribution) {
  auto mean_of = [](const TimeSpec& t, std::uint64_t seed) {
    TimeSampler s(t, seed);
    double sum = 0;
    for (int i = 0; i < 20000; ++i) {
      const double v = s.next_seconds();
      EXPECT_GE(v, 0.0);
      sum += v;
    }
    return sum / 20000;
  };
  TimeSpec n = TimeSpec::constant(1.0);
  EXPECT_TRUE(TimeSampler(n, 1).constant());
  n.stdev = 0.1;
  EXPECT_NEAR(mean_of(n, 1), 1.0, 0.01);
  EXPECT_EQ(mean_of(n, 7), mean_of(n, 7));
  TimeSpec u;
  u.distribution = Distribution::Uniform;
  u.min = 1;
  u.max = 3;
  EXPECT_NEAR(mean_of(u, 2), 2.0, 0.03);
  TimeSpec g;
  g.distribution = Distribution::Gamma;
  g.shape = 2;
  g.scale = 0.5;
  EXPECT_NEAR(mean_of(g, 3), 1.0, 0.03);
  g.shape = 0.5;
  EXPECT_NEAR(mean_of(g, 3), 0.25, 0.02);
  TimeSpec e;
  e.distribution = Distribution::Exponential;
  e.scale = 0.2;
  EXPECT_NEAR(mean_of(e, 4), 0.2, 0.01);
  TimeSpec p;
  p.distribution = Distribution::Poisson;
  p.lam = 3;
  EXPECT_NEAR(mean_of(p, 5), 3.0, 0.1);
  p.lam = 100;
  EXPECT_NEAR(mean_of(p, 5), 100.0, 0.5);
  TimeSpec clipped = TimeSpec::constant(0.001);
  clipped.stdev = 1.0;  // mostly negative draws: clipped to 0
  TimeSampler s(clipped, 9);
  for (int i = 0; i < 100; ++i) EXPECT_GE(s.next_seconds(), 0.0);
}

}  // namespace
}  // namespace gpemu::dlio
