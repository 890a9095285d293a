"""3D U-Net of the MLPerf Training image-segmentation benchmark (KiTS19), written
with plain torch.nn: filters 32-64-128-256-320 plus a 320 bottleneck, conv
blocks Conv3d(3x3x3, no bias) + InstanceNorm3d(affine) + ReLU, downsampling
by strided convolution, upsampling by ConvTranspose3d(2, stride 2) and
concatenation with the skip connection, 1x1x1 output conv to 3 classes, and
a Dice + cross-entropy loss. Input 1x128x128x128 per sample."""
import torch
import torch.nn as nn
import torch.nn.functional as F

from .spec import ModelSpec

META = "meta"
FILTERS = [32, 64, 128, 256, 320]
PATCH = 128
CLASSES = 3


class ConvBlock(nn.Sequential):
    def __init__(self, cin, cout, stride=1):
        super().__init__(
            nn.Conv3d(cin, cout, 3, stride=stride, padding=1, bias=False, device=META),
            nn.InstanceNorm3d(cout, affine=True, device=META),
            nn.ReLU(inplace=True))


class Down(nn.Sequential):
    def __init__(self, cin, cout):
        super().__init__(ConvBlock(cin, cout, stride=2), ConvBlock(cout, cout))


class Up(nn.Module):
    def __init__(self, cin, cout):
        super().__init__()
        self.up = nn.ConvTranspose3d(cin, cout, 2, stride=2, bias=True, device=META)
        self.conv = nn.Sequential(ConvBlock(2 * cout, cout), ConvBlock(cout, cout))

    def forward(self, x, skip):
        return self.conv(torch.cat((self.up(x), skip), dim=1))


class UNet3D(nn.Module):
    def __init__(self, cin=1, classes=CLASSES, filters=FILTERS):
        super().__init__()
        self.inp = nn.Sequential(ConvBlock(cin, filters[0]), ConvBlock(filters[0], filters[0]))
        self.down = nn.ModuleList(Down(a, b) for a, b in zip(filters[:-1], filters[1:]))
        self.bottleneck = Down(filters[-1], filters[-1])
        ups = [Up(filters[-1], filters[-1])]
        ups += [Up(a, b) for a, b in zip(reversed(filters[1:]), reversed(filters[:-1]))]
        self.up = nn.ModuleList(ups)
        self.out = nn.Conv3d(filters[0], classes, 1, bias=True, device=META)

    def forward(self, x):
        x = self.inp(x)
        skips = [x]
        for d in self.down:
            x = d(x)
            skips.append(x)
        x = self.bottleneck(x)
        for u, s in zip(self.up, reversed(skips)):
            x = u(x, s)
        return self.out(x)


def _inputs(B, S=None):
    x = torch.empty(B, 1, PATCH, PATCH, PATCH, device=META)
    y = torch.empty(B, PATCH, PATCH, PATCH, dtype=torch.long, device=META)
    return (x,), y


def _dice_ce(logits, y):
    ce = F.cross_entropy(logits, y)
    probs = F.softmax(logits, dim=1)
    onehot = torch.zeros_like(probs).scatter_(1, y.unsqueeze(1), 1.0)
    probs, onehot = probs[:, 1:], onehot[:, 1:]       # no background channel
    dims = (2, 3, 4)
    inter = torch.sum(probs * onehot, dim=dims)
    card = torch.sum(probs, dim=dims) + torch.sum(onehot, dim=dims)
    dice = 1.0 - torch.mean((2.0 * inter + 1e-6) / (card + 1e-6))
    return (ce + dice) / 2


def unet3d_specs():
    return [ModelSpec(
        name="unet3d", family="unet", build=lambda: UNet3D(), inputs=_inputs, loss=_dice_ce,
        input_desc="CT volume 1x128x128x128 fp32; int64 voxel labels (3 classes)",
        default_batch=2,
        config={"filters": FILTERS + [320], "patch": [1, PATCH, PATCH, PATCH],
                "classes": CLASSES, "norm": "instancenorm (affine)", "activation": "relu"},
        notes="MLPerf Training 3D U-Net (KiTS19) layout; loss = (cross-entropy + soft Dice "
              "without background) / 2")]
