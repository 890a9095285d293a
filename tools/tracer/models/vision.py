"""The 37 torchvision classifiers GPEmu profiled (torchvision 0.14, weights=None)."""
import contextlib

import torch
import torch.nn.functional as F

from .spec import ModelSpec

TORCHVISION_MODELS = [
    "alexnet", "densenet121", "densenet161", "densenet169", "densenet201", "googlenet",
    "inception_v3", "mnasnet0_5", "mnasnet0_75", "mnasnet1_0", "mnasnet1_3",
    "mobilenet_v2", "mobilenet_v3_large", "mobilenet_v3_small", "resnet18", "resnet34",
    "resnet50", "resnet101", "resnet152", "resnext50_32x4d", "resnext101_32x8d",
    "shufflenet_v2_x0_5", "shufflenet_v2_x1_0", "shufflenet_v2_x1_5",
    "shufflenet_v2_x2_0", "squeezenet1_0", "squeezenet1_1", "vgg11", "vgg11_bn", "vgg13",
    "vgg13_bn", "vgg16", "vgg16_bn", "vgg19", "vgg19_bn", "wide_resnet50_2",
    "wide_resnet101_2",
]


@contextlib.contextmanager
def _no_init():
    """Skip the (real, CPU) weight initialisation while constructing: the
    weights are moved to meta right after, their values never matter."""
    names = ["normal_", "uniform_", "kaiming_normal_", "kaiming_uniform_",
             "xavier_uniform_", "xavier_normal_", "constant_", "zeros_", "ones_",
             "trunc_normal_"]
    saved = {n: getattr(torch.nn.init, n) for n in names}
    try:
        for n in names:
            setattr(torch.nn.init, n, lambda t, *a, **k: t)
        yield
    finally:
        for n, f in saved.items():
            setattr(torch.nn.init, n, f)


def _build_tv(name):
    import torchvision
    kw = {"weights": None}
    if name in ("googlenet", "inception_v3"):
        kw.update(aux_logits=True, init_weights=True)
    with _no_init():
        m = getattr(torchvision.models, name)(**kw)
    return m.to("meta")


def _cls_inputs(hw):
    def inputs(B, S=None):
        x = torch.empty(B, 3, hw, hw, device="meta")
        y = torch.empty(B, dtype=torch.long, device="meta")
        return (x,), y
    return inputs


def _cls_loss(out, y):
    # torchvision training-mode outputs of the two models with auxiliary heads
    if hasattr(out, "aux_logits2"):   # GoogLeNetOutputs(logits, aux_logits2, aux_logits1)
        return (F.cross_entropy(out.logits, y)
                + 0.3 * (F.cross_entropy(out.aux_logits1, y)
                         + F.cross_entropy(out.aux_logits2, y)))
    if hasattr(out, "aux_logits"):    # InceptionOutputs(logits, aux_logits)
        return F.cross_entropy(out.logits, y) + 0.4 * F.cross_entropy(out.aux_logits, y)
    return F.cross_entropy(out, y)


def vision_specs():
    specs = []
    for name in TORCHVISION_MODELS:
        hw = 299 if name == "inception_v3" else 224
        notes = ""
        if name in ("googlenet", "inception_v3"):
            notes = "training mode with auxiliary classifiers; loss adds the aux losses"
        specs.append(ModelSpec(
            name=name, family="cnn", build=(lambda n=name: _build_tv(n)),
            inputs=_cls_inputs(hw), loss=_cls_loss,
            input_desc=f"image 3x{hw}x{hw} fp32, int64 class label (1000 classes)",
            default_batch=32, notes=notes,
            config={"source": f"torchvision.models.{name}(weights=None)",
                    "image": [3, hw, hw], "classes": 1000}))
    return specs


class _SdpaSelfAttention(torch.nn.Module):
    """nn.MultiheadAttention's training path as PyTorch 2 runs it for
    self-attention with need_weights=False (F.multi_head_attention_forward):
    the packed input projection, one copy into q/k/v, F.scaled_dot_product_attention
    (one fused kernel each way, no S x S tensor), one copy back and the output
    projection. torch 1.13 has no SDPA: tools/tracer/fused.py's operator stands in."""

    def __init__(self, mha):
        super().__init__()
        self.mha = mha

    def forward(self, query, key, value, need_weights=False):
        from .. import fused as fz
        m = self.mha
        x = query.transpose(1, 0) if m.batch_first else query          # (S, B, E)
        s, b, e = x.shape
        h = m.num_heads
        proj = F.linear(x, m.in_proj_weight, m.in_proj_bias)              # (S, B, 3E)
        proj = proj.unflatten(-1, (3, e)).unsqueeze(0).transpose(0, -2).squeeze(-2).contiguous()
        q, k, v = proj[0], proj[1], proj[2]

        def heads(t):
            return t.view(s, b * h, e // h).transpose(0, 1).view(b, h, s, e // h)
        out = fz.scaled_dot_product_attention(heads(q), heads(k), heads(v), m.dropout, training=self.training)
        out = out.permute(2, 0, 1, 3).contiguous().view(b * s, e)
        out = F.linear(out, m.out_proj.weight, m.out_proj.bias).view(s, b, e)
        return (out.transpose(1, 0) if m.batch_first else out), None


def _build_vit_sdpa():
    m = _build_tv("vit_b_16")
    for layer in m.encoder.layers:
        layer.self_attention = _SdpaSelfAttention(layer.self_attention)
    return m


def vit_sdpa_spec():
    """vit_b_16 as PyTorch 2 trains it: nn.MultiheadAttention calls
    F.scaled_dot_product_attention (fused attention, --attention fused)."""
    base = vit_spec()
    return ModelSpec(
        name="vit_b_16_sdpa", family=base.family, build=_build_vit_sdpa, inputs=base.inputs, loss=base.loss,
        input_desc=base.input_desc, default_batch=base.default_batch,
        config=dict(base.config, attention="fused scaled-dot-product kernel"),
        notes="torchvision's nn.MultiheadAttention as PyTorch 2 runs it in training (packed in-projection, "
              "F.scaled_dot_product_attention: one fused kernel forward and one backward, no S x S tensors); "
              "dropout 0")


def vit_spec():
    """ViT-B/16 from torchvision (a transformer: family "transformer"; the token
    count is fixed by the 224x224 image, so only B is a variable)."""
    return ModelSpec(
        name="vit_b_16", family="transformer", build=lambda: _build_tv("vit_b_16"),
        inputs=_cls_inputs(224), loss=_cls_loss,
        input_desc="image 3x224x224 fp32 (197 tokens of width 768), int64 class label",
        default_batch=32,
        config={"source": "torchvision.models.vit_b_16(weights=None)", "image": [3, 224, 224],
                "patch": 16, "layers": 12, "hidden": 768, "heads": 12, "mlp": 3072,
                "classes": 1000},
        notes="torchvision's nn.MultiheadAttention path (training: no fused attention); "
              "dropout 0")
