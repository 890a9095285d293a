"""CUDA semantics that a CPU/meta run would otherwise miss.

`CudaSemantics` is a TorchFunctionMode (it runs *above* autograd, so whatever it
changes is differentiated like the real thing):

* dropout: on CUDA, out-of-place dropout with 0<p<1 runs the fused
  `native_dropout` kernel (1-byte bool mask saved for backward); on CPU/meta it
  would run bernoulli_/div_/mul with a full-size float mask. We call
  `torch.native_dropout` so the trace matches CUDA. In-place dropout
  (`inplace=True`) is left alone: CUDA also runs the unfused path for it.
* autocast (mixed precision): torch 1.13 cannot run CUDA autocast without a
  CUDA build, and its CPU autocast has different op lists, so we re-implement
  the CUDA autocast policy of torch 1.13 for the ops our models use: the
  "lower precision" list runs in FP16/BF16, the "fp32" list in FP32, the
  "promote" list in the widest input type; everything else runs in whatever
  dtype its inputs have. Casts of leaf tensors that require grad (the
  weights) are cached for the autocast region, as CUDA autocast does, and the
  cache is cleared when the region ends (`end_autocast`).
"""
import torch
import torch.nn.functional as F
from torch.overrides import TorchFunctionMode

T = torch.Tensor

_LOW = [
    torch.conv1d, torch.conv2d, torch.conv3d, torch.conv_transpose1d,
    torch.conv_transpose2d, torch.conv_transpose3d, torch.convolution, torch.conv_tbc,
    torch._C._nn.linear, torch.matmul, T.matmul, T.__matmul__, T.__rmatmul__,
    torch.mm, T.mm, torch.bmm, T.bmm, torch.baddbmm, T.baddbmm, torch.addmm, T.addmm,
    torch.addbmm, T.addbmm, torch.mv, T.mv, torch.addmv, T.addmv, torch.addr,
    torch.einsum, torch.prelu, F.prelu, torch.chain_matmul, torch.linalg.multi_dot,
]
_FP32 = [
    F.layer_norm, torch.layer_norm, F.group_norm, torch.group_norm,
    F.softmax, torch.softmax, T.softmax, F.log_softmax, torch.log_softmax,
    T.log_softmax, torch.exp, T.exp, torch.log, T.log, torch.log2, torch.log10,
    torch.log1p, torch.expm1, torch.pow, T.pow, T.__pow__, torch.rsqrt, T.rsqrt,
    torch.reciprocal, T.reciprocal, torch.acos, torch.asin, torch.cosh, torch.sinh,
    torch.tan, torch.erfinv, F.softplus, F.cross_entropy, F.nll_loss, F.mse_loss,
    F.l1_loss, F.smooth_l1_loss, F.huber_loss, F.kl_div,
    F.binary_cross_entropy_with_logits, F.margin_ranking_loss, F.soft_margin_loss,
    F.poisson_nll_loss, F.cosine_similarity, torch.cumsum, T.cumsum, torch.cumprod,
    torch.prod, T.prod, torch.logsumexp, T.logsumexp, torch.dist, torch.cdist,
    torch.renorm, torch.sum, T.sum, torch.norm, T.norm, torch.linalg.vector_norm,
]
_PROMOTE = [torch.cat, torch.stack, torch.addcmul, T.addcmul, torch.addcdiv, T.addcdiv,
            torch.index_put, T.index_put, torch.scatter_add, T.scatter_add, torch.cross,
            torch.atan2, torch.tensordot, torch.bilinear, torch.dot, T.dot]

POLICY = {}
for _f in _LOW:
    POLICY[_f] = "low"
for _f in _FP32:
    POLICY[_f] = "fp32"
for _f in _PROMOTE:
    POLICY[_f] = "promote"

_LOWP = (torch.float16, torch.bfloat16)


class CudaSemantics(TorchFunctionMode):
    def __init__(self, amp_dtype=None):
        super().__init__()
        self.amp_dtype = amp_dtype
        self.autocast = amp_dtype is not None
        self.cache = {}

    def end_autocast(self):
        self.autocast = False
        self.cache.clear()

    # -- casting helpers --------------------------------------------------------
    def _cast(self, x, dtype):
        if isinstance(x, T):
            if x.is_floating_point() and x.dtype != dtype and x.dtype != torch.float64:
                if x.is_leaf and x.requires_grad:
                    c = self.cache.get(id(x))
                    if c is None or c[0] is not x or c[1].dtype != dtype:
                        c = (x, x.to(dtype))
                        self.cache[id(x)] = c
                    return c[1]
                return x.to(dtype)
            return x
        if isinstance(x, (list, tuple)):
            return type(x)(self._cast(y, dtype) for y in x)
        return x

    @staticmethod
    def _widest(args, kwargs):
        best = None
        for x in list(args) + list(kwargs.values()):
            xs = x if isinstance(x, (list, tuple)) else [x]
            for y in xs:
                if isinstance(y, T) and y.is_floating_point():
                    if best is None or (y.dtype == torch.float32 and best in _LOWP):
                        best = y.dtype
        return best

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func is F.dropout:
            return self._dropout(args, kwargs)
        if self.autocast:
            pol = POLICY.get(func)
            if pol == "low":
                d = self.amp_dtype
                args = tuple(self._cast(a, d) for a in args)
                kwargs = {k: self._cast(v, d) for k, v in kwargs.items()}
            elif pol == "fp32":
                args = tuple(self._cast_lowp_up(a) for a in args)
                kwargs = {k: self._cast_lowp_up(v) for k, v in kwargs.items()}
            elif pol == "promote":
                w = self._widest(args, kwargs)
                if w is not None:
                    args = tuple(self._cast(a, w) for a in args)
                    kwargs = {k: self._cast(v, w) for k, v in kwargs.items()}
        if func is F.multi_head_attention_forward:
            return self._reenter(func, args, kwargs)
        return func(*args, **kwargs)

    def _cast_lowp_up(self, x):
        if isinstance(x, T):
            return x.float() if x.dtype in _LOWP else x
        if isinstance(x, (list, tuple)):
            return type(x)(self._cast_lowp_up(y) for y in x)
        return x

    def _dropout(self, args, kwargs):
        names = ("input", "p", "training", "inplace")
        vals = dict(zip(names, args))
        vals.update(kwargs)
        x = vals["input"]
        p = vals.get("p", 0.5)
        training = vals.get("training", True)
        inplace = vals.get("inplace", False)
        if training and 0.0 < p < 1.0 and not inplace:
            return torch.native_dropout(x, p, True)[0]
        return F.dropout(*args, **kwargs)

    def _reenter(self, func, args, kwargs):
        """Run a Python-level composite (nn.MultiheadAttention's functional form)
        with this mode active for the calls inside it."""
        import torch.nn.functional as Fm
        real = Fm.has_torch_function
        state = [True]

        def once(*a):
            if state[0]:
                state[0] = False
                return False
            return real(*a)
        Fm.has_torch_function = once
        try:
            with self:
                return func(*args, **kwargs)
        finally:
            Fm.has_torch_function = real
