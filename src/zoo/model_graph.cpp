// Evaluating zoo model graphs (model_graph_impl.h) at a shape; loading them
// is model_graph_file.cpp's.
//
// At load time every (precision, optimizer) combination is flattened into a
// GraphPlan (model_graph_file.cpp).
// Shape-dependent quantities stay polynomial indices; evaluating at a shape
// evaluates each polynomial once and maps the indices, so ops() and tensors()
// are linear in the graph size with no parsing.
#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "gpemu/error.h"
#include "gpemu/zoo.h"
#include "zoo/model_graph_impl.h"

namespace gpemu::zoo {

namespace {

// A tensor past 2^62 bytes (4 EiB) can only come from an absurd batch size or
// sequence length; rounding it would wrap the 64-bit count.
std::uint64_t to_bytes(double v) {
  constexpr double kMaxTensorBytes = 4611686018427387904.0;
  if (!(v <= kMaxTensorBytes))
    throw InputError(
        fmt::format("a tensor of {:g} bytes is past the limit of {:g} bytes; expected a smaller batch "
                    "size or sequence length",
                    v, kMaxTensorBytes));
  return v <= 0 ? 0 : static_cast<std::uint64_t>(std::llround(v));
}

}  // namespace

// ---- ModelGraph --------------------------------------------------------------

ModelGraph::ModelGraph(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
ModelGraph::ModelGraph(ModelGraph&&) noexcept = default;
ModelGraph& ModelGraph::operator=(ModelGraph&&) noexcept = default;
ModelGraph::~ModelGraph() = default;

const std::string& ModelGraph::name() const { return impl_->name; }
const std::string& ModelGraph::family() const { return impl_->family; }
const std::string& ModelGraph::input_description() const { return impl_->input; }
const std::filesystem::path& ModelGraph::file() const { return impl_->file; }
std::uint64_t ModelGraph::params() const { return impl_->params; }
std::int64_t ModelGraph::default_batch() const { return impl_->ref_b; }
bool ModelGraph::has_seq_len() const { return impl_->has_s; }
std::int64_t ModelGraph::default_seq_len() const { return impl_->ref_s; }
double ModelGraph::forward_flops_per_sample() const { return impl_->fwd_flops_per_sample; }
Shape ModelGraph::resolve(Shape shape) const { return impl_->resolve(shape); }

std::uint64_t ModelGraph::input_bytes(Shape shape, Precision precision) const {
  const GraphPlan& p =
      impl_->plan(precision, impl_->plans[static_cast<int>(precision)][0].valid ? Optimizer::SGD : Optimizer::Adam);
  const auto v = impl_->eval(shape);
  double sum = 0;
  for (const auto& t : p.tensors)
    if (t.role == Role::Input) sum += v[t.size];
  return to_bytes(sum);
}

std::uint64_t ModelGraph::input_bytes_per_sample(std::int64_t seq_len) const {
  return input_bytes(Shape{1, seq_len}, Precision::FP32);
}

std::uint64_t ModelGraph::param_bytes(Precision precision) const {
  const GraphPlan& p =
      impl_->plan(precision, impl_->plans[static_cast<int>(precision)][0].valid ? Optimizer::SGD : Optimizer::Adam);
  const auto v = impl_->eval(Shape{});
  double sum = 0;
  for (const auto& t : p.tensors)
    if (t.role == Role::Param) sum += v[t.size];
  return to_bytes(sum);
}

std::vector<OpCost> ModelGraph::ops(Shape shape, Precision precision, Optimizer optimizer) const {
  const GraphPlan& p = impl_->plan(precision, optimizer);
  const auto v = impl_->eval(shape);
  std::vector<OpCost> out;
  out.reserve(p.ops.size());
  for (const auto& o : p.ops) {
    OpCost c;
    c.kind = impl_->kind_names[o.kind];
    c.op_class = o.op_class;
    c.phase = o.phase;
    c.dtype = impl_->dtype_names[o.dtype];
    c.flops = v[o.flops];
    c.bytes_read = v[o.rd];
    c.bytes_written = v[o.wr];
    c.param_bytes = v[o.par];
    out.push_back(c);
  }
  return out;
}

std::vector<TensorLife> ModelGraph::tensors(Shape shape, Precision precision, Optimizer optimizer) const {
  const GraphPlan& p = impl_->plan(precision, optimizer);
  const auto v = impl_->eval(shape);
  std::vector<TensorLife> out;
  out.reserve(p.tensors.size());
  for (const auto& t : p.tensors)
    out.push_back(TensorLife{to_bytes(v[t.size]), t.alloc, t.free, t.role, impl_->dtype_names[t.dtype]});
  return out;
}

std::vector<ParamGrad> ModelGraph::param_grads(Shape shape, Precision precision) const {
  const GraphPlan& p =
      impl_->plan(precision, impl_->plans[static_cast<int>(precision)][0].valid ? Optimizer::SGD : Optimizer::Adam);
  const auto v = impl_->eval(shape);
  std::vector<ParamGrad> out;
  for (auto [param, grad] : p.param_grad) {
    ParamGrad pg;
    pg.param_tensor = param;
    pg.grad_tensor = grad;
    if (param >= 0) pg.param_bytes = to_bytes(v[p.tensors[param].size]);
    if (grad >= 0) {
      pg.grad_bytes = to_bytes(v[p.tensors[grad].size]);
      pg.grad_ready_op = p.tensors[grad].alloc;
    }
    out.push_back(pg);
  }
  return out;
}

std::array<PhaseTotals, 3> ModelGraph::phase_totals(Shape shape, Precision precision, Optimizer optimizer) const {
  const GraphPlan& p = impl_->plan(precision, optimizer);
  const auto v = impl_->eval(shape);
  std::array<PhaseTotals, 3> out{};
  for (const auto& o : p.ops) {
    PhaseTotals& t = out[static_cast<int>(o.phase)];
    t.flops += v[o.flops];
    t.bytes_read += v[o.rd];
    t.bytes_written += v[o.wr];
    ++t.ops;
    if (o.op_class != OpClass::View) ++t.kernel_ops;
  }
  return out;
}

std::vector<int> ModelGraph::first_use(Precision precision, Optimizer optimizer) const {
  return impl_->plan(precision, optimizer).first_use;
}

std::vector<int> ModelGraph::last_use(Precision precision, Optimizer optimizer) const {
  return impl_->plan(precision, optimizer).last_use;
}

int ModelGraph::op_count(Precision precision, Optimizer optimizer) const {
  return static_cast<int>(impl_->plan(precision, optimizer).ops.size());
}

int ModelGraph::tensor_count(Precision precision, Optimizer optimizer) const {
  return static_cast<int>(impl_->plan(precision, optimizer).tensors.size());
}

std::array<std::pair<int, int>, 3> ModelGraph::phase_ranges(Precision precision, Optimizer optimizer) const {
  return impl_->plan(precision, optimizer).ranges;
}

}  // namespace gpemu::zoo
