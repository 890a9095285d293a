// Measured profiles: how long one training iteration of a model took on a real
// GPU (forward, backward, the host-to-device copy of a batch) and how much GPU
// memory it allocated, as functions of the batch size. A ProfileDatabase holds
// the profiles of many (GPU, model) pairs, read from either of two layouts:
//
//   - GPEmu's `profiled_data` tree (the VLDB 2025 artifact): one CSV per GPU,
//     model and quantity, with extrapolated rows appended past the batch sizes
//     that ran out of memory (see extrapolated_tail_start below);
//   - gpemu's own format, one JSON file per (GPU, model) (docs/profiles.md),
//     which gpemu also writes.
//
// A series is replayed exactly at a measured batch size, interpolated linearly
// between measured sizes and extrapolated linearly beyond them; every value
// says which of these it is (Provenance).
//
// Thread safety: all functions are reentrant; a ProfileDatabase is not
// modified by its const members, so a loaded one may be shared between threads.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "gpemu/catalog.h"
#include "gpemu/device/host_memory.h"

namespace gpemu {

// Where a cost figure came from, from most to least trustworthy.
enum class Provenance {
  Measured,      // replayed from a profile row at exactly this batch size
  Interpolated,  // linear between the two nearest measured batch sizes
  Extrapolated,  // outside the measured batch sizes, linear from the nearest ones
  Estimated,     // nothing measured: a model of the GPU and the network
};
// "measured", "interpolated", "extrapolated", "estimated".
std::string_view to_string(Provenance p);

// One measured value of a quantity at one batch size.
struct ProfilePoint {
  int batch_size = 0;
  double value = 0;
  bool operator==(const ProfilePoint&) const = default;
};

// A quantity as a function of batch size: points with strictly increasing
// batch sizes (the readers sort and reject duplicates).
using Series = std::vector<ProfilePoint>;

struct SeriesValue {
  double value = 0;
  Provenance provenance = Provenance::Measured;
};

// How many of the points nearest to the edge the extrapolating line is fitted
// to (least squares through the edge point, so the line meets the data there).
inline constexpr std::size_t kExtrapolationWindow = 8;

// The value of `series` at `batch_size`: the measured value where there is
// one, linear interpolation between the neighbours inside the measured range,
// and outside it the line through the edge point whose slope fits the
// kExtrapolationWindow points nearest that edge (clamped at 0; with a single
// point, proportional to the batch size). Throws InputError when batch_size < 1
// or the series is empty.
SeriesValue lookup(std::span<const ProfilePoint> series, int batch_size);

// Relative tolerance within which consecutive slopes count as equal when
// looking for an extrapolated tail. Consecutive slopes of real measurements
// differ by >= 1e-5 relative (or, rarely, coincide exactly through timer
// quantisation); those of GPEmu's extrapolated rows by <= 1e-13 (float64
// rounding).
inline constexpr double kTailTolerance = 1e-9;

// GPEmu appended, for batch sizes that ran out of memory on the real card, rows
// lying exactly on a straight line. Returns the index of the first such row:
// the start of the longest suffix of at least 3 rows (sorted by batch size)
// whose consecutive slopes agree within rel_tolerance, or rows.size() when
// there is none. A table that is one straight line from its first row is
// taken as measured (a tail needs a real measurement before it). The row
// before the tail is the last measured one; the first tail row's batch size is
// the smallest that did not fit on the card.
std::size_t extrapolated_tail_start(std::span<const ProfilePoint> rows, double rel_tolerance = kTailTolerance);

// Lower-case, '-' read as '_': "ResNet-50" and "resnet_50" name one model.
std::string canonical_model_name(std::string_view name);

// One aten op as `gpemu profile` measured it with torch.profiler: the calls
// of one batch size that share (phase, op, shapes, dtype), aggregated
// (docs/profiles.md, "Per-op GPU times").
struct MeasuredOp {
  int batch_size = 0;
  std::string phase;     // "forward", "loss", "backward" or "optimizer" (zero_grad included)
  std::string op;        // the outermost aten op, e.g. "aten::conv2d"
  std::string op_class;  // the model zoo's class of the aten ops inside it ("conv", ...)
  std::string shapes;    // its input shapes, as compact JSON ("[[1,3,224,224],[64,3,7,7],[]]")
  std::string dtype;     // its first tensor's dtype ("float", "half"); empty when not recorded
  double calls_per_step = 0;
  double seconds_per_call = 0;       // Profile::op_timer's time of the op and the ops inside it
  std::vector<std::string> kernels;  // CUDA kernels' names (a GPU only; at most 8)
};

// Everything measured for one model on one GPU. Series may be empty when the
// source had no such table; all series hold real measurements only
// (extrapolated tails removed).
struct Profile {
  std::string gpu;    // canonical catalog id, e.g. "V100-PCIE-32GB"
  std::string model;  // canonical model name, e.g. "resnet50"
  Precision precision = Precision::FP32;
  // Host memory the transfer_s rows were copied from. GPEmu measured pageable.
  HostMemoryKind transfer_host_memory = HostMemoryKind::Pageable;
  // Bytes of one input sample as copied to the GPU; 0 when unknown.
  std::uint64_t input_bytes_per_sample = 0;

  Series forward_s;   // seconds per iteration: forward pass
  Series backward_s;  // seconds per iteration: loss + zero_grad + backward + optimizer step
  Series transfer_s;  // seconds: host-to-device copy of one batch of inputs
  // MiB (2^20 bytes) of torch.cuda.memory_allocated / memory_reserved.
  Series peak_allocated_mib;  // peak during an iteration, everything included
  Series peak_reserved_mib;   // peak reserved by the caching allocator
  Series persistent_mib;      // live across iterations: weights, grads, optimizer state (not the batch)
  Series forward_cv;          // coefficient of variation of per-iteration forward time
  Series backward_cv;

  std::optional<int> oom_batch_size;       // smallest batch size measured not to fit
  std::optional<double> model_transfer_s;  // copying the model to the GPU, once
  std::string source;                      // where it was read from, for messages
  // Free text kept with gpemu's own format ("comment"): what measured it
  // (gpemu profile: GPU, driver, torch, CUDA, cuDNN, host CPU).
  std::string comment;
  // Per-op times (gpemu's own format only): "cuda" (kernel time on the GPU)
  // or "cpu" (CPU time: a test of the profiler, not a GPU's); empty without ops.
  std::string op_timer;
  std::vector<MeasuredOp> ops;
};

enum class ProfileLayout {
  GPEmuArtifact,  // time/compute/{forward,backward}/<GPU>/<model>/..., memory/<GPU>/<model>/...
  Native,         // <gpu-id>/<model>.json, format "gpemu-profile/1"
};
std::string_view to_string(ProfileLayout layout);

// Reads GPEmu's profiled_data tree under `dir` (any of time/compute,
// time/transfer and memory may be missing). GPU directory names resolve through
// find_gpu. Batch sizes may be written as floats ("64.0") but must be whole.
// Extrapolated tails of the compute tables are removed and give oom_batch_size;
// memory rows at or past that batch size are dropped too (they cannot have been
// measured). GPEmu's `persistent` column includes the input batch already on
// the GPU; it is subtracted here (3x224x224 FP32 images, so
// input_bytes_per_sample = 602112). Memory is read as MiB. Throws InputError
// naming the file and line for a malformed file, and the path for an
// unresolvable GPU directory. With `skipped` (GPEmu's complete profiled_data
// has fitted rows with impossible values and folders missing a file), a
// malformed row is left out ("<file>:<line>: ...; row skipped") and a model
// folder whose table cannot be read at all is left out ("...; folder <path>
// skipped"), each appended to `skipped` once, and the rest is read; an
// unresolvable GPU directory or a pair in two folders still throws.
std::vector<Profile> read_gpemu_artifact(const std::filesystem::path& dir, std::vector<std::string>* skipped = nullptr);

// The identifier in the "format" field of gpemu's own profile files.
inline constexpr std::string_view kNativeProfileFormat = "gpemu-profile/1";

// Reads one gpemu-profile/1 file. Throws InputError naming the file, the line
// and what is accepted when the file is malformed.
Profile read_native_profile(const std::filesystem::path& file);
// The same for text already in memory; `source` names it in messages.
Profile parse_native_profile(std::string_view text, const std::string& source);
// Reads every <gpu-id>/<model>.json under `dir` (the folder names must agree
// with the files' "gpu" and "model" fields).
std::vector<Profile> read_native_profiles(const std::filesystem::path& dir);
// The gpemu-profile/1 text of a profile: one row per batch size, one row per
// line, numbers written so that they read back bit for bit.
std::string native_profile_json(const Profile& profile);
// Writes dir/<gpu>/<model>.json (creating folders) and returns its path.
std::filesystem::path write_native_profile(const Profile& profile, const std::filesystem::path& dir);

// The measured profiles available to a run, keyed by (GPU id, model).
class ProfileDatabase {
 public:
  ProfileDatabase() = default;

  // Which layouts `dir` holds (both may be present). Throws InputError when
  // `dir` is not a folder.
  static std::vector<ProfileLayout> detect_layouts(const std::filesystem::path& dir);
  // Loads every profile under `dir`, whichever layouts it holds. Throws
  // InputError when it holds neither, or when a (GPU, model) pair appears twice.
  // GPEmu's layout is read leniently: its malformed rows and unreadable
  // folders are skipped and listed in warnings() (read_gpemu_artifact).
  static ProfileDatabase load(const std::filesystem::path& dir);

  // Adds a profile; InputError when its (GPU, model) pair is already present
  // (the message names both sources).
  void add(Profile profile);

  // nullptr when there is no profile for the pair. `gpu_id` is a canonical
  // catalog id; `model` is compared by canonical_model_name.
  const Profile* find(std::string_view gpu_id, std::string_view model) const;

  const std::vector<Profile>& profiles() const { return profiles_; }
  const std::vector<ProfileLayout>& layouts() const { return layouts_; }
  // Canonical names of all models with a profile on some GPU, sorted.
  std::vector<std::string> models() const;
  // Canonical ids of all GPUs with a profile, sorted.
  std::vector<std::string> gpus() const;
  bool empty() const { return profiles_.empty(); }
  // What load() skipped, one line each, naming the file and line or folder.
  const std::vector<std::string>& warnings() const { return warnings_; }

 private:
  std::vector<Profile> profiles_;
  std::vector<std::string> warnings_;
  std::map<std::pair<std::string, std::string>, std::size_t> index_;  // (gpu, model) -> profiles_
  std::vector<ProfileLayout> layouts_;
};

}  // namespace gpemu
