"""`gpemu torch --torch 2` (the default): PyTorch 2's API on the emulated GPU
(src/torch/gpemu_torch/_torch2.py, docs/torch.md "PyTorch 2's API").

Run by ctest (python.torch) with GPEMU_BINARY naming the `gpemu` program.
Each test runs a small script under `gpemu torch --clock virtual` and reads
what it printed as JSON: times are the emulated timeline's, checked against
the cost model's figures (FlashAttention's FLOP count at
kAttentionEfficiency of the catalog's peak), never the wall clock."""
import json
import os
import shutil
import tempfile
import textwrap
import unittest

from test_torch_backend import ROOT, gpemu, run_script

# cost_model.h's kAttentionEfficiency: the fraction of the matmul peak a fused
# attention kernel sustains.
ATTENTION_EFFICIENCY = 0.6
CALIBRATION = os.path.join(ROOT, "data", "calibration.json")


def catalog_gpu(name):
    return next(g for g in json.loads(gpemu("devices", "--json").stdout) if g["name"] == name)


class ScaledDotProductAttention(unittest.TestCase):
    def test_gpt_script_with_causal_sdpa_and_fused_adamw(self):
        # A GPT-style block stack (nanoGPT's shape of code): causal SDPA, bf16
        # autocast, AdamW(fused=True) under torch.amp.GradScaler("cuda").
        r = run_script("""
            import math
            import torch.nn as nn
            import torch.nn.functional as F

            class Block(nn.Module):
                def __init__(self, d, h):
                    super().__init__()
                    self.h = h
                    self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
                    self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
                    self.mlp = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d))

                def forward(self, x):
                    B, T, C = x.shape
                    q, k, v = self.qkv(self.ln1(x)).split(C, dim=2)
                    q, k, v = (t.view(B, T, self.h, C // self.h).transpose(1, 2) for t in (q, k, v))
                    y = F.scaled_dot_product_attention(q, k, v, dropout_p=0.1, is_causal=True)
                    x = x + self.proj(y.transpose(1, 2).contiguous().view(B, T, C))
                    return x + self.mlp(self.ln2(x))

            class GPT(nn.Module):
                def __init__(self, vocab=512, d=128, h=4, layers=2, T=64):
                    super().__init__()
                    self.tok, self.pos = nn.Embedding(vocab, d), nn.Embedding(T, d)
                    self.blocks = nn.Sequential(*[Block(d, h) for _ in range(layers)])
                    self.head = nn.Linear(d, vocab, bias=False)

                def forward(self, idx, targets):
                    x = self.tok(idx) + self.pos(torch.arange(idx.size(1), device=idx.device))
                    logits = self.head(self.blocks(x))
                    return F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1))

            import inspect
            model = GPT().cuda()
            flash = hasattr(torch.nn.functional, "scaled_dot_product_attention")
            fused_available = "fused" in inspect.signature(torch.optim.AdamW).parameters  # nanoGPT's check
            opt = torch.optim.AdamW(model.parameters(), lr=1e-3, fused=fused_available)
            scaler = torch.amp.GradScaler("cuda")
            idx = torch.randint(0, 512, (8, 64), device="cuda")

            def counters():
                return json.loads(torch.ops.gpemu.summary())

            step_kernels, step_syncs = [], []
            for _ in range(2):
                opt.zero_grad()
                with torch.autocast(device_type="cuda", dtype=torch.bfloat16):
                    loss = model(idx, idx)
                scaler.scale(loss).backward()
                before = counters()
                scaler.step(opt)
                after = counters()
                scaler.update()
                step_kernels.append(after["kernels"] - before["kernels"])
                step_syncs.append(after["blocking_syncs"] - before["blocking_syncs"])

            # One attention call timed alone: (B, H, L, d) = (2, 8, 8192, 64) in BF16.
            q, k, v = (torch.randn(2, 8, 8192, 64, device="cuda", dtype=torch.bfloat16, requires_grad=True)
                       for _ in range(3))
            busy = torch.empty(8192, 8192, device="cuda")
            times = {}
            for causal in (False, True):
                torch.cuda.synchronize()
                s, m, e = (torch.cuda.Event(enable_timing=True) for _ in range(3))
                busy @ busy  # the GPU is busy while the host issues the attention (its launch cost is hidden)
                torch.cuda.reset_peak_memory_stats()
                base = torch.cuda.memory_allocated()
                s.record()
                out = F.scaled_dot_product_attention(q, k, v, is_causal=causal)
                m.record()
                out.backward(torch.empty_like(out))
                e.record()
                torch.cuda.synchronize()
                times[str(causal)] = [s.elapsed_time(m), m.elapsed_time(e),
                                      torch.cuda.max_memory_allocated() - base]
                grads = [list(t.grad.shape) for t in (q, k, v)]
                q.grad = k.grad = v.grad = None
            print(json.dumps(dict(flash=flash, step_kernels=step_kernels, step_syncs=step_syncs,
                                  params=len(list(model.parameters())),
                                  state=sorted(opt.state[model.head.weight].keys()), times=times,
                                  out=list(out.shape), grads=grads,
                                  gpu=torch.cuda.get_device_name())))
        """, "--gpu", "a100")
        self.assertTrue(r["flash"])
        # Fused AdamW: the step counters' foreach add, then one kernel for every
        # parameter (plus GradScaler's inf check and the sum of its flags); no
        # found_inf.item() sync, as PyTorch 2 hands the scale to the fused step.
        # 1.13's GradScaler hands its scale over (two fills, two copies,
        # the inf check, the sum of its flags), then the fused step: the
        # step counters' foreach add, one kernel for every parameter and
        # the counters' rollback by found_inf. The first step also makes
        # each parameter's state (step, exp_avg, exp_avg_sq: 3 fills).
        self.assertEqual(r["step_kernels"], [9 + 3 * r["params"], 9], r)
        self.assertEqual(r["step_syncs"], [0, 0], r)  # no found_inf.item(), as PyTorch 2's fused step
        self.assertEqual(r["state"], ["exp_avg", "exp_avg_sq", "step"])
        shape = [2, 8, 8192, 64]
        self.assertEqual(r["out"], shape)
        self.assertEqual(r["grads"], [shape] * 3)
        # FlashAttention's FLOPs: forward 2 products of L x S x d per head,
        # backward 5; a causal kernel does half. Compute-bound at this size.
        rate = catalog_gpu(r["gpu"])["bf16_tflops"] * 1e12 * ATTENTION_EFFICIENCY
        flops = 2 * 2 * 2 * 8 * 8192 * 8192 * 64
        qkv = 2 * 8 * 8192 * 64 * 2  # bytes of q, k, v, the output and each grad
        for causal, share in (("False", 1.0), ("True", 0.5)):
            fwd_ms, bwd_ms, peak = r["times"][causal]
            self.assertAlmostEqual(fwd_ms / (flops * share / rate * 1e3), 1, delta=1e-3)
            self.assertAlmostEqual(bwd_ms / (2.5 * flops * share / rate * 1e3), 1, delta=1e-3)
            # No L x S tensor: the output, the rows' log-sum-exp (FP32), the
            # output's grad and q's, k's and v's; one FP16 score tensor would
            # be 2 GiB.
            self.assertLessEqual(peak, 5 * qkv + 2 * 8 * 8192 * 4, r["times"])

    def test_cpu_tensors_get_the_reference_values(self):
        r = run_script("""
            import torch.nn.functional as F
            torch.manual_seed(0)
            q, k, v = (torch.randn(2, 3, 5, 4) for _ in range(3))
            def reference(mask_add):
                w = torch.softmax(q @ k.transpose(-2, -1) / 2 + mask_add, dim=-1)
                return w @ v
            causal = torch.zeros(5, 5).masked_fill(torch.ones(5, 5, dtype=torch.bool).triu(1), float("-inf"))
            keep = torch.rand(5, 5) > 0.3
            keep[:, 0] = True
            out = dict(
                plain=(F.scaled_dot_product_attention(q, k, v) - reference(0)).abs().max().item(),
                causal=(F.scaled_dot_product_attention(q, k, v, is_causal=True) - reference(causal)).abs().max().item(),
                bool_mask=(F.scaled_dot_product_attention(q, k, v, attn_mask=keep)
                           - reference(torch.zeros(5, 5).masked_fill(~keep, float("-inf")))).abs().max().item())
            try:
                F.scaled_dot_product_attention(q, k, v, attn_mask=keep, is_causal=True)
            except RuntimeError as e:
                out["both"] = str(e)
            try:
                F.scaled_dot_product_attention(q, k[:, :1], v[:, :1])
            except RuntimeError as e:
                out["heads"] = str(e)
            gqa = F.scaled_dot_product_attention(q, k[:, :1], v[:, :1], enable_gqa=True)
            out["gqa"] = (gqa - F.scaled_dot_product_attention(q, k[:, :1].expand_as(q),
                                                               v[:, :1].expand_as(q))).abs().max().item()
            print(json.dumps(out))
        """)
        for key in ("plain", "causal", "bool_mask", "gqa"):
            self.assertLess(r[key], 1e-6, key)
        self.assertIn("attn_mask should not be set when is_causal=True", r["both"])
        self.assertIn("enable_gqa=True", r["heads"])


class AttentionModules(unittest.TestCase):
    SCRIPT = """
        import torch.nn as nn
        torch.manual_seed(0)
        # S = 1024, 2 x 8 heads: one S x S score tensor in FP32 is 64 MiB;
        # the layer's activations are a few MiB.
        layer = nn.TransformerEncoderLayer(d_model=128, nhead=8, dim_feedforward=256, batch_first=True).cuda()
        x = torch.empty(2, 1024, 128, device="cuda")
        layer(x).sum().backward()  # cuBLAS's workspaces, kept for the process's life, are taken here
        torch.cuda.synchronize()
        base = torch.cuda.memory_allocated()
        torch.cuda.reset_peak_memory_stats()
        layer(x).sum().backward()
        encoder_peak = torch.cuda.max_memory_allocated() - base
        mha = nn.MultiheadAttention(128, 8).cuda()
        y = torch.empty(1024, 2, 128, device="cuda")
        torch.cuda.synchronize()
        base = torch.cuda.memory_allocated()
        torch.cuda.reset_peak_memory_stats()
        mha(y, y, y, need_weights=False)[0].sum().backward()
        mha_peak = torch.cuda.max_memory_allocated() - base
        # On CPU tensors the SDPA path computes what 1.13's explicit one does.
        cpu = nn.MultiheadAttention(16, 4, dropout=0.0)
        a = torch.randn(6, 3, 16)
        b = torch.randn(7, 3, 16)
        kpm = torch.zeros(3, 7, dtype=torch.bool)
        kpm[1, 5:] = True
        mask = torch.zeros(6, 7, dtype=torch.bool)
        mask[:, 6] = True
        diff = max((cpu(a, b, b, key_padding_mask=kpm, attn_mask=mask, need_weights=False)[0]
                    - cpu(a, b, b, key_padding_mask=kpm, attn_mask=mask, need_weights=True)[0]).abs().max().item(),
                   (cpu(a, a, a, need_weights=False)[0] - cpu(a, a, a)[0]).abs().max().item())
        enc = nn.TransformerEncoder(nn.TransformerEncoderLayer(16, 4, 32, dropout=0.0), 2).eval()
        causal = nn.Transformer.generate_square_subsequent_mask(6)
        with torch.no_grad():
            hinted = enc(a, mask=causal, is_causal=True) if HINTS else enc(a, mask=causal)
        diff_causal = (hinted - enc.train()(a, mask=causal)).abs().max().item()
        print(json.dumps(dict(encoder=encoder_peak, mha=mha_peak, diff=diff, diff_causal=diff_causal,
                              sdpa=hasattr(torch.nn.functional, "scaled_dot_product_attention"))))
    """

    def test_mha_and_encoder_layer_allocate_no_s_by_s_tensor(self):
        scores = 2 * 8 * 1024 * 1024 * 4
        r2 = run_script(self.SCRIPT.replace("HINTS", "True"))
        self.assertTrue(r2["sdpa"])
        self.assertLess(r2["encoder"], scores / 2, r2)
        self.assertLess(r2["mha"], scores / 2, r2)
        self.assertLess(r2["diff"], 1e-5, r2)
        self.assertLess(r2["diff_causal"], 1e-5, r2)
        # torch 1.13's program keeps the scores, their softmax and its dropout mask.
        r1 = run_script(self.SCRIPT.replace("HINTS", "False"), "--torch", "1")
        self.assertFalse(r1["sdpa"])
        self.assertGreater(r1["encoder"], 2 * scores, r1)
        self.assertGreater(r1["mha"], 2 * scores, r1)


class Workspaces(unittest.TestCase):
    def test_cublas_workspaces_and_the_attention_output_layout(self):
        # PyTorch 2's cuBLAS workspace per (thread, stream): 32 MiB on Hopper, with 1 MiB
        # more for a cuBLASLt addmm; autograd's thread takes its own; they outlive empty_cache.
        # FlashAttention's output is laid out as q; the memory-efficient kernel's as (N, L, H, d).
        r = run_script("""
            MIB = 1 << 20
            lin = torch.nn.Linear(64, 64).cuda()
            x = torch.empty(8, 64, device="cuda")
            a = torch.cuda.memory_allocated()
            y = lin(x)
            b = torch.cuda.memory_allocated()
            y.sum().backward()
            torch.cuda.empty_cache()
            c = torch.cuda.memory_allocated()
            F = torch.nn.functional
            qkv = torch.empty(3, 197, 4, 768, device="cuda", dtype=torch.half).unbind(0)  # (L, N, E) each, as MHA
            q, k, v = (t.view(197, 48, 64).transpose(0, 1).view(4, 12, 197, 64) for t in qkv)
            flash = F.scaled_dot_product_attention(q, k, v).permute(2, 0, 1, 3).is_contiguous()
            q32, k32, v32 = (t.float() for t in (q, k, v))
            efficient = F.scaled_dot_product_attention(q32, k32, v32).transpose(1, 2).is_contiguous()
            print(json.dumps(dict(forward=(b - a) / MIB, backward=(c - b) / MIB, flash=flash, efficient=efficient)))
        """, "--gpu", "h200")
        out, grads = 8 * 64 * 4 / 2**20, (64 * 64 + 64) * 4 / 2**20
        self.assertAlmostEqual(r["forward"], 33 + out, delta=0.01, msg=r)
        self.assertAlmostEqual(r["backward"], 32 + grads - out, delta=0.01, msg=r)
        self.assertTrue(r["flash"], r)
        self.assertTrue(r["efficient"], r)


class Optimizers(unittest.TestCase):
    SCRIPT = """
        net = torch.nn.Sequential(*[torch.nn.Linear(64, 64) for _ in range(20)]).cuda()  # 40 parameters
        opt = torch.optim.SGD(net.parameters(), lr=0.1, momentum=0.9, weight_decay=1e-4)
        kernels = []
        for _ in range(3):
            net(torch.empty(32, 64, device="cuda")).sum().backward()
            before = json.loads(torch.ops.gpemu.summary())["kernels"]
            opt.step()
            kernels.append(json.loads(torch.ops.gpemu.summary())["kernels"] - before)
            opt.zero_grad()
        import inspect
        out = dict(kernels=kernels, grad_none=net[0].weight.grad is None, compile=None, fused=None,
                   fused_signature="fused" in inspect.signature(torch.optim.AdamW).parameters)
        try:
            out["fused"] = type(torch.optim.AdamW(net.parameters(), fused=True)).__name__
        except TypeError as e:
            out["fused"] = "TypeError"
        try:
            compiled = torch.compile(net)
            torch.compile(net, mode="max-autotune")
            out["compile"] = compiled is net
        except AttributeError:
            out["compile"] = "missing"
        print(json.dumps(out))
    """

    def test_foreach_by_default_zero_grad_to_none_and_compile_as_eager(self):
        out = gpemu("torch", "--clock", "virtual", "--", self._script(), check=False)
        self.assertEqual(out.returncode, 0, out.stderr)
        r = json.loads(out.stdout.strip().splitlines()[-1])
        # foreach: the weight decay's add, the momentum's mul_ and add_, the
        # update's add_ (the first step clones each grad into its buffer).
        self.assertEqual(r["kernels"][1:], [4, 4], r)
        self.assertEqual(r["kernels"][0], 40 + 2, r)
        self.assertTrue(r["grad_none"])
        self.assertEqual(r["fused"], "AdamW")
        self.assertTrue(r["fused_signature"])
        self.assertIs(r["compile"], True)
        said = [line for line in out.stderr.splitlines() if "torch.compile" in line]
        self.assertEqual(len(said), 1, out.stderr)
        self.assertIn("runs the model eagerly", said[0])

    def test_torch_1_keeps_the_old_program(self):
        out = gpemu("torch", "--clock", "virtual", "--torch", "1", "--", self._script(), check=False)
        self.assertEqual(out.returncode, 0, out.stderr)
        r = json.loads(out.stdout.strip().splitlines()[-1])
        # One kernel per parameter for each step of the update.
        self.assertEqual(r["kernels"][1:], [40 * 4, 40 * 4], r)
        self.assertFalse(r["grad_none"])
        self.assertEqual(r["fused"], "TypeError")
        self.assertFalse(r["fused_signature"])
        self.assertEqual(r["compile"], "missing")

    def test_a_torch_other_than_1_or_2_is_refused(self):
        out = gpemu("torch", "--torch", "3", "--", self._script(), check=False)
        self.assertNotEqual(out.returncode, 0)
        self.assertIn("--torch", out.stderr)

    def _script(self):
        tmp = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, tmp, True)
        path = os.path.join(tmp, "script.py")
        with open(path, "w") as f:
            f.write("import json, torch\n" + textwrap.dedent(self.SCRIPT))
        return path


class ZooModelCorrection(unittest.TestCase):
    SCRIPT = """
        import torchvision
        a = torch.empty(2048, 2048, device="cuda")

        def matmul_ms():
            s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            a @ a  # the GPU is busy while the timed one is issued
            s.record(); a @ a; e.record()
            torch.cuda.synchronize()
            return s.elapsed_time(e)

        before = matmul_ms()
        torchvision.models.squeezenet1_1()
        after = matmul_ms()
        print(json.dumps(dict(before=before, after=after,
                              model=json.loads(torch.ops.gpemu.summary())["model_correction"])))
    """

    def test_a_torchvision_builder_of_a_zoo_model_selects_its_correction(self):
        with open(CALIBRATION) as f:
            corrections = json.load(f)["model_corrections"]
        r = run_script(self.SCRIPT)
        self.assertEqual(r["model"], "squeezenet1_1")
        self.assertAlmostEqual(r["after"] / r["before"], corrections["squeezenet1_1"]["forward_gpu"], delta=1e-4)
        # --model holds for the whole run.
        r = run_script(self.SCRIPT, "--model", "resnet50")
        self.assertEqual(r["model"], "resnet50")
        self.assertEqual(r["after"], r["before"])


class WordLanguageModel(unittest.TestCase):
    def test_lstm_with_a_hand_written_sgd_update(self):
        # pytorch/examples' word_language_model's training loop: nn.LSTM,
        # clip_grad_norm_, model.zero_grad() and p.data.add_(p.grad, alpha=-lr).
        r = run_script("""
            import torch.nn as nn
            class RNNModel(nn.Module):
                def __init__(self, ntoken=1000, ninp=200, nhid=200, nlayers=2):
                    super().__init__()
                    self.drop = nn.Dropout(0.2)
                    self.encoder = nn.Embedding(ntoken, ninp)
                    self.rnn = nn.LSTM(ninp, nhid, nlayers, dropout=0.2)
                    self.decoder = nn.Linear(nhid, ntoken)

                def forward(self, input, hidden):
                    output, hidden = self.rnn(self.drop(self.encoder(input)), hidden)
                    return self.decoder(self.drop(output)).view(-1, 1000), hidden

            model = RNNModel().cuda()
            criterion = nn.NLLLoss()
            hidden = tuple(torch.zeros(2, 20, 200, device="cuda") for _ in range(2))
            data = torch.randint(0, 1000, (35, 20), device="cuda")
            params = list(model.parameters())
            busy = torch.empty(4096, 4096, device="cuda")
            update = []
            for batch in range(2):
                hidden = tuple(h.detach() for h in hidden)
                model.zero_grad()
                output, hidden = model(data, hidden)
                loss = criterion(torch.log_softmax(output, -1), data.view(-1))
                loss.backward()
                torch.nn.utils.clip_grad_norm_(model.parameters(), 0.25)
                before = json.loads(torch.ops.gpemu.summary())
                s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                busy @ busy  # the GPU is busy while the host issues the update (its launch costs are hidden)
                s.record()
                for p in model.parameters():
                    p.data.add_(p.grad, alpha=-20)
                e.record()
                torch.cuda.synchronize()
                after = json.loads(torch.ops.gpemu.summary())
                update.append([after["kernels"] - before["kernels"], s.elapsed_time(e)])
            print(json.dumps(dict(update=update, params=len(params), loss=list(loss.shape),
                                  param_bytes=sum(p.numel() * 4 for p in params), gpu=torch.cuda.get_device_name(),
                                  iterations=json.loads(torch.ops.gpemu.summary())["iterations"])))
        """, "--gpu", "v100")
        # One memory-bound kernel per parameter (the busy matmul before it
        # is the other kernel counted): it reads p and the grad and writes p,
        # at the V100 family's memory-bound efficiency of the catalog's bandwidth.
        with open(CALIBRATION) as f:
            efficiency = json.load(f)["families"]["Volta"]["memory_efficiency"]
        bandwidth = catalog_gpu(r["gpu"])["memory_bandwidth_gbs"] * 1e9 * efficiency
        for kernels, ms in r["update"]:
            self.assertEqual(kernels, r["params"] + 1)
            self.assertAlmostEqual(ms / (3 * r["param_bytes"] / bandwidth * 1e3), 1, delta=1e-3)
        self.assertEqual(r["loss"], [])


if __name__ == "__main__":
    unittest.main()
