// A loaded zoo model graph (ModelGraph::Impl): the file's polynomial basis
// and coefficients, its op kinds, dtypes and roles, and one flattened
// GraphPlan per (precision, optimizer). model_graph_file.cpp fills it from a
// zoo file; model_graph.cpp evaluates it at a shape.
#pragma once

#include <array>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "gpemu/error.h"
#include "gpemu/zoo.h"

namespace gpemu::zoo {

// A flattened iteration for one (precision, optimizer).
struct GraphPlan {
  struct Op {
    int kind = 0;  // index into kinds
    OpClass op_class = OpClass::Other;
    Phase phase = Phase::Forward;
    int dtype = 0;                           // index into dtype names
    int flops = 0, rd = 0, wr = 0, par = 0;  // poly indices
  };
  struct Tensor {
    int size = 0;  // poly index
    int alloc = -1, free = -1;
    Role role = Role::Act;
    int dtype = 0;
  };
  bool valid = false;
  std::vector<Op> ops;
  std::vector<Tensor> tensors;
  std::vector<int> main_tensor_index;  // file main tensor id -> index in tensors (-1: dropped)
  std::array<std::pair<int, int>, 3> ranges{};
  std::vector<std::pair<int, int>> param_grad;  // indices into tensors
  std::vector<int> first_use;                   // per tensor: first op using it, -1: none
  std::vector<int> last_use;                    // per tensor: last op using it, -1: none
};

struct ModelGraph::Impl {
  std::filesystem::path file;
  std::string name, family, input;
  std::uint64_t params = 0;
  std::int64_t ref_b = 0, ref_s = 0;
  bool has_s = false;
  double fwd_flops_per_sample = 0;
  std::vector<std::array<int, 2>> basis;
  std::vector<std::vector<double>> poly;
  std::vector<std::string> kind_names;
  std::vector<OpClass> kind_class;
  std::vector<std::string> dtype_names;  // file dtypes, then "bf16" if absent
  int f16 = -1, bf16 = -1;
  std::vector<Role> roles;              // file role index -> Role
  GraphPlan plans[kPrecisionCount][2];  // [precision][optimizer]

  [[noreturn]] void fail(const std::string& what) const {
    throw InputError(fmt::format("{}: {}", file.string(), what));
  }

  const GraphPlan& plan(Precision p, Optimizer o) const {
    const GraphPlan& pl = plans[static_cast<int>(p)][static_cast<int>(o)];
    if (!pl.valid && is_pure_half(p) && !plans[static_cast<int>(p)][1 - static_cast<int>(o)].valid)
      throw InputError(
          fmt::format("{}: {} has no pure-half (apex O2-like) trace: the zoo traces pure half for transformers only; "
                      "accepted for it: --amp autocast (AMP with FP32 weights)",
                      file.string(), name));
    const Optimizer other = o == Optimizer::SGD ? Optimizer::Adam : Optimizer::SGD;
    if (!pl.valid && plans[static_cast<int>(p)][static_cast<int>(other)].valid)
      throw InputError(
          fmt::format("{}: {} is traced with the {} optimizer only (the model's notes say why); "
                      "accepted: --optimizer {}",
                      file.string(), name, to_string(other), to_string(other)));
    if (!pl.valid)
      throw InputError(fmt::format("{}: the zoo file has no {} trace with the {} optimizer", file.string(),
                                   to_string(p), to_string(o)));
    return pl;
  }

  Shape resolve(Shape s) const {
    if (s.batch < 0) throw InputError(fmt::format("batch size {} is impossible: it must be at least 1", s.batch));
    if (s.seq_len < 0)
      throw InputError(fmt::format("sequence length {} is impossible: it must be at least 1", s.seq_len));
    if (s.seq_len > kMaxSeqLen)
      throw InputError(fmt::format("sequence length {} is past the limit of {}; expected 1 to {}", s.seq_len,
                                   kMaxSeqLen, kMaxSeqLen));
    if (s.batch == 0) s.batch = ref_b;
    if (!has_s)
      s.seq_len = 0;
    else if (s.seq_len == 0)
      s.seq_len = ref_s;
    return s;
  }

  std::vector<double> eval(Shape s) const {
    s = resolve(s);
    const double b = static_cast<double>(s.batch), sl = static_cast<double>(s.seq_len);
    std::vector<double> mono(basis.size());
    for (std::size_t k = 0; k < basis.size(); ++k)
      mono[k] = std::pow(b, basis[k][0]) * (basis[k][1] ? std::pow(sl, basis[k][1]) : 1.0);
    std::vector<double> v(poly.size());
    for (std::size_t i = 0; i < poly.size(); ++i) {
      double acc = 0;
      for (std::size_t k = 0; k < poly[i].size(); ++k) acc += poly[i][k] * mono[k];
      v[i] = acc;
    }
    return v;
  }
};

}  // namespace gpemu::zoo
