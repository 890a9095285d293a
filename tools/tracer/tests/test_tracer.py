"""Tests of the model-zoo tracer. Run from the repository root:

    /usr/bin/python3 -m unittest discover -s tools/tracer/tests -t .
"""
import json
import unittest

import torch
import torch.nn as nn
import torch.nn.functional as F

from tools.tracer.models.spec import ModelSpec
from tools.tracer.trace import trace_once, END
from tools.tracer import zoofile
from tools.tracer.poly import Fitter, BASIS_B, BASIS_BS

META = "meta"


def spec_of(build, inputs, loss, seq=None, fit_seqs=None):
    return ModelSpec("test", "test", build, inputs, loss, "test input", 4, seq=seq,
                     fit_seqs=fit_seqs, cache=False)


def ops_named(raw, name, part="main"):
    ops = raw["main"]["ops"] if part == "main" else raw["sections"][part]["ops"]
    return [(i, o) for i, o in enumerate(ops) if o[0] == name]


def square_loss(out, target):
    return out.pow(2).sum()


class ConvLayer(unittest.TestCase):
    """Conv2d(3, 8, 3, padding=1) on a 2x3x16x16 input, fp32."""

    @classmethod
    def setUpClass(cls):
        spec = spec_of(lambda: nn.Conv2d(3, 8, 3, padding=1, device=META),
                       lambda B, S: ((torch.empty(B, 3, 16, 16, device=META),), None),
                       square_loss)
        cls.raw = trace_once(spec, 2, optimizers=("sgd",))

    def test_forward(self):
        (i, op), = ops_named(self.raw, "convolution")
        name, cls, dt, fl, rd, wr, par, ins, outs = op
        self.assertEqual(cls, "conv")
        self.assertEqual(dt, "f32")
        out_el = 2 * 8 * 16 * 16                      # 4096 output elements
        self.assertEqual(fl, 2 * out_el * 3 * 3 * 3 + out_el)   # MACs*2 + bias add = 225280
        self.assertEqual(rd, 2 * 3 * 16 * 16 * 4 + 8 * 3 * 9 * 4 + 8 * 4)  # x + W + b = 7040
        self.assertEqual(wr, out_el * 4)               # 16384
        self.assertEqual(par, 8 * 3 * 9 * 4 + 8 * 4)   # 896
        t = self.raw["main"]["tensors"][outs[0]]
        self.assertEqual(t[0], out_el * 4)
        self.assertEqual(t[1], i)                      # allocated by this op
        self.assertEqual(t[3], "act")

    def test_backward(self):
        (i, op), = ops_named(self.raw, "convolution_backward")
        name, cls, dt, fl, rd, wr, par, ins, outs = op
        self.assertGreaterEqual(i, self.raw["main"]["phases"]["backward"][0])
        out_el = 2 * 8 * 16 * 16
        # input needs no grad: grad_weight (2*MACs) + grad_bias (one add per grad_out el.)
        self.assertEqual(fl, 2 * out_el * 27 + out_el)
        self.assertEqual(rd, out_el * 4 + 2 * 3 * 16 * 16 * 4 + 8 * 27 * 4)  # dY + x + W
        self.assertEqual(wr, 8 * 27 * 4 + 8 * 4)     # dW + db
        tens = self.raw["main"]["tensors"]
        sizes = sorted(tens[t][0] for t in outs)
        self.assertEqual(sizes, [32, 864])
        for t in outs:   # the weight/bias grads live until the end of the iteration
            self.assertEqual(tens[t][3], "grad")
            self.assertEqual(tens[t][2], END)

    def test_sgd_section(self):
        ops = self.raw["sections"]["sgd"]["ops"]
        self.assertEqual([o[0] for o in ops], ["mul_", "add_", "add_"] * 2)
        self.assertTrue(all(o[1] == "optimizer" for o in ops))
        # the weight update reads param + momentum, writes param; param bytes count once
        self.assertEqual(ops[2][4:7], (2 * 864, 864, 864))



class Conv3dLayer(unittest.TestCase):
    """Conv3d(1, 4, 3, padding=1) on a 2x1x8x8x8 input: class conv3d, 2-D stays conv."""

    def test_class(self):
        spec = spec_of(lambda: nn.Conv3d(1, 4, 3, padding=1, device=META),
                       lambda B, S: ((torch.empty(B, 1, 8, 8, 8, device=META),), None),
                       square_loss)
        raw = trace_once(spec, 2, optimizers=("sgd",))
        for name in ("convolution", "convolution_backward"):
            (i, op), = ops_named(raw, name)
            self.assertEqual(op[1], "conv3d", name)
        (i, op), = ops_named(raw, "convolution")
        out_el = 2 * 4 * 8 * 8 * 8
        self.assertEqual(op[3], 2 * out_el * 27 + out_el)   # the FLOP rule is the same as 2-D's


class LinearLayer(unittest.TestCase):
    """Linear(64, 32) on a 4x64 input, fp32."""

    @classmethod
    def setUpClass(cls):
        spec = spec_of(lambda: nn.Linear(64, 32, device=META),
                       lambda B, S: ((torch.empty(B, 64, device=META),), None), square_loss)
        cls.raw = trace_once(spec, 4, optimizers=())

    def test_forward(self):
        (i, op), = ops_named(self.raw, "addmm")
        name, cls, dt, fl, rd, wr, par, ins, outs = op
        self.assertEqual(cls, "matmul")
        self.assertEqual(fl, 2 * 4 * 64 * 32 + 4 * 32)          # 16512
        self.assertEqual(rd, 32 * 4 + 4 * 64 * 4 + 64 * 32 * 4)  # b + x + W = 9344
        self.assertEqual(wr, 4 * 32 * 4)                        # 512
        self.assertEqual(par, 64 * 32 * 4 + 32 * 4)             # 8320
        self.assertEqual(self.raw["main"]["tensors"][outs[0]][0], 512)

    def test_backward(self):
        mms = ops_named(self.raw, "mm")
        self.assertEqual(len(mms), 1)            # input needs no grad: only dW = dY^T x
        i, op = mms[0]
        self.assertEqual(op[3], 2 * 32 * 4 * 64)                # 16384
        self.assertEqual(op[4], 4 * 32 * 4 + 4 * 64 * 4)        # dY + x = 1536
        self.assertEqual(op[5], 64 * 32 * 4)                    # dW = 8192
        tens = self.raw["main"]["tensors"]
        self.assertEqual(tens[op[8][0]][0], 8192)
        self.assertEqual(tens[op[8][0]][3], "grad")
        sums = [o for _, o in ops_named(self.raw, "sum")
                if tens[o[8][0]][3] == "grad"]
        self.assertEqual(len(sums), 1)                          # db = sum over the batch
        self.assertEqual(sums[0][3], 4 * 32)
        self.assertEqual(tens[sums[0][8][0]][0], 128)

    def test_persistent(self):
        tens = self.raw["main"]["tensors"]
        roles = [t[3] for t in tens if t[1] == -1]
        self.assertEqual(roles, ["param", "param", "input"])
        self.assertTrue(all(t[2] == END for t in tens if t[1] == -1))


def mlp_spec():
    return spec_of(
        lambda: nn.Sequential(nn.Linear(64, 128, device=META), nn.ReLU(),
                              nn.Linear(128, 10, device=META)),
        lambda B, S: ((torch.empty(B, 64, device=META),),
                      torch.empty(B, dtype=torch.long, device=META)),
        F.cross_entropy)


class MlpLifetimes(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.raw = trace_once(mlp_spec(), 4, optimizers=("sgd", "adam"))

    def test_saved_activation_released_after_last_backward_use(self):
        main = self.raw["main"]
        ops, tens = main["ops"], main["tensors"]
        (irelu, relu), = ops_named(self.raw, "relu")
        h = relu[8][0]                      # ReLU output: saved for dW2 and for ReLU's backward
        bwd0 = main["phases"]["backward"][0]
        uses = [i for i, o in enumerate(ops) if h in o[7] and o[1] != "view"]
        self.assertEqual(tens[h][1], irelu)
        self.assertGreater(max(uses), bwd0)                  # used in backward ...
        self.assertEqual(tens[h][2], max(uses) + 1 if ops[max(uses) + 1][1] == "view"
                         and h in ops[max(uses) + 1][7] else max(uses))
        self.assertLess(tens[h][2], len(ops) - 1)            # ... and freed before the end
        self.assertEqual(tens[h][0], 4 * 128 * 4)

    def test_unsaved_activation_released_in_forward(self):
        main = self.raw["main"]
        (i1, first), = [(i, o) for i, o in ops_named(self.raw, "addmm") if o[6] == 128 * 64 * 4 + 512]
        pre = first[8][0]                   # pre-activation: ReLU saves its output, not input
        self.assertLess(main["tensors"][pre][2], main["phases"]["forward"][1])

    def test_every_tensor_interval_valid(self):
        n = len(self.raw["main"]["ops"])
        for nbytes, alloc, free, role, dt in self.raw["main"]["tensors"]:
            self.assertTrue(free == END or alloc <= free < n)
            self.assertEqual(alloc == -1, role in ("param", "input", "buffer", "state",
                                                   "external"))

    def test_input_lives_throughout(self):
        tens = self.raw["main"]["tensors"]
        inputs = [t for t in tens if t[3] == "input"]
        self.assertEqual([(t[0], t[1], t[2]) for t in inputs], [(1024, -1, END), (32, -1, END)])

    def test_adam_state_and_temporaries(self):
        sec = self.raw["sections"]["adam"]
        n_main = len(self.raw["main"]["ops"])
        n_t = len(self.raw["main"]["tensors"])
        state = [t for t in sec["tensors"] if t[3] == "state"]
        self.assertEqual(len(state), 8)                   # exp_avg + exp_avg_sq per param
        self.assertEqual(sum(t[0] for t in state), 2 * 4 * (64 * 128 + 128 + 128 * 10 + 10))
        temps = [t for t in sec["tensors"] if t[3] == "act"]
        self.assertTrue(temps)                            # denom = sqrt(v)/c + eps
        for t in temps:
            self.assertTrue(n_main <= t[1] <= t[2] < n_main + len(sec["ops"]))
        for o in sec["ops"]:
            for tid in o[7] + o[8]:
                self.assertLess(tid, n_t + len(sec["tensors"]))


class PureHalf(unittest.TestCase):
    """Linear(64, 32) + BatchNorm1d(32) + Linear(32, 10), precision "half" (apex O2):
    FP16 weights and matmuls, BatchNorm in FP32, FP32 master weights updated by
    the optimizer and copied back."""

    @classmethod
    def setUpClass(cls):
        spec = spec_of(
            lambda: nn.Sequential(nn.Linear(64, 32, device=META), nn.BatchNorm1d(32, device=META),
                                  nn.Linear(32, 10, device=META)),
            lambda B, S: ((torch.empty(B, 64, device=META),),
                          torch.empty(B, dtype=torch.long, device=META)),
            F.cross_entropy)
        cls.raw = trace_once(spec, 4, precision="half", optimizers=("adam",))

    def test_weights_and_matmuls_are_half_batchnorm_float(self):
        tens = self.raw["main"]["tensors"]
        params = [tens[p] for p, _ in self.raw["main"]["param_grad"]]
        # Linear 64x32 + bias, BatchNorm weight + bias, Linear 32x10 + bias
        self.assertEqual([t[4] for t in params], ["f16", "f16", "f32", "f32", "f16", "f16"])
        self.assertEqual([t[0] for t in params], [64 * 32 * 2, 32 * 2, 32 * 4, 32 * 4, 32 * 10 * 2, 10 * 2])
        addmms = [o for _, o in ops_named(self.raw, "addmm")]
        self.assertEqual(len(addmms), 2)
        self.assertTrue(all(o[2] == "f16" for o in addmms))
        self.assertEqual(addmms[0][4], 32 * 2 + 4 * 64 * 2 + 64 * 32 * 2)  # b + x + W, all FP16

    def test_no_autocast_casts_in_forward(self):
        fwd_end = self.raw["main"]["phases"]["forward"][1]
        copies = [o for o in self.raw["main"]["ops"][:fwd_end] if o[0] == "_to_copy"]
        # only the batch-norm boundary casts and the loss's .float()
        self.assertLessEqual(len(copies), 3)

    def test_optimizer_updates_fp32_masters_and_copies_back(self):
        sec = self.raw["sections"]["adam"]
        half_params = 4  # the Linear weights and biases; BatchNorm's are FP32, their own masters
        grad_casts = [o for o in sec["ops"] if o[0] == "_to_copy" and o[4] > 8]  # not the scale's
        self.assertEqual(len(grad_casts), half_params)
        self.assertEqual(sum(o[5] for o in grad_casts), (64 * 32 + 32 + 32 * 10 + 10) * 4)
        copy_back = [o for o in sec["ops"] if o[0] == "copy_"]
        self.assertEqual(len(copy_back), half_params)
        self.assertEqual(sum(o[5] for o in copy_back), (64 * 32 + 32 + 32 * 10 + 10) * 2)
        adam_sqrt = [o for o in sec["ops"] if o[0] == "sqrt"]
        self.assertEqual(len(adam_sqrt), 6)  # every parameter is updated
        self.assertTrue(any(o[0] == "_amp_foreach_non_finite_check_and_unscale_" for o in sec["ops"]))
        # masters exist before the step, as FP32 state
        tens = self.raw["main"]["tensors"]
        masters = [t for t in tens if t[3] == "state" and t[4] == "f32" and t[1] == -1]
        # the four masters and the loss scale (a 1-element FP32 tensor)
        self.assertEqual(sum(t[0] for t in masters), (64 * 32 + 32 + 32 * 10 + 10) * 4 + 4)


class FusedChains(unittest.TestCase):
    """A one-layer BERT with fused scale-softmax-dropout, bias-GELU and
    bias-dropout-residual-LayerNorm chains (tools/tracer/fused.py) against the
    same layer eager."""

    @classmethod
    def setUpClass(cls):
        from tools.tracer.models import transformers as tf
        cfg = dict(vocab=97, hidden=32, layers=1, heads=2, inter=64, max_pos=128)
        cls.B, cls.S, cls.h, cls.inter = 2, 16, 32, 64
        raw = {}
        for fused in (False, True):
            spec = spec_of(lambda f=fused: tf.BertMLM(**cfg, head="squad", fused=f), tf._squad_inputs,
                           tf._squad_loss, seq=16)
            raw[fused] = trace_once(spec, cls.B, cls.S, precision="fp32", optimizers=())
        cls.eager, cls.fused = raw[False], raw[True]

    def kernels(self, raw):
        return [o for o in raw["main"]["ops"] if o[1] != "view"]

    def test_fused_chains_are_single_ops_forward_and_backward(self):
        names = [o[0] for o in self.kernels(self.fused)]
        self.assertEqual(names.count("bias_dropout_add_layer_norm"), 2)
        self.assertEqual(names.count("bias_dropout_add_layer_norm_backward"), 2)
        self.assertEqual(names.count("bias_gelu"), 1)
        self.assertEqual(names.count("bias_gelu_backward"), 1)
        self.assertNotIn("gelu", names)
        # the embedding LayerNorm stays eager; the layer's two are fused
        self.assertEqual(names.count("native_layer_norm"), 1)
        self.assertEqual(names.count("native_layer_norm"), [o[0] for o in self.kernels(self.eager)].count(
            "native_layer_norm") - 2)
        # the attention scores: one kernel each way, no eager softmax, scaling or attention dropout left
        self.assertEqual(names.count("scale_softmax_dropout"), 1)
        self.assertEqual(names.count("scale_softmax_dropout_backward"), 1)
        eager = [o[0] for o in self.kernels(self.eager)]
        self.assertEqual(eager.count("_softmax"), 1)
        self.assertNotIn("_softmax", names)
        self.assertNotIn("_softmax_backward_data", names)
        self.assertEqual(names.count("native_dropout"), eager.count("native_dropout") - 3)

    def test_the_softmax_chain_reads_the_scores_once_and_writes_probs_softmax_and_mask(self):
        (_, fwd), = ops_named(self.fused, "scale_softmax_dropout")
        (_, bwd), = ops_named(self.fused, "scale_softmax_dropout_backward")
        n = self.B * 2 * self.S * self.S  # batch x heads x S x S scores
        self.assertEqual((fwd[1], bwd[1]), ("softmax", "softmax"))
        self.assertEqual(fwd[4], 4 * n)              # the scores
        self.assertEqual(fwd[5], 4 * n + 4 * n + n)  # probabilities after dropout, softmax output, bool mask
        self.assertEqual(bwd[4], 4 * n + 4 * n + n)  # grad, softmax output, mask
        self.assertEqual(bwd[5], 4 * n)              # the scores' grad
        # eager, the same chain moves several times the bytes (scale, softmax, dropout and their backward)
        eager_bytes = sum(o[4] + o[5] for o in self.kernels(self.eager)
                          if o[0] in ("_softmax", "_softmax_backward_data") or
                          (o[0] in ("div", "native_dropout", "native_dropout_backward") and o[4] >= 4 * n))
        self.assertGreater(eager_bytes, 2 * (fwd[4] + fwd[5] + bwd[4] + bwd[5]))

    def test_one_bias_gelu_reads_its_inputs_once_and_writes_once(self):
        (i, op), = ops_named(self.fused, "bias_gelu")
        n = self.B * self.S * self.inter
        self.assertEqual(op[1], "elementwise")
        self.assertEqual(op[4], 4 * n + 4 * self.inter)  # x and the bias
        self.assertEqual(op[5], 4 * n)                   # y
        self.assertEqual(op[3], 2 * n)
        self.assertEqual(op[6], 4 * self.inter)          # the bias is a parameter

    def test_fewer_kernels_and_bytes_same_matmul_flops(self):
        ek, fk = self.kernels(self.eager), self.kernels(self.fused)
        self.assertLess(len(fk), len(ek))
        self.assertLess(sum(o[4] + o[5] for o in fk), sum(o[4] + o[5] for o in ek))
        mm = lambda ks: sum(o[3] for o in ks if o[1] == "matmul")  # noqa: E731
        # the bias adds moved out of the matmuls into the fused kernels
        self.assertEqual(mm(ek) - mm(fk), self.B * self.S * (2 * self.h + self.inter) * 1)


class FusedAttention(unittest.TestCase):
    """One-layer BERT (bidirectional) and GPT-2 (causal) with attention as one
    scaled-dot-product kernel each way, against the same layers eager."""

    @classmethod
    def setUpClass(cls):
        from tools.tracer.models import transformers as tf
        cls.B, cls.S, cls.h, cls.heads = 2, 16, 32, 2
        bert = dict(vocab=97, hidden=32, layers=1, heads=2, inter=64, max_pos=128)
        gpt = dict(vocab=97, n_pos=64, hidden=32, layers=1, heads=2)
        cls.raw = {}
        for sdpa in (False, True):
            spec = spec_of(lambda f=sdpa: tf.BertMLM(**bert, head="squad", sdpa=f), tf._squad_inputs,
                           tf._squad_loss, seq=16)
            cls.raw["bert", sdpa] = trace_once(spec, cls.B, cls.S, precision="amp", optimizers=())
            spec = spec_of(lambda f=sdpa: tf.GPT2LM(**gpt, sdpa=f), tf._ids_inputs, tf._causal_loss, seq=16)
            cls.raw["gpt", sdpa] = trace_once(spec, cls.B, cls.S, precision="fp32", optimizers=())

    def kernels(self, raw):
        return [o for o in raw["main"]["ops"] if o[1] != "view"]

    def test_one_kernel_each_way_and_no_scores(self):
        for model in ("bert", "gpt"):
            names = [o[0] for o in self.kernels(self.raw[model, True])]
            self.assertEqual(names.count("scaled_dot_product_attention"), 1, model)
            self.assertEqual(names.count("scaled_dot_product_attention_backward"), 1, model)
            for gone in ("bmm", "_softmax", "_softmax_backward_data"):
                self.assertNotIn(gone, names, model)
            self.assertIn("bmm", [o[0] for o in self.kernels(self.raw[model, False])], model)

    def test_flops_as_flash_attention_counts_them_and_bytes_without_s_squared(self):
        d = self.h // self.heads
        full = 4 * self.B * self.heads * self.S * self.S * d  # two S x S x d products
        for model, causal, elem in (("bert", False, 2), ("gpt", True, 4)):
            (_, fwd), = ops_named(self.raw[model, True], "scaled_dot_product_attention")
            (_, bwd), = ops_named(self.raw[model, True], "scaled_dot_product_attention_backward")
            self.assertEqual(fwd[1], "matmul")
            self.assertEqual(fwd[3], full // 2 if causal else full, model)
            self.assertEqual(bwd[3], (5 * full // 2) // (2 if causal else 1), model)
            qkv = self.B * self.S * self.h * elem
            self.assertEqual(fwd[4], 3 * qkv, model)                                     # q, k, v
            self.assertEqual(fwd[5], qkv + self.B * self.heads * self.S * 4, model)      # out + FP32 log-sum-exp
            self.assertEqual(bwd[5], 3 * qkv, model)                                     # grads of q, k, v
        # the eager program's matmul FLOPs in attention equal the fused forward's (bidirectional)
        eager_bmm = sum(o[3] for o in self.kernels(self.raw["bert", False]) if o[0] == "bmm")
        (_, fwd), = ops_named(self.raw["bert", True], "scaled_dot_product_attention")
        (_, bwd), = ops_named(self.raw["bert", True], "scaled_dot_product_attention_backward")
        self.assertEqual(eager_bmm, fwd[3] + bwd[3] * 4 // 5)  # eager backward: 4 products, no recompute


class SparseEmbeddings(unittest.TestCase):
    """A small DeepLearningExamples-style DLRM (tools/tracer/recsys.py): three
    tables of 1000 + 50 + 2000 rows of width 8 in one joint table, batch 4."""

    @classmethod
    def setUpClass(cls):
        from tools.tracer.models import dlrm
        cfg = dict(dlrm.DLE_DLRM, embedding_dim=8, tables=[1000, 50, 2000], bottom_mlp=[16, 8],
                   top_mlp=[16, 1])
        spec = spec_of(lambda: dlrm.DLEDLRM(cfg),
                       lambda B, S: ((torch.empty(B, 13, device=META),
                                      torch.empty(B, 3, dtype=torch.long, device=META)),
                                     torch.empty(B, device=META)), dlrm._loss)
        spec.sgd_momentum = 0.0
        cls.B, cls.T, cls.D, cls.rows = 4, 3, 8, 3050
        cls.raw = trace_once(spec, cls.B, optimizers=("sgd",))
        cls.tens = cls.raw["main"]["tensors"]

    def test_the_table_gets_a_sparse_gradient_not_a_table_sized_one(self):
        table = [self.tens[p] for p, _ in self.raw["main"]["param_grad"] if self.tens[p][0] == self.rows * 8 * 4]
        self.assertEqual(len(table), 1)
        (p, g), = [(p, g) for p, g in self.raw["main"]["param_grad"] if self.tens[p][0] == self.rows * 8 * 4]
        self.assertEqual(self.tens[g][0], self.B * self.T * self.D * 4)  # values of the looked-up rows
        self.assertEqual(self.tens[g][3], "grad")
        self.assertFalse(any(t[0] >= self.rows * 8 * 4 for t in self.tens if t[3] in ("grad", "act", "state")))

    def test_gather_and_update_touch_only_the_looked_up_rows(self):
        n = self.B * self.T
        (i, gather), = ops_named(self.raw, "embedding_gather")
        self.assertEqual(gather[1], "embedding")
        self.assertEqual(gather[4], n * self.D * 4 + n * 8 + self.T * 8)  # rows, ids, offsets
        self.assertEqual(gather[5], n * self.D * 4)
        (i, upd), = ops_named(self.raw, "sparse_sgd_", part="sgd")
        self.assertEqual(upd[4], n * self.D * 4 + n * 8 + n * self.D * 4)  # rows read, row ids, values
        self.assertEqual(upd[5], n * self.D * 4)
        self.assertEqual(upd[3], 2 * n * self.D)

    def test_interaction_is_one_kernel_each_way(self):
        (i, fwd), = ops_named(self.raw, "dot_interaction")
        (j, bwd), = ops_named(self.raw, "dot_interaction_backward")
        f = self.T + 1
        self.assertEqual(fwd[1], "matmul")
        self.assertEqual(fwd[3], 2 * self.B * f * f * self.D)
        self.assertEqual(self.tens[fwd[8][0]][0], self.B * 16 * 4)  # 8 + 6 pairs, padded to 16
        self.assertGreater(j, i)

    def test_plain_sgd_has_no_momentum_state(self):
        self.assertEqual(ops_named(self.raw, "mul_", part="sgd"), [])
        self.assertFalse(any(t[3] == "state" for t in self.raw["sections"]["sgd"]["tensors"]))


class PolynomialFit(unittest.TestCase):
    def test_cnn_batch_polynomial_matches_direct_trace(self):
        def build():
            return nn.Sequential(
                nn.Conv2d(3, 8, 3, padding=1, device=META), nn.BatchNorm2d(8, device=META),
                nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(), nn.Dropout(0.5),
                nn.Linear(8 * 8 * 8, 10, device=META))
        spec = spec_of(build, lambda B, S: ((torch.empty(B, 3, 16, 16, device=META),),
                                            torch.empty(B, dtype=torch.long, device=META)),
                       F.cross_entropy)
        doc = zoofile.build_doc(spec)
        json.loads(zoofile.dumps(doc))                # valid JSON
        self.assertEqual(zoofile.validate(doc), [])
        for prec in ("fp32", "amp"):
            direct = trace_once(spec, 7, precision=prec)
            self._compare(doc, prec, direct, 7, None)

    def test_sequence_polynomial_matches_direct_trace(self):
        from tools.tracer.models.transformers import GPT2LM, _ids_inputs, _causal_loss
        spec = spec_of(lambda: GPT2LM(vocab=97, n_pos=64, hidden=16, layers=1, heads=2),
                       _ids_inputs, _causal_loss, seq=32, fit_seqs=(4, 8, 12, 20))
        doc = zoofile.build_doc(spec, precisions=("fp32",))
        direct = trace_once(spec, 5, 24, precision="fp32")
        self._compare(doc, "fp32", direct, 5, 24)

    def test_bert_heads(self):
        """The pre-training MLM decoder runs on B x 5S/32 masked rows, SQuAD has
        no vocabulary-sized matmul, and both fit as polynomials in B and S."""
        from tools.tracer.models import transformers as tf
        cfg = dict(vocab=97, hidden=32, layers=1, heads=2, inter=64, max_pos=256)
        vocab, h = cfg["vocab"], cfg["hidden"]

        def decoder_flops(raw):
            return [o[3] for o in raw["main"]["ops"]
                    if o[1] == "matmul" and o[3] % (2 * h * vocab) == 0 and o[3] > 0]
        pre = spec_of(lambda: tf.BertMLM(**cfg, head="pretraining"), tf._bert_pretraining_inputs,
                      tf._pretraining_loss, seq=64, fit_seqs=(32, 64, 96, 160))
        raw = trace_once(pre, 2, 64, precision="fp32", optimizers=())
        masked_rows = 2 * tf.masked_positions(64)
        self.assertEqual(masked_rows, 20)
        self.assertIn(2 * masked_rows * h * vocab, decoder_flops(raw))
        self.assertNotIn(2 * 2 * 64 * h * vocab, decoder_flops(raw))  # not every position
        self.assertTrue(ops_named(raw, "index_select"))
        doc = zoofile.build_doc(pre, precisions=("fp32",))
        self._compare(doc, "fp32", trace_once(pre, 5, 128, precision="fp32"), 5, 128)
        squad = spec_of(lambda: tf.BertMLM(**cfg, head="squad"), tf._squad_inputs, tf._squad_loss,
                        seq=64)
        raw = trace_once(squad, 2, 64, precision="fp32", optimizers=())
        self.assertEqual(decoder_flops(raw), [])
        self.assertIn(2 * 2 * 64 * h * 2, [o[3] for o in raw["main"]["ops"] if o[1] == "matmul"])

    def _compare(self, doc, prec, raw, B, S):
        var = doc["variants"][prec]
        ev = lambda i: zoofile.eval_poly(doc, i, B, S)  # noqa: E731
        main = raw["main"]
        self.assertEqual(len(var["ops"]["kind"]), len(main["ops"]))
        for j, o in enumerate(main["ops"]):
            got = tuple(ev(var["ops"][k][j]) for k in ("flops", "rd", "wr", "par"))
            self.assertEqual(got, tuple(o[3:7]), f"op {j} {o[0]}")
            self.assertEqual(doc["kinds"][var["ops"]["kind"][j]], [o[0], o[1]])
        for j, t in enumerate(main["tensors"]):
            self.assertEqual(ev(var["tensors"]["size"][j]), t[0])
            self.assertEqual(var["tensors"]["alloc"][j], t[1])
            self.assertEqual(var["tensors"]["free"][j], t[2])
        for k, sec in raw["sections"].items():
            enc = var["optimizers"][k]
            for j, o in enumerate(sec["ops"]):
                self.assertEqual(ev(enc["ops"]["flops"][j]), o[3])
            for j, t in enumerate(sec["tensors"]):
                self.assertEqual(ev(enc["tensors"]["size"][j]), t[0])

    def test_fitter_exact(self):
        f = Fitter(BASIS_BS, [(b, s) for b in (2, 3) for s in (4, 8, 12)])
        q = lambda B, S: 7 + 3 * S + 5 * S * S + 11 * B + 13 * B * S + 17 * B * S * S  # noqa
        c = f.fit([q(b, s) for b, s in f.points])
        self.assertEqual(c, (7, 3, 5, 11, 13, 17))
        f2 = Fitter(BASIS_B, [(2, None), (3, None)])
        self.assertEqual(f2.fit([10, 13]), (4, 3))


class ModelZoo(unittest.TestCase):
    def test_resnet18_parameter_count(self):
        from tools.tracer import models
        spec = models.get("resnet18")
        raw = trace_once(spec, 2, optimizers=())
        spec.release()
        self.assertEqual(raw["params"], 11689512)
        persistent = sum(t[0] for t in raw["main"]["tensors"] if t[3] == "param")
        self.assertEqual(persistent, 11689512 * 4)

    def test_registry_complete(self):
        from tools.tracer import models
        from tools.tracer.models.vision import TORCHVISION_MODELS
        self.assertEqual(len(TORCHVISION_MODELS), 37)
        for n in TORCHVISION_MODELS + ["bert_base", "bert_large", "gpt2_small", "gpt2_medium",
                                       "bert_base_pretraining", "bert_large_pretraining",
                                       "bert_base_squad", "bert_large_squad",
                                       "vit_b_16", "llama2_7b", "dlrm_mlperf", "unet3d",
                                       "bert_base_pretraining_fused", "bert_large_pretraining_fused",
                                       "bert_base_squad_fused", "bert_large_squad_fused", "dlrm_dle",
                                       "vit_b_16_sdpa"] + [
                    m + "_sdpa" for m in ("bert_base", "bert_large", "bert_base_pretraining", "bert_large_pretraining",
                                          "bert_base_squad", "bert_large_squad", "gpt2_small", "gpt2_medium",
                                          "llama2_7b")]:
            self.assertIn(n, models.REGISTRY)


class CommittedZoo(unittest.TestCase):
    """The generated files in zoo/ (skipped where none are present)."""

    def test_zoo_files(self):
        import glob
        import os
        from tools.tracer import models
        files = sorted(glob.glob(os.path.join("zoo", "*.json")))
        if not files:
            self.skipTest("no zoo/*.json generated")
        for f in files:
            with self.subTest(file=f):
                with open(f) as fh:
                    doc = json.load(fh)
                m = doc["model"]
                self.assertEqual(doc["format"], zoofile.FORMAT)
                self.assertIn(m["name"], models.REGISTRY)
                self.assertEqual(os.path.basename(f), m["name"] + ".json")
                for key in ("family", "input", "params", "fwd_flops_per_sample",
                            "default_batch", "ref"):
                    self.assertIn(key, m)
                self.assertIn("version", doc["tracer"])
                self.assertIn("torch", doc["tracer"])
                # every model's own list: the transformers add pure half
                self.assertEqual(set(doc["variants"]), set(models.get(m["name"]).precisions))
                self.assertEqual(zoofile.validate(doc), [])
                self.assertLess(os.path.getsize(f), 2 * 1024 * 1024)
                if m["name"] == "resnet18":
                    self.assertEqual(m["params"], 11689512)


if __name__ == "__main__":
    unittest.main()
