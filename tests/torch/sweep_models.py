"""One AMP training step (autocast FP16 + GradScaler, AdamW) of many models on
an emulated GPU, to find ops the torch backend cannot shape. Run it as

    gpemu torch --gpu a100 --clock virtual -- tests/torch/sweep_models.py [--json FILE] [names...]

It prints one line per model (ok, or the error) and exits 1 when any failed.
Not a ctest test: building 30+ models' parameters on the CPU takes minutes.
"""
import argparse
import json
import sys
import time
import warnings

import torch
import torchvision.models as tvm

warnings.simplefilter("ignore")

VISION = [
    "alexnet", "vgg11", "vgg16_bn", "resnet18", "resnet50", "resnet101", "wide_resnet50_2", "resnext50_32x4d",
    "densenet121", "squeezenet1_1", "mobilenet_v2", "mobilenet_v3_large", "shufflenet_v2_x1_0", "mnasnet1_0",
    "efficientnet_b0", "efficientnet_v2_s", "regnet_y_400mf", "regnet_x_800mf", "googlenet", "inception_v3",
    "convnext_tiny", "vit_b_16", "swin_t", "maxvit_t", "resnet34", "resnet152", "vgg19", "densenet169",
    "mobilenet_v3_small", "efficientnet_b3", "regnet_y_1_6gf", "resnext101_32x8d", "vit_b_32", "convnext_small",
]


class Encoder(torch.nn.Module):
    """A BERT-like transformer encoder classifier."""

    def __init__(self):
        super().__init__()
        self.emb = torch.nn.Embedding(30522, 256)
        layer = torch.nn.TransformerEncoderLayer(256, 4, 1024, batch_first=True)
        self.enc = torch.nn.TransformerEncoder(layer, 4)
        self.head = torch.nn.Linear(256, 2)

    def forward(self, x):
        return self.head(self.enc(self.emb(x)).mean(1))


class Decoder(torch.nn.Module):
    """A GPT-like causal transformer language model."""

    def __init__(self):
        super().__init__()
        self.emb = torch.nn.Embedding(50257, 256)
        self.pos = torch.nn.Parameter(torch.zeros(1, 128, 256))
        layer = torch.nn.TransformerEncoderLayer(256, 4, 1024, batch_first=True, norm_first=True,
                                                 activation="gelu")
        self.blocks = torch.nn.TransformerEncoder(layer, 4)
        self.mask = torch.triu(torch.full((128, 128), float("-inf")), diagonal=1)
        self.head = torch.nn.Linear(256, 50257)

    def forward(self, x):
        h = self.blocks(self.emb(x) + self.pos, mask=self.mask.to(x.device))
        return self.head(h[:, -1])


class Recommender(torch.nn.Module):
    """A DLRM-like recommender: bags of sparse features, a dense MLP, their interaction."""

    def __init__(self):
        super().__init__()
        self.bags = torch.nn.ModuleList(torch.nn.EmbeddingBag(100000, 64, mode="sum") for _ in range(8))
        self.bottom = torch.nn.Sequential(torch.nn.Linear(13, 64), torch.nn.ReLU())
        self.top = torch.nn.Sequential(torch.nn.Linear(64 * 9, 256), torch.nn.ReLU(), torch.nn.Linear(256, 2))

    def forward(self, x):
        dense, sparse = x[:, :13].float(), x[:, 13:].long()
        feats = [self.bottom(dense)] + [bag(sparse[:, i:i + 1]) for i, bag in enumerate(self.bags)]
        return self.top(torch.cat(feats, 1))


class Recurrent(torch.nn.Module):
    def __init__(self, kind):
        super().__init__()
        self.emb = torch.nn.Embedding(10000, 128)
        self.rnn = getattr(torch.nn, kind)(128, 256, num_layers=2, batch_first=True)
        self.head = torch.nn.Linear(256, 10)

    def forward(self, x):
        out, _ = self.rnn(self.emb(x))
        return self.head(out[:, -1])


def builders():
    out = {}
    for name in VISION:
        size = 299 if name == "inception_v3" else 224
        kwargs = {"aux_logits": False, "init_weights": False} if name in ("inception_v3", "googlenet") else {}
        out[name] = (lambda n=name, k=kwargs: getattr(tvm, n)(**k), lambda s=size: torch.randn(2, 3, s, s),
                     1000)
    out["transformer_encoder"] = (Encoder, lambda: torch.randint(0, 30522, (2, 128)), 2)
    out["gpt_decoder"] = (Decoder, lambda: torch.randint(0, 50257, (2, 128)), 50257)
    out["dlrm_like"] = (Recommender, lambda: torch.randint(0, 1000, (4, 21)), 2)
    out["lstm"] = (lambda: Recurrent("LSTM"), lambda: torch.randint(0, 10000, (2, 64)), 10)
    out["gru"] = (lambda: Recurrent("GRU"), lambda: torch.randint(0, 10000, (2, 64)), 10)
    return out


def step(build, batch, classes):
    model = build().cuda().train()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    scaler = torch.cuda.amp.GradScaler()
    x = batch().cuda(non_blocking=True)
    y = torch.randint(0, classes, (x.shape[0],)).cuda()
    with torch.autocast("cuda", dtype=torch.float16):
        loss = torch.nn.functional.cross_entropy(model(x), y)
    opt.zero_grad(set_to_none=True)
    scaler.scale(loss).backward()
    scaler.step(opt)
    scaler.update()
    torch.cuda.synchronize()


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--json")
    p.add_argument("names", nargs="*")
    args = p.parse_args()
    table = builders()
    names = args.names or list(table)
    results = {}
    for name in names:
        t0 = time.time()
        try:
            step(*table[name])
            results[name] = "ok"
        except Exception as e:  # report every failure, then go on
            results[name] = f"{type(e).__name__}: {str(e).splitlines()[0]}"
        print(f"{name:24s} {time.time() - t0:6.1f} s  {results[name]}", flush=True)
        torch.cuda.empty_cache()
    failed = [n for n, r in results.items() if r != "ok"]
    print(f"{len(names) - len(failed)} of {len(names)} models trained a step; failed: {', '.join(failed) or 'none'}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=2)
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
