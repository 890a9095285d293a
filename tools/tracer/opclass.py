"""Operator classes and FLOP rules.

Every recorded aten operator gets one class (a short string, see CLASSES) and a
FLOP count. Multiply-add counts as 2 FLOPs. The rules are documented in
docs/model-zoo.md ("FLOP rules"); keep the two in step.
"""
from math import prod

CLASSES = (
    "conv",         # convolution forward / backward (1-D and 2-D)
    "conv3d",       # convolution with three spatial dimensions (no Winograd path)
    "matmul",       # mm, addmm, bmm, baddbmm, mv, dot (linear layers decompose to these)
    "norm",         # batch / layer / group / instance norm kernels
    "elementwise",  # pointwise math, activations, dropout, masking
    "pooling",      # max / avg / adaptive pooling and their backward
    "reduction",    # sum, mean, max, var, losses
    "softmax",      # softmax, log_softmax and backward (attention scores)
    "embedding",    # gather / scatter / index ops, embedding forward and backward
    "optimizer",    # any kernel issued inside optimizer.step() (and AMP grad unscale)
    "copy",         # copies, casts, cat, fill/zero, pads: memory movement, no math
    "view",         # no kernel: views, aliases, detach, empty allocations
    "other",        # anything not covered above
)

CONV = {"convolution", "_convolution", "convolution_backward", "cudnn_convolution",
        "cudnn_convolution_transpose", "convolution_overrideable",
        "convolution_backward_overrideable", "mkldnn_convolution", "slow_conv3d",
        "slow_conv_transpose3d", "slow_conv_transpose2d", "thnn_conv2d"}
MATMUL = {"mm", "addmm", "bmm", "baddbmm", "addbmm", "mv", "addmv", "dot", "vdot",
          "addr", "_addmm_activation"}
NORM = {"native_batch_norm", "native_batch_norm_backward", "cudnn_batch_norm",
        "cudnn_batch_norm_backward", "native_layer_norm", "native_layer_norm_backward",
        "native_group_norm", "native_group_norm_backward", "_native_batch_norm_legit",
        "batch_norm_elemt", "batch_norm_stats", "batch_norm_backward_reduce",
        "batch_norm_backward_elemt", "batch_norm_gather_stats_with_counts"}
# The tracer's own kernels (fused.py, recsys.py; never seen by the live torch backend)
FUSED = {"bias_dropout_add_layer_norm": "norm", "bias_dropout_add_layer_norm_backward": "norm",
         "bias_gelu": "elementwise", "bias_gelu_backward": "elementwise",
         "scale_softmax_dropout": "softmax", "scale_softmax_dropout_backward": "softmax",
         "scaled_dot_product_attention": "matmul", "scaled_dot_product_attention_backward": "matmul",
         "embedding_gather": "embedding", "embedding_gather_backward": "embedding",
         "sparse_sgd_": "embedding", "dot_interaction": "matmul", "dot_interaction_backward": "matmul"}
POOL = {"max_pool2d_with_indices", "max_pool2d_with_indices_backward",
        "max_pool3d_with_indices", "max_pool3d_with_indices_backward", "max_pool2d",
        "avg_pool2d", "avg_pool2d_backward", "avg_pool3d", "avg_pool3d_backward",
        "_adaptive_avg_pool2d", "_adaptive_avg_pool2d_backward", "_adaptive_avg_pool3d",
        "_adaptive_avg_pool3d_backward", "adaptive_max_pool2d",
        "adaptive_max_pool2d_backward", "max_unpool2d"}
SOFTMAX = {"_softmax", "_log_softmax", "_softmax_backward_data",
           "_log_softmax_backward_data"}
REDUCTION = {"sum", "mean", "amax", "amin", "max", "min", "prod", "norm", "var", "std",
             "var_mean", "std_mean", "argmax", "argmin", "cumsum", "cumprod", "all", "any",
             "linalg_vector_norm", "nll_loss_forward", "nll_loss2d_forward", "mse_loss",
             "binary_cross_entropy", "binary_cross_entropy_with_logits", "logsumexp",
             "max_dim", "min_dim"}
EMBEDDING = {"embedding", "embedding_dense_backward", "embedding_backward",
             "_embedding_bag", "_embedding_bag_forward_only", "_embedding_bag_backward",
             "_embedding_bag_dense_backward", "index_select", "index", "gather",
             "scatter", "scatter_add", "scatter_add_", "scatter_", "index_add",
             "index_add_", "index_put", "index_put_", "_index_put_impl_",
             "index_select_backward", "gather_backward", "nll_loss_backward",
             "nll_loss2d_backward", "take", "masked_select", "embedding_renorm_"}
COPY = {"_to_copy", "copy_", "clone", "cat", "stack", "constant_pad_nd", "fill_",
        "zero_", "zeros", "ones", "full", "zeros_like", "ones_like", "full_like",
        "new_zeros", "new_ones", "new_full", "scalar_tensor", "arange", "repeat",
        "_copy_from", "_copy_from_and_resize", "lift_fresh_copy", "tensor", "contiguous",
        "flip", "roll", "tril_indices", "triu_indices", "linspace", "eye",
        "slice_backward", "select_backward", "index_fill", "index_fill_",
        "masked_scatter", "pad", "reflection_pad2d", "replication_pad2d",
        "_unsafe_index", "split_with_sizes_copy", "narrow_copy"}
VIEW = {"view", "_unsafe_view", "_reshape_alias", "reshape", "t", "transpose",
        "transpose_", "t_", "permute", "expand", "expand_as", "as_strided", "select",
        "slice", "unsqueeze", "unsqueeze_", "squeeze", "squeeze_", "detach", "detach_",
        "alias", "split", "split_with_sizes", "chunk", "unbind", "narrow", "diagonal",
        "view_as", "view_as_real", "view_as_complex", "lift_fresh", "empty",
        "empty_like", "empty_strided", "new_empty", "new_empty_strided", "unfold",
        "as_strided_", "resize_", "set_", "_indices", "_values", "indices", "values",
        "movedim", "flatten", "unflatten", "_fw_primal", "_make_dual", "_unpack_dual",
        "real", "imag", "conj", "_conj", "_neg_view", "resolve_conj", "resolve_neg",
        "expand_copy", "_nested_tensor_size", "numpy_T", "mT", "mH", "adjoint",
        "swapaxes", "swapdims", "lift", "_unsafe_view_copy", "_has_compatible_shallow_copy_type"}
# copy-like ops that overwrite their first argument without reading it
WRITE_ONLY_SELF = {"copy_", "fill_", "zero_", "normal_", "uniform_", "bernoulli_",
                   "random_", "exponential_", "geometric_", "log_normal_", "cauchy_"}
# elementwise ops with more than one flop per output element
ELEMENTWISE_FLOPS = {
    "addcmul": 3, "addcmul_": 3, "addcdiv": 3, "addcdiv_": 3, "lerp": 3, "lerp_": 3,
    "_foreach_addcmul_": 3, "_foreach_addcdiv_": 3, "_foreach_addcmul": 3,
    "_foreach_addcdiv": 3, "_foreach_lerp_": 3,
    "_amp_foreach_non_finite_check_and_unscale_": 2,
    # fused.py: the bias add and the activation (or its derivative and the product)
    "bias_gelu": 2, "bias_gelu_backward": 3,
    # recsys.py: weight -= lr * value per updated element
    "sparse_sgd_": 2,
}
# no flops at all (pure data movement / rng / fills)
ZERO_FLOP_ELEMENTWISE = {"bernoulli_", "bernoulli", "normal_", "uniform_", "random_",
                         "_amp_update_scale_"}


def classify(name, phase):
    """Operator class of aten op `name` executed in `phase`."""
    if name in VIEW:
        return "view"
    if phase == "optimizer":
        return "optimizer"
    if name in FUSED:
        return FUSED[name]
    if name in CONV:
        return "conv"
    if name in MATMUL:
        return "matmul"
    if name in NORM:
        return "norm"
    if name in POOL:
        return "pooling"
    if name in SOFTMAX:
        return "softmax"
    if name in REDUCTION:
        return "reduction"
    if name in EMBEDDING:
        return "embedding"
    if name in COPY:
        return "copy"
    return "elementwise"


def spatial_class(cls, inputs):
    """`cls` refined by the operands: a convolution whose input or weight has
    five dimensions (N, C, D, H, W) is "conv3d". cuDNN's Winograd and FFT
    algorithms that let 2-D 3x3 convolutions beat the direct FLOP count do not
    apply to 3-D ones, so the cost model treats them apart."""
    if cls == "conv" and any(x.dim() == 5 for x in inputs):
        return "conv3d"
    return cls


def _numel(shape):
    return prod(shape) if len(shape) else 1


def _is_t(x, torch):
    return isinstance(x, torch.Tensor)


def conv_macs(inp_shape, w_shape, out_shape, transposed):
    """Multiply-accumulates of one convolution (forward, or either backward product)."""
    if transposed:
        # weight: (Cin, Cout/groups, k...); every input element meets Cout/g*k taps
        return inp_shape[0] * _numel(inp_shape[2:]) * _numel(w_shape)
    # weight: (Cout, Cin/groups, k...); every output position needs Cin/g*k taps per Cout
    return out_shape[0] * _numel(out_shape[2:]) * _numel(w_shape)


def flops(name, cls, args, kwargs, outs, torch):
    """FLOPs of one aten op call. args/kwargs: the op's arguments; outs: list of
    output tensors (new or aliased). Multiply-add = 2 FLOPs."""
    if cls == "view":
        return 0
    a = args
    T = torch.Tensor
    if name in ("convolution", "_convolution", "convolution_overrideable"):
        inp, w, bias = a[0], a[1], a[2]
        transposed = bool(a[6])
        out = outs[0]
        f = 2 * conv_macs(tuple(inp.shape), tuple(w.shape), tuple(out.shape), transposed)
        if isinstance(bias, T):
            f += out.numel()
        return f
    if name in ("convolution_backward", "convolution_backward_overrideable"):
        gout, inp, w = a[0], a[1], a[2]
        transposed = bool(a[7])
        mask = a[10]
        macs = conv_macs(tuple(inp.shape), tuple(w.shape), tuple(gout.shape), transposed)
        f = 2 * macs * (int(bool(mask[0])) + int(bool(mask[1])))
        if mask[2]:
            f += gout.numel()
        return f
    if name == "mm":
        m, k = a[0].shape
        n = a[1].shape[1]
        return 2 * m * k * n
    if name in ("addmm", "_addmm_activation"):
        m, k = a[1].shape
        n = a[2].shape[1]
        return 2 * m * k * n + m * n
    if name == "bmm":
        b, m, k = a[0].shape
        n = a[1].shape[2]
        return 2 * b * m * k * n
    if name == "baddbmm":
        b, m, k = a[1].shape
        n = a[2].shape[2]
        return 2 * b * m * k * n + b * m * n
    if name == "addbmm":
        b, m, k = a[1].shape
        n = a[2].shape[2]
        return 2 * b * m * k * n + m * n
    if name == "mv":
        m, n = a[0].shape
        return 2 * m * n
    if name == "addmv":
        m, n = a[1].shape
        return 2 * m * n + m
    if name in ("dot", "vdot"):
        return 2 * a[0].numel()
    if name in ("dot_interaction", "dot_interaction_backward"):
        # recsys.py: the F x F dot products of F = tables + 1 vectors of width D
        # per sample (the kernel runs the full batched GEMM); backward one such
        # product for the gradient of the features
        dense, emb = (a[0], a[1]) if name == "dot_interaction" else (a[1], a[2])
        f = emb.shape[1] + 1
        return 2 * dense.shape[0] * f * f * dense.shape[1]
    if name in ("scaled_dot_product_attention", "scaled_dot_product_attention_backward"):
        # fused.py: forward two S x S x d products per head (scores, then
        # probabilities x values); backward five (the scores recomputed, and
        # the grads of the probabilities, values, queries and keys), as
        # FlashAttention counts them; a causal kernel skips the masked half.
        q, k = (a[0], a[1]) if name == "scaled_dot_product_attention" else (a[1], a[2])
        causal = a[4] if name == "scaled_dot_product_attention" else a[7]
        products = 2 if name == "scaled_dot_product_attention" else 5
        f = 2 * products * _numel(q.shape[:-1]) * k.shape[-2] * q.shape[-1]
        return f // 2 if causal else f
    if name == "addr":
        return 2 * a[1].numel() * a[2].numel()
    if cls == "norm":
        x = a[1] if name.endswith("_backward") else a[0]
        per = 8 if "backward" in name else 5
        return per * x.numel()
    if cls == "softmax":
        x = a[0]
        per = 4 if "backward" in name else 5
        return per * x.numel()
    if cls == "pooling":
        if name.endswith("_backward"):
            # grad_input written once per element; avg pooling adds every window tap
            gin = outs[0] if outs else a[1]
            if name.startswith("avg_pool"):
                k = a[2]
                return max(gin.numel(), a[0].numel() * _numel(list(k)))
            return gin.numel()
        if name.startswith("_adaptive") or name.startswith("adaptive"):
            return a[0].numel()
        k = a[1]
        if isinstance(k, int):
            k = [k, k]
        return outs[0].numel() * _numel(list(k))
    if cls == "reduction":
        if name in ("nll_loss_forward", "nll_loss2d_forward"):
            return a[1].numel()
        x = a[0] if isinstance(a[0], T) else None
        if x is None:
            return 0
        per = 3 if name in ("var", "std", "var_mean", "std_mean") else 1
        if name in ("binary_cross_entropy", "binary_cross_entropy_with_logits", "mse_loss"):
            per = 3
        return per * x.numel()
    if name == "sparse_sgd_":
        return 2 * a[2].numel()
    if cls == "embedding":
        # gathers move data only; accumulating scatters add every incoming element once
        if name in ("embedding_dense_backward", "_embedding_bag_dense_backward",
                    "_embedding_bag_backward"):
            return a[0].numel()
        if name in ("index_put", "index_put_", "_index_put_impl_"):
            accumulate = len(a) > 3 and bool(a[3]) or bool(kwargs.get("accumulate", False))
            return a[2].numel() if accumulate else 0
        if name in ("index_add", "index_add_", "scatter_add", "scatter_add_"):
            src = a[3] if len(a) > 3 else kwargs.get("source", kwargs.get("src"))
            return src.numel() if isinstance(src, T) else 0
        return 0
    if cls == "copy":
        return 0
    # elementwise, optimizer and other
    if name in ZERO_FLOP_ELEMENTWISE:
        return 0
    if name in ("copy_", "fill_", "zero_", "clone", "_to_copy"):
        return 0
    per = ELEMENTWISE_FLOPS.get(name, 1)
    if name.startswith("_foreach_") or name == "_amp_foreach_non_finite_check_and_unscale_":
        lst = a[0]
        return per * sum(t.numel() for t in lst)
    n = 0
    for o in outs:
        n += o.numel()
    return per * n
