"""Fused kernels as single operators, for the zoo's fused programs.

Benchmarks of transformers run chains of memory-bound ops as one kernel each:
DeepLearningExamples' BERT scripts its layers with NVFuser (bias + GELU, and
bias + dropout + residual add + LayerNorm), Megatron and apex ship the same
chains as CUDA kernels. A fused chain reads its inputs once and writes its
outputs once, instead of writing and re-reading every intermediate.

torch 1.13 has no such kernels for meta tensors, so they are defined here as
operators of the `gpemu` namespace with meta implementations (shapes and
dtypes only), wrapped in autograd Functions whose backward is one fused
operator too. The recorder sees them as any aten operator: one op, its bytes
the unique bytes of its arguments and results. Parameter-gradient reductions
(the bias grads) stay separate `sum` kernels, as in the fused implementations.

    bias_gelu(x, bias)                      y = gelu(x + bias)
    bias_gelu_backward(grad, x, bias)       grad * gelu'(x + bias)
    bias_dropout_add_layer_norm(x, bias, residual, weight, ln_bias, p, eps)
        pre = dropout(x + bias, p) + residual; y = layer_norm(pre)
        -> (y, pre, mask, mean, rstd)
    bias_dropout_add_layer_norm_backward(grad, pre, mask, mean, rstd, weight, p)
        -> (grad_x, grad_pre, grad_weight, grad_ln_bias)
    scale_softmax_dropout(scores, scale, p)
        y = softmax(scores * scale); probs = dropout(y, p) -> (probs, y, mask)
    scale_softmax_dropout_backward(grad, y, mask, scale, p)
        grad_scores = scale * softmax'(y) . dropout'(mask, grad)

    scaled_dot_product_attention(q, k, v, p, causal, scale) -> (out, logsumexp)
    scaled_dot_product_attention_backward(grad, q, k, v, out, logsumexp, p, causal, scale)
        -> (grad_q, grad_k, grad_v)

The attention-score chain (scale, softmax, dropout) is what NVFuser makes of
DeepLearningExamples' scripted self-attention between its two batched matmuls
(its parser takes softmax and softmax backward as normalisation ops, dropout
and the scaling as pointwise ones), and what Megatron ships as its fused
scale-mask-softmax kernel: one kernel forward, one backward, over the S x S
scores.

scaled_dot_product_attention is a fused attention kernel, as
torch.nn.functional.scaled_dot_product_attention runs one on a GPU
(FlashAttention for FP16/BF16, the memory-efficient kernel for FP32): the
S x S scores never reach memory; forward keeps the row log-sum-exp for
backward, which recomputes the scores tile by tile; dropout is drawn in the
kernel from a seed (no mask tensor).
"""
import torch

_LIB = torch.library.Library("gpemu", "DEF")
_LIB.define("bias_gelu(Tensor x, Tensor bias) -> Tensor")
_LIB.define("bias_gelu_backward(Tensor grad, Tensor x, Tensor bias) -> Tensor")
_LIB.define("bias_dropout_add_layer_norm(Tensor x, Tensor bias, Tensor residual, Tensor weight, "
            "Tensor ln_bias, float p, float eps) -> (Tensor, Tensor, Tensor, Tensor, Tensor)")
_LIB.define("bias_dropout_add_layer_norm_backward(Tensor grad, Tensor pre, Tensor mask, Tensor mean, "
            "Tensor rstd, Tensor weight, float p) -> (Tensor, Tensor, Tensor, Tensor)")
_LIB.define("scale_softmax_dropout(Tensor scores, float scale, float p) -> (Tensor, Tensor, Tensor)")
_LIB.define("scale_softmax_dropout_backward(Tensor grad, Tensor y, Tensor mask, float scale, float p) -> Tensor")
_LIB.define("scaled_dot_product_attention(Tensor q, Tensor k, Tensor v, float p, bool causal, float scale) "
            "-> (Tensor, Tensor)")
_LIB.define("scaled_dot_product_attention_backward(Tensor grad, Tensor q, Tensor k, Tensor v, Tensor out, "
            "Tensor lse, float p, bool causal, float scale) -> (Tensor, Tensor, Tensor)")

# The names the recorder sees (operator classes in opclass.py).
OPS = ("bias_gelu", "bias_gelu_backward", "bias_dropout_add_layer_norm",
       "bias_dropout_add_layer_norm_backward", "scale_softmax_dropout", "scale_softmax_dropout_backward",
       "scaled_dot_product_attention", "scaled_dot_product_attention_backward")


def _rows(x):
    return tuple(x.shape[:-1]) + (1,)


def _bias_gelu_meta(x, bias):
    return torch.empty_like(x)


def _bias_gelu_backward_meta(grad, x, bias):
    return torch.empty_like(x)


def _bdaln_meta(x, bias, residual, weight, ln_bias, p, eps):
    stats = torch.float32
    return (torch.empty_like(x), torch.empty_like(x), torch.empty(x.shape, dtype=torch.bool, device=x.device),
            torch.empty(_rows(x), dtype=stats, device=x.device), torch.empty(_rows(x), dtype=stats, device=x.device))


def _bdaln_backward_meta(grad, pre, mask, mean, rstd, weight, p):
    return (torch.empty_like(pre), torch.empty_like(pre), torch.empty_like(weight), torch.empty_like(weight))


def _ssd_meta(scores, scale, p):
    return (torch.empty_like(scores), torch.empty_like(scores),
            torch.empty(scores.shape, dtype=torch.bool, device=scores.device))


def _ssd_backward_meta(grad, y, mask, scale, p):
    return torch.empty_like(y)


def _sdpa_meta(q, k, v, p, causal, scale):
    out = torch.empty(q.shape[:-1] + v.shape[-1:], dtype=q.dtype, device=q.device)
    return out, torch.empty(q.shape[:-1], dtype=torch.float32, device=q.device)


def _sdpa_backward_meta(grad, q, k, v, out, lse, p, causal, scale):
    return torch.empty_like(q), torch.empty_like(k), torch.empty_like(v)


def register(lib, namespace, kernels):
    """Registers each (name, meta kernel) of `kernels` in `lib` (namespace
    `namespace`): the meta kernel, and an autograd kernel that only passes the
    call on to the kernels below, where the recorder sees it (none of these
    operators is differentiated by autograd: their Functions give the backward)."""
    for name, meta in kernels:
        op = getattr(getattr(torch.ops, namespace), name)

        def below_autograd(*args, op=op):
            guard = torch._C._AutoDispatchBelowAutograd()  # noqa: F841 (an RAII guard, alive for the call)
            return op(*args)
        lib.impl(name, meta, "Meta")
        lib.impl(name, below_autograd, "AutogradMeta")


register(_LIB, "gpemu", (("bias_gelu", _bias_gelu_meta), ("bias_gelu_backward", _bias_gelu_backward_meta),
                         ("bias_dropout_add_layer_norm", _bdaln_meta),
                         ("bias_dropout_add_layer_norm_backward", _bdaln_backward_meta),
                         ("scale_softmax_dropout", _ssd_meta),
                         ("scale_softmax_dropout_backward", _ssd_backward_meta),
                         ("scaled_dot_product_attention", _sdpa_meta),
                         ("scaled_dot_product_attention_backward", _sdpa_backward_meta)))


def _bias_grad(g):
    return g.sum(dim=tuple(range(g.dim() - 1)))


def saved_inputs_function(forward_op, backward_op, grads=lambda g: g):
    """An autograd Function for a fused operator that saves its inputs and
    whose backward is one operator of (grad, *inputs); `grads` turns that
    operator's result into the inputs' gradients."""
    class Fn(torch.autograd.Function):
        @staticmethod
        def forward(ctx, *inputs):
            ctx.save_for_backward(*inputs)
            return forward_op(*inputs)

        @staticmethod
        def backward(ctx, grad):
            return grads(backward_op(grad, *ctx.saved_tensors))
    return Fn


# the bias grad is a separate reduction of the input's grad, as in the fused implementations
BiasGelu = saved_inputs_function(torch.ops.gpemu.bias_gelu, torch.ops.gpemu.bias_gelu_backward,
                                 lambda gx: (gx, _bias_grad(gx)))


class BiasDropoutAddLayerNorm(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, bias, residual, weight, ln_bias, p, eps):
        y, pre, mask, mean, rstd = torch.ops.gpemu.bias_dropout_add_layer_norm(x, bias, residual, weight, ln_bias,
                                                                                p, eps)
        ctx.save_for_backward(pre, mask, mean, rstd, weight)
        ctx.p = p
        return y

    @staticmethod
    def backward(ctx, grad):
        pre, mask, mean, rstd, weight = ctx.saved_tensors
        gx, gpre, gw, gb = torch.ops.gpemu.bias_dropout_add_layer_norm_backward(grad, pre, mask, mean, rstd,
                                                                                  weight, ctx.p)
        return gx, _bias_grad(gx), gpre, gw, gb, None, None


class ScaleSoftmaxDropout(torch.autograd.Function):
    @staticmethod
    def forward(ctx, scores, scale, p):
        probs, y, mask = torch.ops.gpemu.scale_softmax_dropout(scores, scale, p)
        ctx.save_for_backward(y, mask)
        ctx.scale, ctx.p = scale, p
        return probs

    @staticmethod
    def backward(ctx, grad):
        y, mask = ctx.saved_tensors
        return torch.ops.gpemu.scale_softmax_dropout_backward(grad, y, mask, ctx.scale, ctx.p), None, None


def scale_softmax_dropout(scores, scale, p, training=True):
    """softmax(scores * scale) with dropout p on the probabilities, one kernel."""
    return ScaleSoftmaxDropout.apply(scores, scale, p if training else 0.0)


class ScaledDotProductAttention(torch.autograd.Function):
    @staticmethod
    def forward(ctx, q, k, v, p, causal, scale):
        out, lse = torch.ops.gpemu.scaled_dot_product_attention(q, k, v, p, causal, scale)
        ctx.save_for_backward(q, k, v, out, lse)
        ctx.args = (p, causal, scale)
        return out

    @staticmethod
    def backward(ctx, grad):
        q, k, v, out, lse = ctx.saved_tensors
        gq, gk, gv = torch.ops.gpemu.scaled_dot_product_attention_backward(grad, q, k, v, out, lse, *ctx.args)
        return gq, gk, gv, None, None, None


def scaled_dot_product_attention(q, k, v, p=0.0, causal=False, training=True):
    """softmax(q k^T / sqrt(d)) v over (B, heads, S, d) tensors as one fused
    kernel (torch.nn.functional.scaled_dot_product_attention on a GPU)."""
    return ScaledDotProductAttention.apply(q, k, v, p if training else 0.0, causal, 1 / (q.shape[-1] ** 0.5))


def bias_gelu(x, bias):
    return BiasGelu.apply(x, bias)


def bias_dropout_add_layer_norm(x, bias, residual, ln, p, training=True):
    """`ln`: the nn.LayerNorm whose weight, bias and eps are used."""
    return BiasDropoutAddLayerNorm.apply(x, bias, residual, ln.weight, ln.bias, p if training else 0.0, ln.eps)
