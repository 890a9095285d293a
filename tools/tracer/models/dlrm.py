"""DLRM-style recommenders (embedding tables + bottom/top MLPs + dot interaction),
written with plain torch.nn after the DLRM paper (Naumov et al., 2019):

* dlrm_mlperf: the MLPerf Training DLRM (Criteo Terabyte) configuration, one
  nn.Embedding per table, dense gradients;
* dlrm_dle: DLRM as NVIDIA DeepLearningExamples trains it on one GPU (Criteo
  1TB with frequency threshold 15, its "small" ~15 GB model): one joint table
  gathered by one fused kernel, sparse embedding gradients and a sparse SGD
  update of the looked-up rows, the dot interaction as one kernel, plain SGD
  without momentum (tools/tracer/recsys.py)."""
import torch
import torch.nn as nn
import torch.nn.functional as F

from .spec import ModelSpec
from .. import recsys

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


# Criteo 1TB categorical cardinalities after DeepLearningExamples' preprocessing
# with frequency threshold 15 (its "small" model; 32,709,138 rows, 15.6 GiB of
# FP32 rows at dimension 128, the README's ~15 GB).
DLE_TABLES = [7912889, 33823, 17139, 7339, 20046, 4, 7105, 1382, 63, 5554114, 582469, 245828, 11,
              2209, 10667, 104, 4, 968, 15, 8165896, 2675940, 7156453, 302516, 12022, 97, 35]
DLE_DLRM = {
    "dense_features": 13, "embedding_dim": 128, "tables": DLE_TABLES,
    "bottom_mlp": [512, 256, 128], "top_mlp": [1024, 1024, 512, 256, 1],
    "interaction": "dot (one kernel), no self-interaction, padded to a multiple of 8",
    "embeddings": "one joint table, fused gather, sparse gradients, sparse SGD",
}


class DLEDLRM(nn.Module):
    def __init__(self, c):
        super().__init__()
        d = c["embedding_dim"]
        self.bottom = _mlp([c["dense_features"]] + c["bottom_mlp"], last_act=True)
        self.weight = nn.Parameter(torch.empty(sum(c["tables"]), d, device=META))
        self.weight._gpemu_sparse = recsys.SparseGrad()
        self.register_buffer("offsets", torch.empty(len(c["tables"]), dtype=torch.long, device=META))
        width = recsys.interaction_width(d, len(c["tables"]) + 1)
        self.top = _mlp([width] + c["top_mlp"], last_act=False)

    def forward(self, dense, sparse):
        x = self.bottom(dense)
        emb = recsys.embedding_gather(self.weight, self.offsets, sparse, self.weight._gpemu_sparse)
        if emb.dtype != x.dtype:  # AMP: the features meet the bottom MLP's half output
            emb = emb.to(x.dtype)
        return self.top(recsys.dot_interaction(x, emb)).squeeze(1)


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
              "DENSE: the reference trains with sparse SGD updates, so grads/optimizer state "
              "of the tables are overstated here (dlrm_dle traces sparse gradients). BCE-with-logits loss (sigmoid folded into the loss)."),
        _dle_spec()]


def _dle_inputs(B, S=None):
    dense = torch.empty(B, 13, device=META)
    sparse = torch.empty(B, len(DLE_TABLES), dtype=torch.long, device=META)
    click = torch.empty(B, device=META)
    return (dense, sparse), click


def _dle_spec():
    spec = ModelSpec(
        name="dlrm_dle", family="recommender", build=lambda: DLEDLRM(DLE_DLRM),
        inputs=_dle_inputs, loss=_loss,
        input_desc="13 dense features (fp32) + 26 categorical ids (int64, one per table); click label",
        default_batch=65536, config=dict(DLE_DLRM),
        notes="DeepLearningExamples' single-GPU DLRM on Criteo 1TB FL=15 (~15.6 GiB of tables): one "
              "joint table, fused gather, SPARSE gradients (B x 26 rows and values) and a sparse SGD "
              "update of those rows, dot-interaction kernel, plain SGD without momentum; traced "
              "with the SGD section only (fp32 and amp)")
    spec.optimizers = ("sgd",)
    spec.sgd_momentum = 0.0
    return spec
