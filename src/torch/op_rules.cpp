#include "torch/op_rules.h"

#include <algorithm>
#include <optional>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

namespace gpemu::torch_backend {

namespace {

using Names = std::unordered_set<std::string_view>;

// The tracer's tables (tools/tracer/opclass.py), name for name.
const Names kConv = {"convolution",
                     "_convolution",
                     "convolution_backward",
                     "cudnn_convolution",
                     "cudnn_convolution_transpose",
                     "convolution_overrideable",
                     "convolution_backward_overrideable",
                     "mkldnn_convolution",
                     "slow_conv3d",
                     "slow_conv_transpose3d",
                     "slow_conv_transpose2d",
                     "thnn_conv2d"};
const Names kMatmul = {"mm",    "addmm", "bmm",  "baddbmm", "addbmm",           "mv",
                       "addmv", "dot",   "vdot", "addr",    "_addmm_activation"};
// The fused attention kernel each way (F.scaled_dot_product_attention under
// --torch 2; the tracer's fused.py ops of the same names and arguments, in
// its FUSED table as matmuls): FLOPs as FlashAttention counts them, time at
// kAttentionEfficiency (OpProgram::Op::attention).
const Names kAttention = {"scaled_dot_product_attention", "scaled_dot_product_attention_backward"};
const Names kNorm = {"native_batch_norm",         "native_batch_norm_backward",
                     "cudnn_batch_norm",          "cudnn_batch_norm_backward",
                     "native_layer_norm",         "native_layer_norm_backward",
                     "native_group_norm",         "native_group_norm_backward",
                     "_native_batch_norm_legit",  "batch_norm_elemt",
                     "batch_norm_stats",          "batch_norm_backward_reduce",
                     "batch_norm_backward_elemt", "batch_norm_gather_stats_with_counts"};
const Names kPool = {"max_pool2d_with_indices",
                     "max_pool2d_with_indices_backward",
                     "max_pool3d_with_indices",
                     "max_pool3d_with_indices_backward",
                     "max_pool2d",
                     "avg_pool2d",
                     "avg_pool2d_backward",
                     "avg_pool3d",
                     "avg_pool3d_backward",
                     "_adaptive_avg_pool2d",
                     "_adaptive_avg_pool2d_backward",
                     "_adaptive_avg_pool3d",
                     "_adaptive_avg_pool3d_backward",
                     "adaptive_max_pool2d",
                     "adaptive_max_pool2d_backward",
                     "max_unpool2d"};
const Names kSoftmax = {"_softmax", "_log_softmax", "_softmax_backward_data", "_log_softmax_backward_data"};
const Names kReduction = {"sum",
                          "mean",
                          "amax",
                          "amin",
                          "max",
                          "min",
                          "prod",
                          "norm",
                          "var",
                          "std",
                          "var_mean",
                          "std_mean",
                          "argmax",
                          "argmin",
                          "cumsum",
                          "cumprod",
                          "all",
                          "any",
                          "linalg_vector_norm",
                          "nll_loss_forward",
                          "nll_loss2d_forward",
                          "mse_loss",
                          "binary_cross_entropy",
                          "binary_cross_entropy_with_logits",
                          "logsumexp",
                          "max_dim",
                          "min_dim"};
const Names kEmbedding = {"embedding",
                          "embedding_dense_backward",
                          "embedding_backward",
                          "_embedding_bag",
                          "_embedding_bag_forward_only",
                          "_embedding_bag_backward",
                          "_embedding_bag_dense_backward",
                          "index_select",
                          "index",
                          "gather",
                          "scatter",
                          "scatter_add",
                          "scatter_add_",
                          "scatter_",
                          "index_add",
                          "index_add_",
                          "index_put",
                          "index_put_",
                          "_index_put_impl_",
                          "index_select_backward",
                          "gather_backward",
                          "nll_loss_backward",
                          "nll_loss2d_backward",
                          "take",
                          "masked_select",
                          "embedding_renorm_"};
const Names kCopy = {"_to_copy",
                     "copy_",
                     "clone",
                     "cat",
                     "stack",
                     "constant_pad_nd",
                     "fill_",
                     "zero_",
                     "zeros",
                     "ones",
                     "full",
                     "zeros_like",
                     "ones_like",
                     "full_like",
                     "new_zeros",
                     "new_ones",
                     "new_full",
                     "scalar_tensor",
                     "arange",
                     "repeat",
                     "_copy_from",
                     "_copy_from_and_resize",
                     "lift_fresh_copy",
                     "tensor",
                     "contiguous",
                     "flip",
                     "roll",
                     "tril_indices",
                     "triu_indices",
                     "linspace",
                     "eye",
                     "slice_backward",
                     "select_backward",
                     "index_fill",
                     "index_fill_",
                     "masked_scatter",
                     "pad",
                     "reflection_pad2d",
                     "replication_pad2d",
                     "_unsafe_index",
                     "split_with_sizes_copy",
                     "narrow_copy"};
const Names kView = {"view",
                     "_unsafe_view",
                     "_reshape_alias",
                     "reshape",
                     "t",
                     "transpose",
                     "transpose_",
                     "t_",
                     "permute",
                     "expand",
                     "expand_as",
                     "as_strided",
                     "select",
                     "slice",
                     "unsqueeze",
                     "unsqueeze_",
                     "squeeze",
                     "squeeze_",
                     "detach",
                     "detach_",
                     "alias",
                     "split",
                     "split_with_sizes",
                     "chunk",
                     "unbind",
                     "narrow",
                     "diagonal",
                     "view_as",
                     "view_as_real",
                     "view_as_complex",
                     "lift_fresh",
                     "empty",
                     "empty_like",
                     "empty_strided",
                     "new_empty",
                     "new_empty_strided",
                     "unfold",
                     "as_strided_",
                     "resize_",
                     "set_",
                     "_indices",
                     "_values",
                     "indices",
                     "values",
                     "movedim",
                     "flatten",
                     "unflatten",
                     "_fw_primal",
                     "_make_dual",
                     "_unpack_dual",
                     "real",
                     "imag",
                     "conj",
                     "_conj",
                     "_neg_view",
                     "resolve_conj",
                     "resolve_neg",
                     "expand_copy",
                     "_nested_tensor_size",
                     "numpy_T",
                     "mT",
                     "mH",
                     "adjoint",
                     "swapaxes",
                     "swapdims",
                     "lift",
                     "_unsafe_view_copy",
                     "_has_compatible_shallow_copy_type"};
const Names kWriteOnlySelf = {"copy_",   "fill_",        "zero_",      "normal_",     "uniform_", "bernoulli_",
                              "random_", "exponential_", "geometric_", "log_normal_", "cauchy_"};
const std::unordered_map<std::string_view, int> kElementwiseFlops = {{"addcmul", 3},
                                                                     {"addcmul_", 3},
                                                                     {"addcdiv", 3},
                                                                     {"addcdiv_", 3},
                                                                     {"lerp", 3},
                                                                     {"lerp_", 3},
                                                                     {"_foreach_addcmul_", 3},
                                                                     {"_foreach_addcdiv_", 3},
                                                                     {"_foreach_addcmul", 3},
                                                                     {"_foreach_addcdiv", 3},
                                                                     {"_foreach_lerp_", 3},
                                                                     {"_amp_foreach_non_finite_check_and_unscale_", 2}};
// One fused optimizer kernel (--torch 2's fused=True): the FLOPs per element
// of the foreach update it replaces, by the tracer's counts (lerp_, addcmul_,
// addcdiv_ 3, others 1). AdamW: mul_ (decay), lerp_, mul_, addcmul_, sqrt,
// div_, add_ (eps), addcdiv_; Adam: the same without the decay; SGD: add
// (decay), mul_ and add_ (momentum), add_ (update).
const std::unordered_map<std::string_view, int> kFusedFlops = {{"_fused_adamw_", 14},
                                                               {"_fused_adam_", 13},
                                                               {"_fused_sgd_", 4}};
// The tensor lists a fused optimizer kernel writes besides reading them
// (parameters and optimizer state; the grads and step counts are only read).
const std::unordered_map<std::string_view, std::vector<std::size_t>> kFusedWritten = {{"_fused_adamw_", {0, 2, 3, 4}},
                                                                                      {"_fused_adam_", {0, 2, 3, 4}},
                                                                                      {"_fused_sgd_", {0, 2}}};
const Names kZeroFlopElementwise = {"bernoulli_", "bernoulli", "normal_", "uniform_", "random_", "_amp_update_scale_"};

bool has(const Names& set, std::string_view name) { return set.count(name) != 0; }

const at::Tensor* tensor_at(c10::ArrayRef<c10::IValue> a, std::size_t i) {
  if (i >= a.size() || !a[i].isTensor()) return nullptr;
  const at::Tensor& t = a[i].toTensor();
  return t.defined() ? &t : nullptr;
}

double numel(const at::Tensor* t) { return t == nullptr ? 0.0 : static_cast<double>(t->numel()); }

double prod(c10::IntArrayRef s, std::size_t from = 0) {
  double p = 1;
  for (std::size_t i = from; i < s.size(); ++i) p *= static_cast<double>(s[i]);
  return p;
}

double size_at(const at::Tensor* t, int64_t dim) {
  if (t == nullptr || dim >= t->dim()) return 0;
  return static_cast<double>(t->sizes()[static_cast<std::size_t>(dim)]);
}

bool bool_at(c10::ArrayRef<c10::IValue> a, std::size_t i) { return i < a.size() && a[i].isBool() && a[i].toBool(); }

// Multiply-accumulates of one convolution product (forward, or either backward product).
double conv_macs(const at::Tensor& inp, const at::Tensor& w, const at::Tensor& out, bool transposed) {
  if (transposed) return size_at(&inp, 0) * prod(inp.sizes(), 2) * static_cast<double>(w.numel());
  return size_at(&out, 0) * prod(out.sizes(), 2) * static_cast<double>(w.numel());
}

// f(argument index, tensor) for every defined tensor among `values`, also
// inside tensor lists. A template: it runs for every argument of every op.
template <class F>
void for_each_tensor(c10::ArrayRef<c10::IValue> values, F&& f) {
  for (std::size_t i = 0; i < values.size(); ++i) {
    const c10::IValue& v = values[i];
    if (v.isTensor()) {
      if (v.toTensor().defined()) f(i, v.toTensor());
    } else if (v.isTensorList()) {
      for (const at::Tensor& t : v.toTensorVector())
        if (t.defined()) f(i, t);
    } else if (v.isList()) {
      for (const c10::IValue& e : v.toListRef())
        if (e.isTensor() && e.toTensor().defined()) f(i, e.toTensor());
    }
  }
}

// Bytes a kernel touches for view t: element size times the distinct elements
// (broadcast dims with stride 0 count once).
double unique_bytes(const at::Tensor& t) {
  double n = 1;
  for (int64_t d = 0; d < t.dim(); ++d)
    if (t.stride(d) != 0) n *= static_cast<double>(t.size(d));
  return n * static_cast<double>(t.element_size());
}

}  // namespace

zoo::OpClass classify(std::string_view name, bool optimizer) {
  using C = zoo::OpClass;
  if (has(kView, name)) return C::View;
  if (optimizer) return C::Optimizer;
  if (has(kConv, name)) return C::Conv;
  if (has(kMatmul, name) || has(kAttention, name)) return C::Matmul;
  if (has(kNorm, name)) return C::Norm;
  if (has(kPool, name)) return C::Pooling;
  if (has(kSoftmax, name)) return C::Softmax;
  if (has(kReduction, name)) return C::Reduction;
  if (has(kEmbedding, name)) return C::Embedding;
  if (has(kCopy, name)) return C::Copy;
  return C::Elementwise;
}

double op_flops(std::string_view name, zoo::OpClass cls, c10::ArrayRef<c10::IValue> a,
                c10::ArrayRef<c10::IValue> outs) {
  using C = zoo::OpClass;
  if (cls == C::View) return 0;
  const at::Tensor* a0 = tensor_at(a, 0);
  const at::Tensor* a1 = tensor_at(a, 1);
  const at::Tensor* a2 = tensor_at(a, 2);
  const at::Tensor* o0 = tensor_at(outs, 0);
  if (name == "convolution" || name == "_convolution" || name == "convolution_overrideable") {
    if (a0 == nullptr || a1 == nullptr || o0 == nullptr) return 0;
    double f = 2 * conv_macs(*a0, *a1, *o0, bool_at(a, 6));
    if (a2 != nullptr) f += numel(o0);
    return f;
  }
  if (name == "convolution_backward" || name == "convolution_backward_overrideable") {
    if (a0 == nullptr || a1 == nullptr || a2 == nullptr || a.size() < 11 || !a[10].isList()) return 0;
    const auto mask = a[10].toListRef();
    auto m = [&](std::size_t i) { return i < mask.size() && mask[i].toBool() ? 1.0 : 0.0; };
    double f = 2 * conv_macs(*a1, *a2, *a0, bool_at(a, 7)) * (m(0) + m(1));
    if (m(2) != 0) f += numel(a0);
    return f;
  }
  if (name == "mm" && a0 && a1) return 2 * size_at(a0, 0) * size_at(a0, 1) * size_at(a1, 1);
  if ((name == "addmm" || name == "_addmm_activation") && a1 && a2)
    return 2 * size_at(a1, 0) * size_at(a1, 1) * size_at(a2, 1) + size_at(a1, 0) * size_at(a2, 1);
  if (name == "bmm" && a0 && a1) return 2 * size_at(a0, 0) * size_at(a0, 1) * size_at(a0, 2) * size_at(a1, 2);
  if (name == "baddbmm" && a1 && a2) {
    const double b = size_at(a1, 0), m = size_at(a1, 1), k = size_at(a1, 2), n = size_at(a2, 2);
    return 2 * b * m * k * n + b * m * n;
  }
  if (name == "addbmm" && a1 && a2) {
    const double b = size_at(a1, 0), m = size_at(a1, 1), k = size_at(a1, 2), n = size_at(a2, 2);
    return 2 * b * m * k * n + m * n;
  }
  if (name == "mv" && a0) return 2 * size_at(a0, 0) * size_at(a0, 1);
  if (name == "addmv" && a1) return 2 * size_at(a1, 0) * size_at(a1, 1) + size_at(a1, 0);
  if (name == "dot" || name == "vdot") return 2 * numel(a0);
  if (name == "addr") return 2 * numel(a1) * numel(a2);
  if (has(kAttention, name)) {
    // Forward two L x S x d products per head (scores, then probabilities x
    // values); backward five (the scores recomputed, and the grads of the
    // probabilities, values, queries and keys), as FlashAttention counts
    // them; a causal kernel skips the masked half. The tracer's rule.
    const bool forward = name == "scaled_dot_product_attention";
    const at::Tensor* q = forward ? a0 : a1;
    const at::Tensor* k = forward ? a1 : a2;
    if (q == nullptr || k == nullptr || q->dim() < 2) return 0;
    const double products = forward ? 2 : 5;
    const double f =
        2 * products * (numel(q) / size_at(q, q->dim() - 1)) * size_at(k, k->dim() - 2) * size_at(q, q->dim() - 1);
    return bool_at(a, forward ? 4 : 7) ? f / 2 : f;
  }
  if (cls == C::Norm) {
    const at::Tensor* x = name.ends_with("_backward") ? a1 : a0;
    return (name.find("backward") != std::string_view::npos ? 8 : 5) * numel(x);
  }
  if (cls == C::Softmax) return (name.find("backward") != std::string_view::npos ? 4 : 5) * numel(a0);
  if (cls == C::Pooling) {
    if (name.ends_with("_backward")) {
      const at::Tensor* gin = o0 != nullptr ? o0 : a1;
      if (name.starts_with("avg_pool") && a.size() > 2 && a[2].isIntList())
        return std::max(numel(gin), numel(a0) * prod(a[2].toIntVector()));
      return numel(gin);
    }
    if (name.starts_with("_adaptive") || name.starts_with("adaptive")) return numel(a0);
    double k = 1;
    if (a.size() > 1 && a[1].isIntList()) {
      const auto v = a[1].toIntVector();
      k = v.size() == 1 ? static_cast<double>(v[0]) * static_cast<double>(v[0]) : prod(v);
    } else if (a.size() > 1 && a[1].isInt()) {
      k = static_cast<double>(a[1].toInt()) * static_cast<double>(a[1].toInt());
    }
    return numel(o0) * k;
  }
  if (cls == C::Reduction) {
    if (name == "nll_loss_forward" || name == "nll_loss2d_forward") return numel(a1);
    if (a0 == nullptr) return 0;
    double per = (name == "var" || name == "std" || name == "var_mean" || name == "std_mean") ? 3 : 1;
    if (name == "binary_cross_entropy" || name == "binary_cross_entropy_with_logits" || name == "mse_loss") per = 3;
    return per * numel(a0);
  }
  if (cls == C::Embedding) {
    if (name == "embedding_dense_backward" || name == "_embedding_bag_dense_backward" ||
        name == "_embedding_bag_backward")
      return numel(a0);
    if (name == "index_put" || name == "index_put_" || name == "_index_put_impl_") return bool_at(a, 3) ? numel(a2) : 0;
    if (name == "index_add" || name == "index_add_" || name == "scatter_add" || name == "scatter_add_")
      return numel(tensor_at(a, 3));
    return 0;
  }
  if (cls == C::Copy) return 0;
  if (has(kZeroFlopElementwise, name)) return 0;
  if (name == "copy_" || name == "fill_" || name == "zero_" || name == "clone" || name == "_to_copy") return 0;
  const auto it = kElementwiseFlops.find(name);
  const auto fused = kFusedFlops.find(name);
  const double per = fused != kFusedFlops.end() ? fused->second : it == kElementwiseFlops.end() ? 1 : it->second;
  double n = 0;
  if (name.starts_with("_foreach_") || name.starts_with("_fused_") ||
      name == "_amp_foreach_non_finite_check_and_unscale_") {
    if (!a.empty() && (a[0].isTensorList() || a[0].isList()))
      for_each_tensor(a.slice(0, 1), [&](std::size_t, const at::Tensor& t) { n += static_cast<double>(t.numel()); });
    return per * n;
  }
  for_each_tensor(outs, [&](std::size_t, const at::Tensor& t) { n += static_cast<double>(t.numel()); });
  return per * n;
}

double op_bytes(std::string_view name, c10::ArrayRef<c10::IValue> args, c10::ArrayRef<c10::IValue> outs,
                const c10::FunctionSchema* schema) {
  const bool write_only_self = has(kWriteOnlySelf, name);
  // torch's structured ops reach an emulated device through their out=
  // overload (threshold_backward.grad_input, add.out, ...): the output is an
  // argument there, written, not read.
  auto out_argument = [schema](std::size_t i) {
    return schema != nullptr && i < schema->arguments().size() && schema->arguments()[i].is_out();
  };
  // Each tensor counted once per side (an op has a handful: a linear scan).
  std::vector<const void*> seen;
  auto first_time = [&seen](const at::Tensor& t) {
    const void* impl = t.unsafeGetTensorImpl();
    if (std::find(seen.begin(), seen.end(), impl) != seen.end()) return false;
    seen.push_back(impl);
    return true;
  };
  double read = 0, written = 0;
  for_each_tensor(args, [&](std::size_t i, const at::Tensor& t) {
    if (first_time(t) && !(write_only_self && i == 0) && !out_argument(i)) read += unique_bytes(t);
  });
  seen.clear();
  for_each_tensor(outs, [&](std::size_t, const at::Tensor& t) {
    if (first_time(t)) written += unique_bytes(t);
  });
  if (const auto fused = kFusedWritten.find(name); fused != kFusedWritten.end())
    for (const std::size_t i : fused->second)
      if (i < args.size())
        for_each_tensor(args.slice(i, 1), [&](std::size_t, const at::Tensor& t) { written += unique_bytes(t); });
  return read + written;
}

OpProgram::Op live_op(std::string_view name, OpProgram::Section section, c10::ArrayRef<c10::IValue> args,
                      c10::ArrayRef<c10::IValue> outs, const c10::FunctionSchema* schema) {
  const zoo::OpClass cls = classify(name, section == OpProgram::Section::Optimizer);
  OpProgram::Op op;
  op.section = section;
  switch (cls) {
    case zoo::OpClass::Conv: op.kind = OpProgram::Kind::Conv; break;
    case zoo::OpClass::Matmul: op.kind = OpProgram::Kind::Matmul; break;
    case zoo::OpClass::View: op.kind = OpProgram::Kind::View; return op;
    default: op.kind = OpProgram::Kind::Memory; break;
  }
  std::optional<at::ScalarType> first;
  for_each_tensor(args, [&](std::size_t, const at::Tensor& t) {
    if (!first) first = t.scalar_type();
    // A 3-D convolution (5-D input or weight) has no Winograd path, as the
    // tracer's conv3d class says for the zoo.
    if (cls == zoo::OpClass::Conv && t.dim() == 5) op.direct_conv = true;
  });
  if (first == at::kHalf) op.math = OpProgram::Math::F16;
  if (first == at::kBFloat16) op.math = OpProgram::Math::BF16;
  op.flops0 = op_flops(name, cls, args, outs);
  op.bytes0 = op_bytes(name, args, outs, schema);
  op.attention = has(kAttention, name);
  // One multi-tensor call (a foreach or fused optimizer kernel, GradScaler's
  // unscale and update): issued at the host's foreach cost, as predict's
  // foreach program issues it.
  op.foreach_call = name.starts_with("_foreach_") || name.starts_with("_fused_") || name.starts_with("_amp_");
  return op;
}

}  // namespace gpemu::torch_backend
