"""Recommender kernels as single operators: a sparse embedding step and DLRM's
dot interaction, for the zoo's DeepLearningExamples-style DLRM (`dlrm_dle`).

A DLRM trained as DeepLearningExamples trains it keeps all categorical tables
in one joint weight, gathers every sample's rows with one fused kernel, gets
a *sparse* gradient (the rows looked up and their gradient vectors, never a
table-sized tensor), and updates only those rows with plain SGD. Its feature
interaction is one custom kernel (pairwise dot products of the 27 feature
vectors, the lower triangle, concatenated with the dense features) forward
and backward. torch 1.13 cannot run sparse gradients on meta tensors, so the
kernels are `gpemu_recsys::` operators with meta implementations (shapes only):

    embedding_gather(weight_rows, offsets, ids) -> (B, T, D)
        one row per (sample, table): weight[offsets[t] + ids[b, t]];
        `weight_rows` is a view of B*T rows, the bytes the gather reads
    embedding_gather_backward(grad, ids, offsets) -> (rows, values)
        the sparse gradient: nnz = B*T global row ids and their gradient rows
    sparse_sgd_(weight_rows, rows, values, lr)
        weight[rows] -= lr * values; `weight_rows` is a view of the nnz rows
        the update reads and writes (an upper bound: repeated ids in a batch
        are coalesced by the real kernel), so its bytes are those rows', not
        the table's
    dot_interaction(dense, emb) -> (B, D + F(F-1)/2 padded to a multiple of 8)
    dot_interaction_backward(grad, dense, emb) -> (grad_dense, grad_emb)

The autograd Function for the gather returns no gradient for the table; it
hands the sparse gradient to a `SparseGrad` holder, which the trace harness
keeps as the table's gradient and the optimizer section applies.
"""
import torch

from . import fused

_LIB = torch.library.Library("gpemu_recsys", "DEF")  # fused.py holds "gpemu"
_LIB.define("embedding_gather(Tensor weight, Tensor offsets, Tensor ids) -> Tensor")
_LIB.define("embedding_gather_backward(Tensor grad, Tensor ids, Tensor offsets) -> (Tensor, Tensor)")
_LIB.define("sparse_sgd_(Tensor(a!) weight_rows, Tensor rows, Tensor values, float lr) -> ()")
_LIB.define("dot_interaction(Tensor dense, Tensor emb) -> Tensor")
_LIB.define("dot_interaction_backward(Tensor grad, Tensor dense, Tensor emb) -> (Tensor, Tensor)")

OPS = ("embedding_gather", "embedding_gather_backward", "sparse_sgd_", "dot_interaction",
       "dot_interaction_backward")


def interaction_width(d, features):
    """Output width of the dot interaction: the dense vector and the strictly
    lower triangle of the F x F dot products, padded to a multiple of 8 (as
    DeepLearningExamples' kernel pads it for tensor-core GEMMs)."""
    n = d + features * (features - 1) // 2
    return (n + 7) // 8 * 8


def _gather_meta(weight, offsets, ids):
    return torch.empty(tuple(ids.shape) + (weight.shape[1],), dtype=weight.dtype, device=weight.device)


def _gather_backward_meta(grad, ids, offsets):
    nnz = ids.numel()
    return (torch.empty(nnz, dtype=torch.long, device=grad.device),
            torch.empty(nnz, grad.shape[-1], dtype=grad.dtype, device=grad.device))


def _sparse_sgd_meta(weight_rows, rows, values, lr):
    return None


def _interaction_meta(dense, emb):
    f = emb.shape[1] + 1
    return torch.empty(dense.shape[0], interaction_width(dense.shape[1], f), dtype=dense.dtype, device=dense.device)


def _interaction_backward_meta(grad, dense, emb):
    return torch.empty_like(dense), torch.empty_like(emb)


fused.register(_LIB, "gpemu_recsys",
               (("embedding_gather", _gather_meta), ("embedding_gather_backward", _gather_backward_meta),
                ("sparse_sgd_", _sparse_sgd_meta), ("dot_interaction", _interaction_meta),
                ("dot_interaction_backward", _interaction_backward_meta)))


class SparseGrad:
    """A table's sparse gradient of the last backward: (rows, values)."""

    def __init__(self):
        self.rows = None
        self.values = None

    def clear(self):
        self.rows = self.values = None


class _Gather(torch.autograd.Function):
    @staticmethod
    def forward(ctx, weight, offsets, ids, holder):
        ctx.save_for_backward(ids, offsets)
        ctx.holder = holder
        return torch.ops.gpemu_recsys.embedding_gather(_rows_read(weight, ids.numel()), offsets, ids)

    @staticmethod
    def backward(ctx, grad):
        ids, offsets = ctx.saved_tensors
        ctx.holder.rows, ctx.holder.values = torch.ops.gpemu_recsys.embedding_gather_backward(grad, ids, offsets)
        return None, None, None, None


_Interaction = fused.saved_inputs_function(torch.ops.gpemu_recsys.dot_interaction,
                                           torch.ops.gpemu_recsys.dot_interaction_backward)


def embedding_gather(weight, offsets, ids, holder):
    return _Gather.apply(weight, offsets, ids, holder)


def dot_interaction(dense, emb):
    return _Interaction.apply(dense, emb)


def _rows_read(weight, n):
    """A view of n rows of the table: what a gather or a sparse update of n
    looked-up rows touches (the first n rows stand for them; the table holds
    more rows than a batch looks up)."""
    if n > weight.shape[0]:
        raise ValueError(f"{n} lookups in a table of {weight.shape[0]} rows: trace with a larger table")
    return weight.narrow(0, 0, n)


def sparse_sgd(weight, holder, lr):
    """The sparse update of one table from its holder's gradient."""
    torch.ops.gpemu_recsys.sparse_sgd_(_rows_read(weight, holder.rows.numel()), holder.rows, holder.values, lr)
