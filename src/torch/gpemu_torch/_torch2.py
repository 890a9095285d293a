"""PyTorch 2's API on Debian's torch 1.13 (`gpemu torch --torch 2`, the default).

No PyTorch 2 CPU build installs from Debian 12's archive (bookworm and
bookworm-backports carry python3-torch 1.13 only), so the program PyTorch 2
runs is made here, on top of 1.13 (docs/torch.md, "PyTorch 2's API"):

- F.scaled_dot_product_attention: on an emulated GPU one fused attention
  kernel forward (gpemu::scaled_dot_product_attention: the output and the
  rows' log-sum-exp, no L x S tensor) and one backward, costed as `gpemu
  predict --attention fused` costs the zoo's `_sdpa` graphs (the backend's
  op rules, op_rules.cpp); on CPU tensors the reference math, real values;
- torch.amp.GradScaler("cuda") (torch.amp.autocast is 1.13's own);
- optimizers: foreach by default when every parameter is on the GPU (one
  multi-tensor call per step of the update), fused=True for Adam, AdamW and
  SGD as one kernel per (device, dtype) group; zero_grad() sets grads to None;
- torch.compile / nn.Module.compile: an exact no-op that says so once;
- nn.MultiheadAttention (need_weights=False, as nn.TransformerEncoderLayer,
  nn.TransformerDecoderLayer and torchvision's ViT call it) through
  F.scaled_dot_product_attention, and the is_causal arguments of the
  Transformer modules.
"""
import contextlib
import contextvars
import enum
import functools
import inspect
import math
import sys
import types

_ops = None
# Which SDPA kernels the script allows (torch.backends.cuda.enable_*_sdp,
# sdp_kernel, torch.nn.attention.sdpa_kernel): with neither fused kernel
# allowed, attention runs as the math composite (L x S scores), as on a GPU.
_sdp = {"flash": True, "mem_efficient": True, "math": True, "cudnn": True}
# The is_causal hint a Transformer module passes to its self-attention.
_causal = contextvars.ContextVar("gpemu_causal", default=False)


def patch(torch):
    global _ops
    _ops = torch.ops.gpemu
    _patch_sdpa(torch)
    _patch_amp(torch)
    _patch_optimizers(torch)
    _patch_compile(torch)
    _patch_attention_modules(torch)


# ---- F.scaled_dot_product_attention -------------------------------------------------

def _check_sdpa(torch, q, k, v, attn_mask, is_causal, enable_gqa):
    def fail(why):
        raise RuntimeError(f"scaled_dot_product_attention: {why}")
    if q.dim() < 2 or k.dim() != q.dim() or v.dim() != q.dim():
        fail(f"query, key and value must have the same number (>= 2) of dimensions, got {q.dim()}, {k.dim()} "
             f"and {v.dim()}")
    if q.size(-1) != k.size(-1):
        fail(f"query's last dimension ({q.size(-1)}) must equal key's ({k.size(-1)})")
    if k.size(-2) != v.size(-2):
        fail(f"key's sequence length ({k.size(-2)}) must equal value's ({v.size(-2)})")
    lead = (q.shape[:-3], q.shape[-3:-2]) if q.dim() >= 3 else (q.shape[:-2], ())
    for name, t in (("key", k), ("value", v)):
        t_lead = (t.shape[:-3], t.shape[-3:-2]) if t.dim() >= 3 else (t.shape[:-2], ())
        heads_ok = t_lead[1] == lead[1] or (enable_gqa and lead[1] and t_lead[1] and lead[1][0] % t_lead[1][0] == 0)
        if t_lead[0] != lead[0] or not heads_ok:
            fail(f"{name}'s batch dimensions {tuple(t.shape[:-2])} do not match query's {tuple(q.shape[:-2])}"
                 + ("" if enable_gqa else " (grouped-query attention needs enable_gqa=True)"))
    if is_causal and attn_mask is not None:
        fail("Explicit attn_mask should not be set when is_causal=True")
    if attn_mask is not None and attn_mask.dtype != torch.bool and not attn_mask.is_floating_point():
        fail(f"attn_mask must be a bool or floating-point tensor, got {attn_mask.dtype}")


def _repeat_kv(t, q):
    """Grouped-query attention: k or v with each head repeated for the query
    heads that share it."""
    if t.dim() < 3 or t.size(-3) == q.size(-3):
        return t
    return t.repeat_interleave(q.size(-3) // t.size(-3), dim=-3)


def _math_sdpa(torch, q, k, v, attn_mask, dropout_p, is_causal, scale):
    """The reference: softmax(q k^T * scale + mask) v, dropout on the
    probabilities (the L x S scores are real tensors)."""
    k, v = _repeat_kv(k, q), _repeat_kv(v, q)
    scores = torch.matmul(q, k.transpose(-2, -1)) * scale
    L, S = q.size(-2), k.size(-2)
    if is_causal:
        keep = torch.ones(L, S, dtype=torch.bool, device=q.device).tril()
        scores = scores.masked_fill(~keep, float("-inf"))
    if attn_mask is not None:
        if attn_mask.dtype == torch.bool:
            scores = scores.masked_fill(~attn_mask, float("-inf"))
        else:
            scores = scores + attn_mask
    probs = torch.softmax(scores, dim=-1)
    if dropout_p > 0:
        probs = torch.dropout(probs, dropout_p, True)
    return torch.matmul(probs, v)


def _fused_attention_function(torch):
    class FusedAttention(torch.autograd.Function):
        """One fused kernel each way on the emulated GPU (FlashAttention, or
        the memory-efficient kernel for FP32 and masks): forward keeps the
        output and the rows' log-sum-exp for backward, which recomputes the
        scores; the dropout mask is drawn in the kernel, not stored."""

        @staticmethod
        def forward(ctx, q, k, v, attn_mask, dropout_p, is_causal, scale):
            out, lse = _ops.scaled_dot_product_attention(q, k, v, dropout_p, is_causal, scale, attn_mask)
            ctx.save_for_backward(q, k, v, out, lse, attn_mask)
            ctx.args = (dropout_p, is_causal, scale)
            return out

        @staticmethod
        def backward(ctx, grad):
            q, k, v, out, lse, attn_mask = ctx.saved_tensors
            gq, gk, gv = _ops.scaled_dot_product_attention_backward(grad.contiguous(), q, k, v, out, lse, *ctx.args,
                                                                      attn_mask)
            return gq, gk, gv, None, None, None, None

    return FusedAttention


def _patch_sdpa(torch):
    fused = _fused_attention_function(torch)

    def scaled_dot_product_attention(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None,
                                     enable_gqa=False):
        _check_sdpa(torch, query, key, value, attn_mask, is_causal, enable_gqa)
        if scale is None:
            scale = 1.0 / math.sqrt(query.size(-1))
        if not query.is_cuda or not (_sdp["flash"] or _sdp["mem_efficient"] or _sdp["cudnn"]):
            return _math_sdpa(torch, query, key, value, attn_mask, float(dropout_p), bool(is_causal), float(scale))
        if torch.is_autocast_enabled():
            # Autocast's lower-precision list has SDPA: every floating input is cast.
            dtype = torch.get_autocast_gpu_dtype()
            query, key, value = (t.to(dtype) if t.is_floating_point() else t for t in (query, key, value))
            if attn_mask is not None and attn_mask.is_floating_point():
                attn_mask = attn_mask.to(dtype)
        return fused.apply(query, key, value, attn_mask, float(dropout_p), bool(is_causal), float(scale))

    torch.nn.functional.scaled_dot_product_attention = scaled_dot_product_attention

    # Which kernels may run: torch.backends.cuda's switches (2.0) and
    # torch.nn.attention.sdpa_kernel (2.3).
    cuda = torch.backends.cuda
    for name in ("flash", "mem_efficient", "math", "cudnn"):
        setattr(cuda, f"{name}_sdp_enabled", lambda name=name: _sdp[name])
        setattr(cuda, f"enable_{name}_sdp", lambda on, name=name: _sdp.__setitem__(name, bool(on)))

    @contextlib.contextmanager
    def sdp_kernel(enable_flash=True, enable_math=True, enable_mem_efficient=True, enable_cudnn=True):
        saved = dict(_sdp)
        _sdp.update(flash=enable_flash, math=enable_math, mem_efficient=enable_mem_efficient, cudnn=enable_cudnn)
        try:
            yield
        finally:
            _sdp.update(saved)

    cuda.sdp_kernel = sdp_kernel

    class SDPBackend(enum.IntEnum):
        ERROR = -1
        MATH = 0
        FLASH_ATTENTION = 1
        EFFICIENT_ATTENTION = 2
        CUDNN_ATTENTION = 3

    names = {SDPBackend.MATH: "math", SDPBackend.FLASH_ATTENTION: "flash",
             SDPBackend.EFFICIENT_ATTENTION: "mem_efficient", SDPBackend.CUDNN_ATTENTION: "cudnn"}

    @contextlib.contextmanager
    def sdpa_kernel(backends, set_priority=False):
        backends = [backends] if isinstance(backends, SDPBackend) else list(backends)
        saved = dict(_sdp)
        _sdp.update({n: b in backends for b, n in names.items()})
        try:
            yield
        finally:
            _sdp.update(saved)

    attention = types.ModuleType("torch.nn.attention")
    attention.SDPBackend = SDPBackend
    attention.sdpa_kernel = sdpa_kernel
    cuda.SDPBackend = SDPBackend
    torch.nn.attention = attention
    sys.modules["torch.nn.attention"] = attention


# ---- torch.amp ----------------------------------------------------------------------

def _patch_amp(torch):
    base = torch.cuda.amp.GradScaler

    class GradScaler(base):
        """torch.amp.GradScaler(device="cuda", ...) (PyTorch 2.3): 1.13's CUDA scaler."""

        def __init__(self, device="cuda", init_scale=2.0**16, growth_factor=2.0, backoff_factor=0.5,
                     growth_interval=2000, enabled=True):
            if device != "cuda":
                raise RuntimeError(f"torch.amp.GradScaler('{device}'): gpemu torch emulates the 'cuda' scaler only")
            super().__init__(init_scale=init_scale, growth_factor=growth_factor, backoff_factor=backoff_factor,
                             growth_interval=growth_interval, enabled=enabled)

    torch.amp.GradScaler = GradScaler
    if not hasattr(torch, "get_autocast_dtype"):
        torch.get_autocast_dtype = lambda device_type: (torch.get_autocast_gpu_dtype() if device_type == "cuda"
                                                        else torch.get_autocast_cpu_dtype())


# ---- optimizers ---------------------------------------------------------------------

def _all_cuda(params):
    return all(p.is_cuda for p in params)


def _default_foreach(step):
    """PyTorch 2's default: foreach=None means foreach when every parameter
    of the group is on the GPU (torch.optim's _default_to_fused_or_foreach)."""

    @functools.wraps(step)
    def wrapper(self, *args, **kwargs):
        chosen = [g for g in self.param_groups
                  if g.get("foreach") is None and not g.get("differentiable", False) and not g.get("fused")
                  and _all_cuda(g["params"])]
        for g in chosen:
            g["foreach"] = True
        try:
            return step(self, *args, **kwargs)
        finally:
            for g in chosen:
                g["foreach"] = None

    return wrapper


def _by_device_and_dtype(pairs):
    groups = {}
    for key, lists in pairs:
        into = groups.setdefault(key, [[] for _ in lists])
        for i, t in enumerate(lists):
            into[i].append(t)
    return groups


def _scaling(grad_scaler, optimizer):
    """GradScaler's handing over to a fused step (PyTorch 2): the scale and
    the found-inf flags, no unscale pass and no sync."""
    if grad_scaler is None:
        return None, None
    found = grad_scaler._check_inf_per_device(optimizer)
    return grad_scaler._get_scale_async(), sum(found.values())


def _closure_loss(torch, closure):
    """An optimizer step's closure, run with grad enabled (None without one)."""
    if closure is None:
        return None
    with torch.enable_grad():
        return closure()


def _to(t, device):
    return None if t is None else t.to(device, non_blocking=True)


def _with_grads(group):
    """The parameters of an optimizer's param group that have a gradient this step."""
    return [p for p in group["params"] if p.grad is not None]


def _fused_adam_step(torch, kernel):
    def step(self, closure=None, grad_scaler=None):
        loss = _closure_loss(torch, closure)
        grad_scale, found_inf = _scaling(grad_scaler, self)
        for g in self.param_groups:
            entries = []
            for p in _with_grads(g):
                if p.grad.is_sparse:
                    raise RuntimeError(f"{type(self).__name__} does not support sparse gradients")
                st = self.state[p]
                if not st:
                    st["step"] = torch.zeros((), dtype=torch.float32, device=p.device)
                    st["exp_avg"] = torch.zeros_like(p, memory_format=torch.preserve_format)
                    st["exp_avg_sq"] = torch.zeros_like(p, memory_format=torch.preserve_format)
                    if g["amsgrad"]:
                        st["max_exp_avg_sq"] = torch.zeros_like(p, memory_format=torch.preserve_format)
                entries.append(((p.device, p.dtype),
                                (p, p.grad, st["exp_avg"], st["exp_avg_sq"], st.get("max_exp_avg_sq"), st["step"])))
            beta1, beta2 = g["betas"]
            for (device, _), (ps, gs, ms, vs, mvs, steps) in _by_device_and_dtype(entries).items():
                scale, inf = _to(grad_scale, device), _to(found_inf, device)
                torch._foreach_add_(steps, 1)
                kernel(ps, gs, ms, vs, mvs if g["amsgrad"] else [], steps, lr=float(g["lr"]), beta1=float(beta1),
                       beta2=float(beta2), weight_decay=float(g["weight_decay"]), eps=float(g["eps"]),
                       amsgrad=bool(g["amsgrad"]), maximize=bool(g.get("maximize", False)), grad_scale=scale,
                       found_inf=inf)
                if inf is not None:
                    torch._foreach_sub_(steps, [inf] * len(steps))
        return loss

    return step


def _fused_sgd_step(torch):
    def step(self, closure=None, grad_scaler=None):
        loss = _closure_loss(torch, closure)
        grad_scale, found_inf = _scaling(grad_scaler, self)
        for g in self.param_groups:
            entries = [((p.device, p.dtype), (p, p.grad, self.state[p].get("momentum_buffer"))) for p in _with_grads(g)]
            momentum = float(g["momentum"])
            for (device, _), (ps, gs, bufs) in _by_device_and_dtype(entries).items():
                first = momentum != 0 and all(b is None for b in bufs)
                if first:
                    bufs = [torch.empty_like(grad) for grad in gs]
                    for p, b in zip(ps, bufs):
                        self.state[p]["momentum_buffer"] = b
                scale, inf = _to(grad_scale, device), _to(found_inf, device)
                _ops._fused_sgd_(ps, gs, bufs if momentum != 0 else [], weight_decay=float(g["weight_decay"]),
                                 momentum=momentum, lr=float(g["lr"]), dampening=float(g["dampening"]),
                                 nesterov=bool(g["nesterov"]), maximize=bool(g.get("maximize", False)),
                                 is_first_step=first, grad_scale=scale, found_inf=inf)
        return loss

    return step


def _with_fused(cls, fused_step):
    """fused=True (PyTorch 2's keyword): one kernel per (device, dtype) group
    when every parameter is on the GPU; on CPU tensors the unfused update
    (PyTorch >= 2.4's fused CPU kernel computes the same values)."""
    init, step = cls.__init__, cls.step
    native = "fused" in inspect.signature(init).parameters  # 1.13's Adam: its own fused path, CUDA only

    @functools.wraps(init)
    def __init__(self, params, *args, fused=None, **kwargs):
        if fused and kwargs.get("foreach"):
            raise RuntimeError("`fused` and `foreach` cannot be `True` together.")
        if native:
            kwargs["fused"] = False
        init(self, params, *args, **kwargs)
        self.defaults["fused"] = fused
        for g in self.param_groups:
            g["fused"] = fused
        if fused:
            for g in self.param_groups:
                for p in g["params"]:
                    if not (p.is_floating_point() and p.device.type in ("cuda", "cpu")):
                        raise RuntimeError("`fused=True` requires all the params to be floating point Tensors of "
                                           f"supported devices: ['cuda', 'cpu'], got {p.dtype} on {p.device}")
            self._step_supports_amp_scaling = all(_all_cuda(g["params"]) for g in self.param_groups)

    @functools.wraps(step)
    def wrapper(self, closure=None, grad_scaler=None):
        groups = self.param_groups
        if any(g.get("fused") for g in groups) and all(_all_cuda(g["params"]) for g in groups):
            return fused_step(self, closure, grad_scaler)
        for g in groups:  # CPU tensors: the unfused update
            g["fused"] = False
        try:
            return step(self, closure)
        finally:
            for g in groups:
                g["fused"] = self.defaults.get("fused")

    # inspect.signature(AdamW) names fused (nanoGPT checks it to pick the fused kernel).
    signature = inspect.signature(init)
    if not native:
        signature = signature.replace(parameters=[
            *[p for p in signature.parameters.values() if p.kind != inspect.Parameter.VAR_KEYWORD],
            inspect.Parameter("fused", inspect.Parameter.KEYWORD_ONLY, default=None)])
    __init__.__signature__ = signature
    cls.__init__ = __init__
    cls.step = wrapper


def _patch_optimizers(torch):
    optim = torch.optim
    _with_fused(optim.AdamW, _fused_adam_step(torch, lambda *a, **k: _ops._fused_adamw_(*a, **k)))
    _with_fused(optim.Adam, _fused_adam_step(torch, lambda *a, **k: _ops._fused_adam_(*a, **k)))
    _with_fused(optim.SGD, _fused_sgd_step(torch))
    for name in dir(optim):
        cls = getattr(optim, name)
        if (isinstance(cls, type) and issubclass(cls, optim.Optimizer) and cls is not optim.Optimizer
                and "step" in cls.__dict__ and "foreach" in inspect.signature(cls.__init__).parameters):
            cls.step = _default_foreach(cls.step)

    # zero_grad() sets the grads to None by default (2.0).
    zero_grad = optim.Optimizer.zero_grad

    @functools.wraps(zero_grad)
    def optimizer_zero_grad(self, set_to_none=True):
        return zero_grad(self, set_to_none)

    optim.Optimizer.zero_grad = optimizer_zero_grad
    module_zero_grad = torch.nn.Module.zero_grad

    @functools.wraps(module_zero_grad)
    def zero_grad_module(self, set_to_none=True):
        return module_zero_grad(self, set_to_none)

    torch.nn.Module.zero_grad = zero_grad_module
    _patch_clip_grad_norm(torch)


def _patch_clip_grad_norm(torch):
    """clip_grad_norm_ as PyTorch 2 runs it on GPU grads: one _foreach_norm
    and one _foreach_mul_ per (device, dtype) group instead of two kernels
    per parameter; CPU grads (and the inf norm) take 1.13's loop."""
    clip = torch.nn.utils.clip_grad_norm_

    @functools.wraps(clip)
    def clip_grad_norm_(parameters, max_norm, norm_type=2.0, error_if_nonfinite=False, foreach=None):
        params = [parameters] if isinstance(parameters, torch.Tensor) else list(parameters)
        params = [p for p in params if p.grad is not None]
        norm_type = float(norm_type)
        if (not params or foreach is False or norm_type == math.inf
                or not all(p.grad.is_cuda for p in params)):
            return clip(params, max_norm, norm_type, error_if_nonfinite)
        groups = _by_device_and_dtype(((p.grad.device, p.grad.dtype), (p.grad,)) for p in params)
        first = params[0].grad.device
        norms = []
        for (grads,) in groups.values():
            norms.extend(torch._foreach_norm(grads, norm_type))
        total = torch.linalg.vector_norm(torch.stack([n.to(first) for n in norms]), norm_type)
        if error_if_nonfinite and torch.logical_or(total.isnan(), total.isinf()):
            raise RuntimeError(f"The total norm of order {norm_type} for gradients from `parameters` is non-finite, "
                               "so it cannot be clipped. To disable this error and scale the gradients by the "
                               "non-finite norm anyway, set `error_if_nonfinite=False`")
        coef = torch.clamp(max_norm / (total + 1e-6), max=1.0)
        for (device, _), (grads,) in groups.items():
            torch._foreach_mul_(grads, [coef.to(device)] * len(grads))
        return total

    torch.nn.utils.clip_grad_norm_ = clip_grad_norm_
    torch.nn.utils.clip_grad.clip_grad_norm_ = clip_grad_norm_


# ---- torch.compile --------------------------------------------------------------------

_compile_told = False


def _say_compile_is_eager():
    global _compile_told
    if not _compile_told:
        _compile_told = True
        sys.stderr.write("gpemu torch: torch.compile is accepted and runs the model eagerly: the emulated program is "
                         "PyTorch 2's eager one, without TorchInductor's fused kernels (docs/torch.md, "
                         "\"torch.compile\")\n")
        sys.stderr.flush()


def _patch_compile(torch):
    def compile(model=None, *, fullgraph=False, dynamic=None, backend="inductor", mode=None, options=None,
                disable=False):
        _say_compile_is_eager()
        if model is None:  # @torch.compile(mode=...)
            return lambda fn: fn
        return model

    def module_compile(self, *args, **kwargs):
        _say_compile_is_eager()

    torch.compile = compile
    torch.nn.Module.compile = module_compile


# ---- nn.MultiheadAttention and the Transformer modules -------------------------------------

def _float_mask(torch, mask, dtype):
    """A bool mask (True: masked out) as the additive float mask PyTorch 2
    makes of it (_canonical_mask)."""
    if mask is None or mask.is_floating_point():
        return mask
    return torch.zeros_like(mask, dtype=dtype).masked_fill_(mask, float("-inf"))


def _mha_through_sdpa(torch, F, query, key, value, num_heads, in_proj_weight, in_proj_bias, dropout_p,
                      out_proj_weight, out_proj_bias, training, key_padding_mask, attn_mask, use_separate_proj_weight,
                      q_proj_weight, k_proj_weight, v_proj_weight, is_causal):
    """F.multi_head_attention_forward's need_weights=False path as PyTorch 2
    runs it: the projections, F.scaled_dot_product_attention over (N, heads,
    L, head_dim), the output projection."""
    batched = query.dim() == 3
    if not batched:
        query, key, value = query.unsqueeze(1), key.unsqueeze(1), value.unsqueeze(1)
        if key_padding_mask is not None:
            key_padding_mask = key_padding_mask.unsqueeze(0)
    L, N, E = query.shape
    S = key.shape[0]
    if E % num_heads != 0:
        raise AssertionError(f"embed_dim {E} not divisible by num_heads {num_heads}")
    hd = E // num_heads
    if use_separate_proj_weight:
        bq, bk, bv = in_proj_bias.chunk(3) if in_proj_bias is not None else (None, None, None)
        q, k, v = F.linear(query, q_proj_weight, bq), F.linear(key, k_proj_weight, bk), F.linear(value, v_proj_weight, bv)
    elif query is key and key is value:
        # Self-attention: one packed projection, split by one copy (PyTorch 2's _in_projection_packed).
        qkv = F.linear(query, in_proj_weight, in_proj_bias)
        qkv = qkv.unflatten(-1, (3, E)).unsqueeze(0).transpose(0, -2).squeeze(-2).contiguous()
        q, k, v = qkv[0], qkv[1], qkv[2]
    else:
        wq, wk, wv = in_proj_weight.chunk(3)
        bq, bk, bv = in_proj_bias.chunk(3) if in_proj_bias is not None else (None, None, None)
        q, k, v = F.linear(query, wq, bq), F.linear(key, wk, bk), F.linear(value, wv, bv)
    if is_causal and key_padding_mask is None:
        mask = None  # SDPA's is_causal: no mask tensor
    else:
        if is_causal and attn_mask is None:
            raise RuntimeError("Need attn_mask if specifying the is_causal hint")
        is_causal = False
        mask = _float_mask(torch, attn_mask, q.dtype)
        if mask is not None and mask.dim() == 2:
            mask = mask.unsqueeze(0)
        if key_padding_mask is not None:
            kpm = _float_mask(torch, key_padding_mask, q.dtype).view(N, 1, 1, S).expand(-1, num_heads, -1, -1)
            kpm = kpm.reshape(N * num_heads, 1, S)
            mask = kpm if mask is None else mask + kpm
        if mask is not None:
            mask = mask.unsqueeze(0) if mask.size(0) == 1 else mask.view(N, num_heads, -1, S)
    q = q.view(L, N * num_heads, hd).transpose(0, 1).view(N, num_heads, L, hd)
    k = k.view(S, N * num_heads, hd).transpose(0, 1).view(N, num_heads, S, hd)
    v = v.view(S, N * num_heads, hd).transpose(0, 1).view(N, num_heads, S, hd)
    out = F.scaled_dot_product_attention(q, k, v, mask, dropout_p if training else 0.0, is_causal)
    out = out.permute(2, 0, 1, 3).contiguous().view(L * N, E)
    out = F.linear(out, out_proj_weight, out_proj_bias).view(L, N, E)
    return (out if batched else out.squeeze(1)), None


def _detect_causal(torch, mask, size=None):
    """PyTorch 2's TransformerEncoder check that `mask` is the causal mask:
    the comparison runs on the mask's device as on a GPU; the answer comes
    from the mask's values where the host knows them (a small mask the host
    filled keeps its values on an emulated GPU; docs/torch.md, "Values")."""
    if mask is None:
        return False
    sz = size if size is not None else mask.size(-2)
    causal = torch.triu(torch.full((sz, sz), float("-inf"), dtype=mask.dtype, device=mask.device), diagonal=1)
    if mask.size() != causal.size():
        return False
    answer = bool((mask == causal).all())
    if mask.is_cuda:
        values = _ops.values_get(mask)
        if values is None:
            return False
        host = torch.triu(torch.full((sz, sz), float("-inf"), dtype=mask.dtype), diagonal=1)
        answer = bool((values == host).all())
    return answer


def _patch_attention_modules(torch):
    F = torch.nn.functional
    nn = torch.nn
    original = F.multi_head_attention_forward

    def multi_head_attention_forward(query, key, value, embed_dim_to_check, num_heads, in_proj_weight, in_proj_bias,
                                     bias_k, bias_v, add_zero_attn, dropout_p, out_proj_weight, out_proj_bias,
                                     training=True, key_padding_mask=None, need_weights=True, attn_mask=None,
                                     use_separate_proj_weight=False, q_proj_weight=None, k_proj_weight=None,
                                     v_proj_weight=None, static_k=None, static_v=None, average_attn_weights=True,
                                     is_causal=False):
        is_causal = is_causal or _causal.get()
        special = (need_weights or bias_k is not None or bias_v is not None or add_zero_attn or static_k is not None
                   or static_v is not None or query.dim() not in (2, 3)
                   or F.has_torch_function((query, key, value, in_proj_weight, out_proj_weight)))
        if special:
            # The explicit-weights path (PyTorch 2 runs it too when need_weights):
            # 1.13's, with the mask the is_causal hint stands for.
            if is_causal and attn_mask is None:
                raise RuntimeError("Need attn_mask if specifying the is_causal hint")
            return original(query, key, value, embed_dim_to_check, num_heads, in_proj_weight, in_proj_bias, bias_k,
                            bias_v, add_zero_attn, dropout_p, out_proj_weight, out_proj_bias, training=training,
                            key_padding_mask=key_padding_mask, need_weights=need_weights, attn_mask=attn_mask,
                            use_separate_proj_weight=use_separate_proj_weight, q_proj_weight=q_proj_weight,
                            k_proj_weight=k_proj_weight, v_proj_weight=v_proj_weight, static_k=static_k,
                            static_v=static_v, average_attn_weights=average_attn_weights)
        if query.shape[-1] != embed_dim_to_check:
            raise AssertionError(f"was expecting embedding dimension of {embed_dim_to_check}, but got "
                                 f"{query.shape[-1]}")
        return _mha_through_sdpa(torch, F, query, key, value, num_heads, in_proj_weight, in_proj_bias, dropout_p,
                                 out_proj_weight, out_proj_bias, training, key_padding_mask, attn_mask,
                                 use_separate_proj_weight, q_proj_weight, k_proj_weight, v_proj_weight, is_causal)

    F.multi_head_attention_forward = multi_head_attention_forward

    def with_causal_hint(forward, names, used=None):
        """forward(...) also takes PyTorch 2's is_causal keywords `names`; the
        one named `used` is the hint handed to the self-attention."""

        @functools.wraps(forward)
        def wrapper(self, *args, **kwargs):
            hints = {n: kwargs.pop(n) for n in names if n in kwargs}
            hint = hints.get(used)
            if used == "is_causal" and isinstance(self, nn.TransformerEncoder) and hint is None:
                mask = kwargs.get("mask", args[1] if len(args) > 1 else None)
                hint = _detect_causal(torch, mask)
            if used is None:
                hint = False  # a decoder's attention takes no hint from outside
            elif hint is None:
                hint = _causal.get()  # a layer called by its encoder: the encoder's hint
            token = _causal.set(bool(hint))
            try:
                return forward(self, *args, **kwargs)
            finally:
                _causal.reset(token)

        return wrapper

    nn.MultiheadAttention.forward = with_causal_hint(nn.MultiheadAttention.forward, ("is_causal",), "is_causal")
    nn.TransformerEncoderLayer.forward = with_causal_hint(nn.TransformerEncoderLayer.forward, ("is_causal",),
                                                         "is_causal")
    nn.TransformerEncoder.forward = with_causal_hint(nn.TransformerEncoder.forward, ("is_causal",), "is_causal")
    # Decoder hints: the masks are still given, so dropping the hint computes
    # the same (the cross-attention is never causal).
    nn.TransformerDecoderLayer.forward = with_causal_hint(nn.TransformerDecoderLayer.forward,
                                                         ("tgt_is_causal", "memory_is_causal"))
    nn.TransformerDecoder.forward = with_causal_hint(nn.TransformerDecoder.forward,
                                                    ("tgt_is_causal", "memory_is_causal"))
    nn.Transformer.forward = with_causal_hint(nn.Transformer.forward,
                                              ("src_is_causal", "tgt_is_causal", "memory_is_causal"))
