"""DLRM-style recommender (embedding tables + bottom/top MLPs + dot interaction),
written with plain torch.nn after the DLRM paper (Naumov et al., 2019), with
the MLPerf Training DLRM (Criteo Terabyte) configuration."""
import torch
import torch.nn as nn
import torch.nn.functional as F

from .spec import ModelSpec

META = "meta"

# MLPerf Training DLRM reference, Criteo Terabyte with --max-ind-range=40000000:
# rows of the 26 categorical-feature tables.
MLPERF_TABLES = [39884406, 39043, 17289, 7420, 20263, 3, 7120, 1543, 63, 38532951,
                 2953546, 403346, 10, 2208, 11938, 155, 4, 976, 14, 39979771, 25641295,
                 39664984, 585935, 12972, 108, 36]
MLPERF_DLRM = {
    "dense_features": 13, "embedding_dim": 128, "tables": MLPERF_TABLES,
    "bottom_mlp": [512, 256, 128], "top_mlp": [1024, 1024, 512, 256, 1],
    "interaction": "dot, no self-interaction",
}


def _mlp(sizes, last_act):
    layers = []
    for i, (a, b) in enumerate(zip(sizes[:-1], sizes[1:])):
        layers.append(nn.Linear(a, b, device=META))
        if i < len(sizes) - 2 or last_act:
            layers.append(nn.ReLU())
    return nn.Sequential(*layers)


class DLRM(nn.Module):
    def __init__(self, c):
        super().__init__()
        d = c["embedding_dim"]
        self.d = d
        self.bottom = _mlp([c["dense_features"]] + c["bottom_mlp"], last_act=True)
        self.tables = nn.ModuleList(nn.Embedding(n, d, device=META) for n in c["tables"])
        nf = len(c["tables"]) + 1
        npairs = nf * (nf - 1) // 2
        self.top = _mlp([d + npairs] + c["top_mlp"], last_act=False)
        # indices of the strictly lower triangle of the feature-interaction matrix
        self.register_buffer("li", torch.empty(npairs, dtype=torch.long, device=META))
        self.register_buffer("lj", torch.empty(npairs, dtype=torch.long, device=META))

    def forward(self, dense, sparse):
        x = self.bottom(dense)
        ly = [t(sparse[:, i]) for i, t in enumerate(self.tables)]
        b = x.shape[0]
        T = torch.cat([x] + ly, dim=1).view(b, -1, self.d)
        Z = torch.bmm(T, torch.transpose(T, 1, 2))
        zflat = Z[:, self.li, self.lj]
        r = torch.cat([x, zflat], dim=1)
        return self.top(r).squeeze(1)


def _inputs(B, S=None):
    dense = torch.empty(B, 13, device=META)
    sparse = torch.empty(B, len(MLPERF_TABLES), dtype=torch.long, device=META)
    click = torch.empty(B, device=META)
    return (dense, sparse), click


def _loss(logit, click):
    return F.binary_cross_entropy_with_logits(logit, click)


def dlrm_specs():
    return [ModelSpec(
        name="dlrm_mlperf", family="recommender", build=lambda: DLRM(MLPERF_DLRM),
        inputs=_inputs, loss=_loss,
        input_desc="13 dense features (fp32) + 26 categorical ids (int64, one per table); "
                   "click label",
        default_batch=2048, config=dict(MLPERF_DLRM),
        notes="MLPerf DLRM sizes (Criteo Terabyte, 40M max rows, ~24B parameters). One "
              "lookup per table (nn.Embedding; Criteo is one-hot). Embedding gradients are "
              "DENSE (sparse gradients cannot run on meta tensors): the reference trains "
              "with sparse SGD updates, so grads/optimizer state of the tables are "
              "overstated here. BCE-with-logits loss (sigmoid folded into the loss).")]
