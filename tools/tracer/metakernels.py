"""Shape functions for aten ops that have no meta kernel in torch 1.13.

Each function returns meta tensors with the shapes/dtypes the CUDA kernel would
return. Called from inside the recording mode, so factory calls here go
straight to the meta backend.
"""
import torch

aten = torch.ops.aten
_IMPL = {}


def impl(*names):
    def deco(fn):
        for n in names:
            _IMPL[n] = fn
        return fn
    return deco


def _like(t, dtype=None):
    return torch.empty(t.shape, dtype=dtype or t.dtype, device="meta")


def _empty(shape, dtype):
    return torch.empty(list(shape), dtype=dtype, device="meta")


@impl("convolution_backward")
def _conv_bwd(grad_out, inp, weight, bias_sizes, stride, padding, dilation, transposed,
              output_padding, groups, output_mask):
    gi = _like(inp) if output_mask[0] else None
    gw = _like(weight) if output_mask[1] else None
    gb = _empty([grad_out.shape[1]], grad_out.dtype) if output_mask[2] else None
    return gi, gw, gb


@impl("native_batch_norm_backward")
def _bn_bwd(grad_out, inp, weight, running_mean, running_var, save_mean, save_invstd,
            train, eps, output_mask):
    gi = _like(inp) if output_mask[0] else None
    c = inp.shape[1]
    wdt = weight.dtype if weight is not None else inp.dtype
    gw = _empty([c], wdt) if output_mask[1] else None
    gb = _empty([c], wdt) if output_mask[2] else None
    return gi, gw, gb


@impl("native_batch_norm")
def _bn_fwd(inp, weight, bias, running_mean, running_var, training, momentum, eps):
    c = inp.shape[1]
    sdt = torch.float32 if inp.dtype in (torch.float16, torch.bfloat16) else inp.dtype
    if training:
        return _like(inp), _empty([c], sdt), _empty([c], sdt)
    return _like(inp), _empty([0], sdt), _empty([0], sdt)


@impl("max_pool2d_with_indices_backward", "max_pool3d_with_indices_backward",
      "avg_pool2d_backward", "avg_pool3d_backward", "_adaptive_avg_pool2d_backward",
      "_adaptive_avg_pool3d_backward", "adaptive_max_pool2d_backward",
      "_softmax_backward_data", "_log_softmax_backward_data")
def _grad_like_input(grad_out, inp, *rest):
    if not isinstance(inp, torch.Tensor):  # softmax backward: (grad, output, dim, dtype)
        return _like(grad_out)
    return _like(inp, grad_out.dtype)


@impl("embedding_dense_backward")
def _emb_bwd(grad_out, indices, num_weights, padding_idx, scale_grad_by_freq):
    return _empty([num_weights, grad_out.shape[-1]], grad_out.dtype)


@impl("nll_loss2d_forward", "nll_loss_forward")
def _nll_fwd(inp, target, weight, reduction, ignore_index):
    if reduction == 0:  # none
        return _empty(target.shape, inp.dtype), _empty([], inp.dtype)
    return _empty([], inp.dtype), _empty([], inp.dtype)


@impl("nll_loss_backward", "nll_loss2d_backward")
def _nll_bwd(grad_out, inp, target, weight, reduction, ignore_index, total_weight):
    return _like(inp)


@impl("native_dropout")
def _dropout(inp, p, train):
    return _like(inp), _like(inp, torch.bool)


@impl("native_dropout_backward")
def _dropout_bwd(grad, mask, scale):
    return _like(grad)


@impl("threshold_backward", "gelu_backward", "silu_backward", "hardswish_backward",
      "hardsigmoid_backward", "sigmoid_backward", "tanh_backward", "leaky_relu_backward",
      "elu_backward", "softplus_backward")
def _ew_bwd(grad, x, *rest):
    return _like(grad)


@impl("_amp_foreach_non_finite_check_and_unscale_")
def _amp_unscale(grads, found_inf, inv_scale):
    return None


@impl("_amp_update_scale_")
def _amp_update(scale, growth_tracker, found_inf, growth, backoff, interval):
    return scale


@impl("native_group_norm_backward")
def _gn_bwd(grad_out, inp, mean, rstd, weight, n, c, hw, group, output_mask):
    gi = _like(inp) if output_mask[0] else None
    gw = _empty([c], weight.dtype if weight is not None else inp.dtype) if output_mask[1] else None
    gb = _empty([c], weight.dtype if weight is not None else inp.dtype) if output_mask[2] else None
    return gi, gw, gb


@impl("native_layer_norm_backward")
def _ln_bwd(grad_out, inp, normalized_shape, mean, rstd, weight, bias, output_mask):
    gi = _like(inp) if output_mask[0] else None
    gw = _like(weight) if (output_mask[1] and weight is not None) else None
    gb = _like(bias) if (output_mask[2] and bias is not None) else None
    return gi, gw, gb


def run_missing(func, args, kwargs):
    name = func.overloadpacket.__name__
    fn = _IMPL.get(name)
    if fn is None:
        raise NotImplementedError(
            f"gpemu tracer: no meta kernel for aten.{name} ({func}); add one in "
            "tools/tracer/metakernels.py")
    return fn(*args, **kwargs)
