// The torch backend's shape rules (shape_rules.h).
#include "torch/shape_rules.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <string>

#include "torch/runtime.h"

namespace gpemu::torch_backend {
namespace {

Runtime& rt() { return Runtime::instance(); }

at::Tensor meta_like(const at::Tensor& t, c10::optional<at::ScalarType> dtype = c10::nullopt) {
  return at::empty(t.sizes(), t.options().dtype(dtype.value_or(t.scalar_type())).device(at::kMeta),
                   t.suggest_memory_format());
}
at::Tensor meta_empty(c10::IntArrayRef sizes, at::ScalarType dtype) {
  return at::empty(sizes, at::TensorOptions().dtype(dtype).device(at::kMeta));
}
c10::IValue none() { return at::Tensor(); }  // an undefined tensor, as kernels return one
bool mask_at(const c10::IValue& v, std::size_t i) {
  const auto l = v.toListRef();
  return i < l.size() && l[i].toBool();
}

std::vector<int64_t> conv_output_size(const at::Tensor& input, const at::Tensor& weight, c10::ArrayRef<c10::IValue> a) {
  const auto stride = a[3].toIntVector(), padding = a[4].toIntVector(), dilation = a[5].toIntVector();
  const bool transposed = a[6].toBool();
  const auto output_padding = a[7].toIntVector();
  const int64_t groups = a[8].toInt();
  const int64_t dims = input.dim() - 2;
  auto at_or_last = [](const std::vector<int64_t>& v, int64_t i) {
    return v.empty() ? 0 : v[static_cast<std::size_t>(std::min<int64_t>(i, static_cast<int64_t>(v.size()) - 1))];
  };
  std::vector<int64_t> out = {input.size(0), transposed ? weight.size(1) * groups : weight.size(0)};
  for (int64_t i = 0; i < dims; ++i) {
    const int64_t in = input.size(i + 2), k = weight.size(i + 2);
    const int64_t s = at_or_last(stride, i), p = at_or_last(padding, i), dl = at_or_last(dilation, i);
    if (transposed)
      out.push_back((in - 1) * s - 2 * p + dl * (k - 1) + at_or_last(output_padding, i) + 1);
    else
      out.push_back((in + 2 * p - dl * (k - 1) - 1) / s + 1);
  }
  return out;
}

// The kernels PyTorch 2 runs that torch 1.13 has no op for, defined in backend.cpp's TORCH_LIBRARY(gpemu) as
// gpemu::<name> with aten's arguments (gpemu_torch/_torch2.py calls them).
//  - scaled_dot_product_attention (forward: the output and the rows'
//    log-sum-exp in FP32, which backward reads; no L x S tensor) and its
//    backward (the grads of q, k and v), as the tracer's fused.py defines
//    them, with an optional attention mask last;
//  - the fused optimizer kernels _fused_adamw_, _fused_adam_ and _fused_sgd_:
//    they update their tensor lists in place and return nothing.
constexpr std::string_view kForeach = "_foreach_ (out of place)";
constexpr std::string_view kForeachNorm = "_foreach_norm";
constexpr std::string_view kForeachInPlace = "_foreach_ (in place)";

void add_torch2_rules(std::unordered_map<std::string_view, Rule>& r) {
  // The output's layout is the kernel's: FlashAttention (half precision, no
  // mask, q's head size = v's <= 256, sm 8.0 on) writes it as q is laid out
  // (empty_like of q), the memory-efficient kernel as (N, L, heads, d); so
  // multi_head_attention_forward's permute(2, 0, 1, 3).contiguous() and a GPT
  // block's transpose(1, 2).contiguous() copy nothing where PyTorch 2's do not.
  // Backward's grads take q's, k's and v's layouts (both kernels).
  r["scaled_dot_product_attention"] = [](c10::ArrayRef<c10::IValue> a) -> Outs {
    const at::Tensor& q = a[0].toTensor();
    const at::Tensor& v = a[2].toTensor();
    std::vector<int64_t> out(q.sizes().begin(), q.sizes().end());
    out.back() = v.size(-1);
    const std::vector<int64_t> rows(q.sizes().begin(), q.sizes().end() - 1);
    const std::string& arch = rt().gpu().architecture;
    const bool half = q.scalar_type() == at::kHalf || q.scalar_type() == at::kBFloat16;
    const bool flash = half && (a.size() < 7 || !a[6].isTensor() || !a[6].toTensor().defined()) &&
                       v.size(-1) == q.size(-1) && q.size(-1) <= 256 &&
                       (arch == "Ampere" || arch == "Ada" || arch == "Hopper" || arch == "Blackwell");
    at::Tensor o;
    if (q.dim() != 4)
      o = meta_empty(out, q.scalar_type());
    else if (flash)
      o = at::empty_like(q);
    else
      o = meta_empty({out[0], out[2], out[1], out[3]}, q.scalar_type()).transpose(1, 2);
    return {o, meta_empty(rows, at::kFloat)};
  };
  r["scaled_dot_product_attention_backward"] = [](c10::ArrayRef<c10::IValue> a) -> Outs {
    return {at::empty_like(a[1].toTensor()), at::empty_like(a[2].toTensor()), at::empty_like(a[3].toTensor())};
  };
  // Layer and group norm forward: one normalisation kernel as on a GPU (their
  // CompositeExplicitAutograd form, which a CPU-only build runs for CUDA,
  // is a batch norm of a reshaped input plus an addcmul, with other saved
  // tensors). Statistics: layer norm's in the accumulate type (FP32 for half
  // inputs), group norm's in the input's type, as CUDA's kernels make them.
  r["native_layer_norm"] = [](c10::ArrayRef<c10::IValue> a) -> Outs {
    const at::Tensor& x = a[0].toTensor();
    const auto normalized = a[1].toIntVector();
    std::vector<int64_t> stats(x.sizes().begin(), x.sizes().end());
    for (std::size_t i = stats.size() - std::min(stats.size(), normalized.size()); i < stats.size(); ++i) stats[i] = 1;
    const at::ScalarType acc =
        (x.scalar_type() == at::kHalf || x.scalar_type() == at::kBFloat16) ? at::kFloat : x.scalar_type();
    return {meta_empty(x.sizes(), x.scalar_type()), meta_empty(stats, acc), meta_empty(stats, acc)};
  };
  r["native_group_norm"] = [](c10::ArrayRef<c10::IValue> a) -> Outs {
    const at::Tensor& x = a[0].toTensor();
    const std::vector<int64_t> stats = {a[3].toInt(), a[6].toInt()};
    return {meta_like(x), meta_empty(stats, x.scalar_type()), meta_empty(stats, x.scalar_type())};
  };
  for (const char* n : {"_fused_adamw_", "_fused_adam_", "_fused_sgd_"})
    r[n] = [](c10::ArrayRef<c10::IValue>) -> Outs { return {}; };
  // torch 1.13's _foreach_* ops (foreach optimizers, clip_grad_norm_) have no
  // meta kernels: an out-of-place one gives a list shaped as its first list
  // (_foreach_norm: one 0-dim norm per tensor); an in-place one, or an out=
  // one, returns nothing (emulate_op picks kForeachInPlace by the schema).
  r[kForeach] = [](c10::ArrayRef<c10::IValue> a) -> Outs {
    c10::List<at::Tensor> out;
    for (const at::Tensor& t : a[0].toTensorVector()) out.push_back(meta_like(t));
    return {out};
  };
  r[kForeachNorm] = [](c10::ArrayRef<c10::IValue> a) -> Outs {
    c10::List<at::Tensor> out;
    for (const at::Tensor& t : a[0].toTensorVector()) out.push_back(meta_empty({}, t.scalar_type()));
    return {out};
  };
  r[kForeachInPlace] = [](c10::ArrayRef<c10::IValue>) -> Outs { return {}; };
}

}  // namespace

// The rule of op `name` returning `n_rets` values: its own, or for a
// _foreach_ op one of the three above.
std::string_view rule_name(std::string_view name, std::size_t n_rets) {
  if (!name.starts_with("_foreach_")) return name;
  if (n_rets == 0) return kForeachInPlace;
  return name == "_foreach_norm" ? kForeachNorm : kForeach;
}

const std::unordered_map<std::string_view, Rule>& shape_rules() {
  static const std::unordered_map<std::string_view, Rule> rules = [] {
    std::unordered_map<std::string_view, Rule> r;
    r["convolution"] = [](c10::ArrayRef<c10::IValue> a) -> Outs {
      const at::Tensor& input = a[0].toTensor();
      const at::Tensor& weight = a[1].toTensor();
      TORCH_CHECK(input.dim() == weight.dim(), "convolution: input of ", input.dim(), " dims, weight of ",
                  weight.dim());
      return {at::empty(conv_output_size(input, weight, a), input.options().device(at::kMeta),
                        input.suggest_memory_format())};
    };
    r["convolution_backward"] = [](c10::ArrayRef<c10::IValue> a) -> Outs {
      const at::Tensor& grad = a[0].toTensor();
      const at::Tensor& input = a[1].toTensor();
      const at::Tensor& weight = a[2].toTensor();
      const c10::IValue& mask = a[10];
      return {mask_at(mask, 0) ? c10::IValue(meta_like(input, grad.scalar_type())) : none(),
              mask_at(mask, 1) ? c10::IValue(meta_like(weight)) : none(),
              mask_at(mask, 2) ? c10::IValue(meta_empty({grad.size(1)}, grad.scalar_type())) : none()};
    };
    r["native_batch_norm"] = [](c10::ArrayRef<c10::IValue> a) -> Outs {
      const at::Tensor& x = a[0].toTensor();
      const int64_t c = x.size(1);
      const at::ScalarType stat =
          (x.scalar_type() == at::kHalf || x.scalar_type() == at::kBFloat16) ? at::kFloat : x.scalar_type();
      const bool training = a[5].toBool();
      return {meta_like(x), meta_empty({training ? c : 0}, stat), meta_empty({training ? c : 0}, stat)};
    };
    r["native_batch_norm_backward"] = [](c10::ArrayRef<c10::IValue> a) -> Outs {
      const at::Tensor& x = a[1].toTensor();
      const int64_t c = x.size(1);
      const at::ScalarType w = a[2].isTensor() ? a[2].toTensor().scalar_type() : x.scalar_type();
      const c10::IValue& mask = a[9];
      return {mask_at(mask, 0) ? c10::IValue(meta_like(x)) : none(),
              mask_at(mask, 1) ? c10::IValue(meta_empty({c}, w)) : none(),
              mask_at(mask, 2) ? c10::IValue(meta_empty({c}, w)) : none()};
    };
    auto grad_like_input = [](c10::ArrayRef<c10::IValue> a) -> Outs {
      const at::Tensor& g = a[0].toTensor();
      if (!a[1].isTensor()) return {meta_like(g)};
      return {meta_like(a[1].toTensor(), g.scalar_type())};
    };
    for (const char* n : {"max_pool2d_with_indices_backward", "max_pool3d_with_indices_backward", "avg_pool2d_backward",
                          "avg_pool3d_backward", "_adaptive_avg_pool2d_backward", "_adaptive_avg_pool3d_backward",
                          "adaptive_max_pool2d_backward"})
      r[n] = grad_like_input;
    for (const char* n : {"_softmax_backward_data", "_log_softmax_backward_data"})
      r[n] = [](c10::ArrayRef<c10::IValue> a) -> Outs { return {meta_like(a[0].toTensor())}; };
    r["embedding_dense_backward"] = [](c10::ArrayRef<c10::IValue> a) -> Outs {
      const at::Tensor& g = a[0].toTensor();
      return {meta_empty({a[2].toInt(), g.size(-1)}, g.scalar_type())};
    };
    for (const char* n : {"nll_loss_forward", "nll_loss2d_forward"})
      r[n] = [](c10::ArrayRef<c10::IValue> a) -> Outs {
        const at::Tensor& x = a[0].toTensor();
        const at::Tensor& target = a[1].toTensor();
        if (a[3].toInt() == 0) return {meta_empty(target.sizes(), x.scalar_type()), meta_empty({}, x.scalar_type())};
        return {meta_empty({}, x.scalar_type()), meta_empty({}, x.scalar_type())};
      };
    for (const char* n : {"nll_loss_backward", "nll_loss2d_backward"})
      r[n] = [](c10::ArrayRef<c10::IValue> a) -> Outs { return {meta_like(a[1].toTensor())}; };
    r["_embedding_bag_dense_backward"] = [](c10::ArrayRef<c10::IValue> a) -> Outs {
      const at::Tensor& g = a[0].toTensor();
      return {meta_empty({a[5].toInt(), g.size(-1)}, g.scalar_type())};
    };
    r["_embedding_bag_per_sample_weights_backward"] = [](c10::ArrayRef<c10::IValue> a) -> Outs {
      return {meta_empty({a[2].toTensor().numel()}, a[0].toTensor().scalar_type())};
    };
    r["native_dropout"] = [](c10::ArrayRef<c10::IValue> a) -> Outs {
      const at::Tensor& x = a[0].toTensor();
      return {meta_like(x), meta_like(x, at::kBool)};
    };
    r["native_dropout_backward"] = [](c10::ArrayRef<c10::IValue> a) -> Outs { return {meta_like(a[0].toTensor())}; };
    for (const char* n :
         {"threshold_backward", "gelu_backward", "silu_backward", "hardswish_backward", "hardsigmoid_backward",
          "sigmoid_backward", "tanh_backward", "leaky_relu_backward", "elu_backward", "softplus_backward"})
      r[n] = [](c10::ArrayRef<c10::IValue> a) -> Outs { return {meta_like(a[0].toTensor())}; };
    r["_amp_foreach_non_finite_check_and_unscale_"] = [](c10::ArrayRef<c10::IValue>) -> Outs { return {}; };
    r["_amp_update_scale_"] = [](c10::ArrayRef<c10::IValue> a) -> Outs { return {a[0]}; };
    r["native_group_norm_backward"] = [](c10::ArrayRef<c10::IValue> a) -> Outs {
      const at::Tensor& x = a[1].toTensor();
      const int64_t c = a[6].toInt();
      const at::ScalarType w = a[4].isTensor() ? a[4].toTensor().scalar_type() : x.scalar_type();
      const c10::IValue& mask = a[9];
      return {mask_at(mask, 0) ? c10::IValue(meta_like(x)) : none(),
              mask_at(mask, 1) ? c10::IValue(meta_empty({c}, w)) : none(),
              mask_at(mask, 2) ? c10::IValue(meta_empty({c}, w)) : none()};
    };
    r["native_layer_norm_backward"] = [](c10::ArrayRef<c10::IValue> a) -> Outs {
      const at::Tensor& x = a[1].toTensor();
      const c10::IValue& mask = a[7];
      return {mask_at(mask, 0) ? c10::IValue(meta_like(x)) : none(),
              mask_at(mask, 1) && a[5].isTensor() ? c10::IValue(meta_like(a[5].toTensor())) : none(),
              mask_at(mask, 2) && a[6].isTensor() ? c10::IValue(meta_like(a[6].toTensor())) : none()};
    };
    // Fused RNN cells (nn.LSTM / nn.GRU without cuDNN): the pointwise part
    // of a step; the gate matmuls are separate mm ops.
    r["_thnn_fused_lstm_cell"] = [](c10::ArrayRef<c10::IValue> a) -> Outs {
      const at::Tensor& gates = a[0].toTensor();
      const at::Tensor& cx = a[2].toTensor();
      return {meta_like(cx, gates.scalar_type()), meta_like(cx, gates.scalar_type()), meta_like(gates)};
    };
    r["_thnn_fused_lstm_cell_backward_impl"] = [](c10::ArrayRef<c10::IValue> a) -> Outs {
      const at::Tensor& cx = a[2].toTensor();
      const at::Tensor& workspace = a[4].toTensor();
      return {meta_like(workspace), meta_like(cx),
              a[5].toBool() ? c10::IValue(meta_empty({workspace.size(1)}, workspace.scalar_type())) : none()};
    };
    r["_thnn_fused_gru_cell"] = [](c10::ArrayRef<c10::IValue> a) -> Outs {
      const at::Tensor& gates = a[0].toTensor();
      const at::Tensor& hx = a[2].toTensor();
      return {meta_like(hx, gates.scalar_type()), meta_empty({hx.size(0), hx.size(1) * 5}, gates.scalar_type())};
    };
    r["_thnn_fused_gru_cell_backward"] = [](c10::ArrayRef<c10::IValue> a) -> Outs {
      const at::Tensor& grad = a[0].toTensor();
      const int64_t b = grad.size(0), h = grad.size(1);
      const at::ScalarType t = grad.scalar_type();
      const bool bias = a[2].toBool();
      return {meta_empty({b, 3 * h}, t), meta_empty({b, 3 * h}, t), meta_like(grad),
              bias ? c10::IValue(meta_empty({3 * h}, t)) : none(), bias ? c10::IValue(meta_empty({3 * h}, t)) : none()};
    };
    add_torch2_rules(r);
    return r;
  }();
  return rules;
}

}  // namespace gpemu::torch_backend
