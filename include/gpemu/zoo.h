// The model zoo: per-operator training graphs of DL models (zoo/<model>.json,
// written by tools/tracer/, format "gpemu-zoo/1", docs/model-zoo.md), loaded
// once and evaluated at any batch size / sequence length.
//
// A ModelGraph holds one traced training iteration (forward + loss, backward,
// optimizer step) per precision variant: every aten operator with its class,
// FLOPs and compulsory bytes, and every tensor storage with its size and
// lifetime. Shape-dependent quantities are polynomials in B (and S); ops() and
// tensors() evaluate them at a Shape.
//
// Indexing contract (ops() and tensors() agree for the same Precision and
// Optimizer): ops() returns the iteration's ops in execution order, forward
// ops first, then backward, then the chosen optimizer's step; a TensorLife's
// `alloc` / `free` are indices into that vector. BF16 is derived from the AMP
// trace (docs/model-zoo.md): the loss-scale mul, the GradScaler ops and the
// tensors only they use are dropped and indices renumbered.
//
// Thread safety: a ModelGraph is immutable after load(); its const members may
// be called from any thread. load_model() caches graphs per process (one parse
// per file) and is thread-safe; the references it returns stay valid until the
// process ends. The string_views in OpCost / TensorLife point into the graph.
#pragma once

#include <array>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace gpemu::zoo {

// ---- enums --------------------------------------------------------------

enum class Phase { Forward, Backward, Optimizer };

// Operator classes of docs/model-zoo.md ("Operator classes").
enum class OpClass {
  Conv,
  Conv3d,  // three spatial dimensions: no Winograd/FFT algorithm
  Matmul,
  Norm,
  Pooling,
  Softmax,
  Reduction,
  Embedding,
  Elementwise,
  Copy,
  View,
  Optimizer,
  Other
};

// Tensor roles of docs/model-zoo.md.
enum class Role { Param, Buffer, Input, State, Grad, Act, External };

// FP32: the fp32 trace. AMP_FP16: FP16 autocast with GradScaler (the amp
// trace). AMP_BF16: BF16 autocast, no loss scaling (the amp trace without the
// scaler ops; tensor sizes are those of the fp16 trace, bf16 being 2 bytes too).
// HALF_FP16: pure-half training as apex O2 runs it (the half trace: FP16
// parameters and activations, FP32 master weights in the optimizer, loss
// scaling). HALF_BF16: the half trace without the scaler ops, in BF16.
// Only models whose zoo file has a half trace (the transformers) offer them.
enum class Precision { FP32, AMP_FP16, AMP_BF16, HALF_FP16, HALF_BF16 };
inline constexpr int kPrecisionCount = 5;
inline bool is_bf16(Precision p) { return p == Precision::AMP_BF16 || p == Precision::HALF_BF16; }
inline bool is_pure_half(Precision p) { return p == Precision::HALF_FP16 || p == Precision::HALF_BF16; }
enum class Optimizer { SGD, Adam };

// "forward", "conv", "param", "fp32" / "amp" / "bf16" / "half" / "half_bf16",
// "sgd" / "adam".
std::string_view to_string(Phase p);
std::string_view to_string(OpClass c);
std::string_view to_string(Role r);
std::string_view to_string(Precision p);
std::string_view to_string(Optimizer o);
// Accepts "fp32", "amp" / "fp16" / "amp_fp16", "bf16" / "amp_bf16"
// (case-insensitive); throws InputError naming the accepted values.
Precision parse_precision(std::string_view text);
// Accepts "sgd", "adam" (case-insensitive); throws InputError otherwise.
Optimizer parse_optimizer(std::string_view text);
// Class name as in the zoo files ("conv", ...); nullopt for an unknown one.
std::optional<OpClass> parse_op_class(std::string_view text);

// ---- evaluated graph elements --------------------------------------------

// Batch size and sequence length. 0 means the model's default (model.ref);
// seq_len is ignored by models without a sequence dimension.
struct Shape {
  std::int64_t batch = 0;
  std::int64_t seq_len = 0;
};

// The largest sequence length evaluated: 2^24 tokens is past any trained
// context window, and keeps attention's S^2 terms far from overflowing the
// 64-bit byte counts and the clock.
inline constexpr std::int64_t kMaxSeqLen = std::int64_t{1} << 24;

// One operator at one shape.
struct OpCost {
  std::string_view kind;  // aten op name, e.g. "convolution", "addmm"
  OpClass op_class = OpClass::Other;
  Phase phase = Phase::Forward;
  std::string_view dtype;    // compute dtype: "f32", "f16", "bf16", "i64", ...
  double flops = 0;          // multiply-add = 2
  double bytes_read = 0;     // compulsory bytes of inputs
  double bytes_written = 0;  // outputs and mutated arguments
  double param_bytes = 0;    // bytes of parameter storages read or written
};

// One tensor storage's size and lifetime at one shape. alloc: index of the op
// (into ops()) that creates it, or -1: it exists before the iteration
// (parameters, buffers, the input batch, optimizer state). free: index of the
// op after which its last reference dies, or -1: alive at the end of the
// iteration (persistent tensors, and the grads, which the next
// zero_grad(set_to_none=True) releases at the iteration boundary).
struct TensorLife {
  std::uint64_t bytes = 0;
  int alloc = -1;
  int free = -1;
  Role role = Role::Act;
  std::string_view dtype;
};

// A trainable parameter and its gradient, in model.parameters() order.
struct ParamGrad {
  int param_tensor = -1;  // index into tensors()
  int grad_tensor = -1;   // index into tensors()
  std::uint64_t param_bytes = 0;
  std::uint64_t grad_bytes = 0;
  int grad_ready_op = -1;  // op (index into ops()) that creates the grad storage
};

// Sums over the ops of one phase.
struct PhaseTotals {
  double flops = 0, bytes_read = 0, bytes_written = 0;
  int ops = 0;         // all ops, views included
  int kernel_ops = 0;  // ops whose class is not View
};

// ---- a loaded model -------------------------------------------------------

class ModelGraph {
 public:
  // Parses a zoo file. Throws InputError naming the file (and what was wrong)
  // for a missing/unreadable file, bad JSON, an unknown format or fields that
  // are missing or inconsistent (indices out of range, column lengths).
  static ModelGraph load(const std::filesystem::path& file);

  ModelGraph(ModelGraph&&) noexcept;
  ModelGraph& operator=(ModelGraph&&) noexcept;
  ~ModelGraph();

  // ---- header (model.*) ----
  const std::string& name() const;
  const std::string& family() const;             // "cnn", "transformer", "recommender", "unet"
  const std::string& input_description() const;  // model.input
  const std::filesystem::path& file() const;
  std::uint64_t params() const;          // trainable parameter count
  std::int64_t default_batch() const;    // model.ref.B
  bool has_seq_len() const;              // vars include "S"
  std::int64_t default_seq_len() const;  // model.ref.S; 0 without S
  // model.fwd_flops_per_sample: forward FLOPs (loss included) of the fp32
  // trace at the reference shape divided by B.
  double forward_flops_per_sample() const;
  // Shape with its zeros replaced by the defaults (seq_len stays 0 for models
  // without S). Throws InputError for a negative batch/seq_len.
  Shape resolve(Shape shape) const;

  // Bytes of the input batch (role "input": data and labels) at `shape`.
  std::uint64_t input_bytes(Shape shape, Precision precision = Precision::FP32) const;
  // input_bytes at batch 1 (and `seq_len`, 0: default).
  std::uint64_t input_bytes_per_sample(std::int64_t seq_len = 0) const;
  // Bytes of parameters (role "param") in `precision`'s trace (master weights
  // stay FP32 under AMP).
  std::uint64_t param_bytes(Precision precision = Precision::FP32) const;

  // ---- evaluated at a shape ----
  // The iteration's ops in execution order: forward, backward, optimizer.
  std::vector<OpCost> ops(Shape shape, Precision precision = Precision::FP32,
                          Optimizer optimizer = Optimizer::SGD) const;
  // The iteration's tensor storages: main trace first (ids as in the file),
  // then the optimizer section's. alloc/free index ops() of the same
  // precision and optimizer.
  std::vector<TensorLife> tensors(Shape shape, Precision precision = Precision::FP32,
                                  Optimizer optimizer = Optimizer::SGD) const;
  // Per-parameter grads (for gradient all-reduce buckets).
  std::vector<ParamGrad> param_grads(Shape shape, Precision precision = Precision::FP32) const;
  // Totals per phase, indexed by Phase (Forward, Backward, Optimizer).
  std::array<PhaseTotals, 3> phase_totals(Shape shape, Precision precision = Precision::FP32,
                                          Optimizer optimizer = Optimizer::SGD) const;
  // For each tensors() entry, the first op (index into ops()) that reads or
  // writes it, or -1 when no op does. Used to create lazily allocated state
  // (optimizer buffers appear at their first use on the first step).
  std::vector<int> first_use(Precision precision = Precision::FP32, Optimizer optimizer = Optimizer::SGD) const;
  // For each tensors() entry, the last op that reads or writes it, or -1.
  std::vector<int> last_use(Precision precision = Precision::FP32, Optimizer optimizer = Optimizer::SGD) const;
  // Number of ops() / tensors() entries (independent of the shape).
  int op_count(Precision precision = Precision::FP32, Optimizer optimizer = Optimizer::SGD) const;
  int tensor_count(Precision precision = Precision::FP32, Optimizer optimizer = Optimizer::SGD) const;
  // [begin, end) of each phase in ops(), indexed by Phase.
  std::array<std::pair<int, int>, 3> phase_ranges(Precision precision = Precision::FP32,
                                                  Optimizer optimizer = Optimizer::SGD) const;

  struct Impl;  // internal

 private:
  explicit ModelGraph(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// ---- the zoo on disk -------------------------------------------------------

// Where gpemu's data lives: $GPEMU_DATA_DIR when set and non-empty, else the
// share/gpemu folder of an installed copy (beside the running program, then
// the configured install prefix), else the source tree the library was built
// from. The zoo is data_dir()/"zoo". InputError when GPEMU_DATA_DIR is set to
// something that is not a folder.
std::filesystem::path data_dir();
std::filesystem::path zoo_dir();

// Lower-case, '-' read as '_' (as the cost layer's canonical_model_name):
// "ResNet18" and "resnet18" name one model.
std::string canonical_name(std::string_view name);

// Names of zoo_dir()/*.json, sorted. Empty when the folder does not exist.
std::vector<std::string> zoo_models();
// Whether zoo_dir() holds a file for `name` (canonicalised).
bool has_model(std::string_view name);
// The graph of `name` from zoo_dir(), parsed on first use and cached per
// process (keyed by file path, so a changed GPEMU_DATA_DIR loads the other
// file). Throws InputError listing the known models for an unknown name, and
// ModelGraph::load's errors for a malformed file.
const ModelGraph& load_model(std::string_view name);
// nullptr instead of the unknown-name error (malformed files still throw).
const ModelGraph* find_model(std::string_view name);

}  // namespace gpemu::zoo
