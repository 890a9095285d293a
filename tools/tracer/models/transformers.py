"""Transformer models written with plain torch.nn (weights are never loaded):
BERT (masked-LM head), GPT-2 (causal LM), and a Llama-style decoder
(RMSNorm, rotary position embedding, SwiGLU) given by its config.

The layer structure follows the reference implementations (Google BERT,
OpenAI GPT-2, Meta Llama) so that the aten operator sequence and the tensors
saved for backward are those a PyTorch training run of these models has.
All modules are created directly on the meta device, so 7B-class configs
cost no memory.
"""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F

from .spec import ModelSpec
from .. import fused as fz

META = "meta"


# ----------------------------------------------------------------------------- BERT
class BertLayer(nn.Module):
    """fused: the attention scores' scale + softmax + dropout, the output
    projections' bias + dropout + residual add + LayerNorm and the
    intermediate projection's bias + GELU run as one kernel each
    (tools/tracer/fused.py), as DeepLearningExamples' NVFuser-scripted layers
    and Megatron's fused kernels run them; the matmuls are then bias-free.
    sdpa: self-attention as one fused kernel each way
    (F.scaled_dot_product_attention: FlashAttention / memory-efficient)."""

    def __init__(self, h, heads, inter, drop, eps, fused=False, sdpa=False):
        super().__init__()
        self.fused = fused
        self.sdpa = sdpa
        self.drop = drop
        self.heads = heads
        self.q = nn.Linear(h, h, device=META)
        self.k = nn.Linear(h, h, device=META)
        self.v = nn.Linear(h, h, device=META)
        self.attn_drop = nn.Dropout(drop)
        self.o = nn.Linear(h, h, device=META)
        self.o_drop = nn.Dropout(drop)
        self.ln1 = nn.LayerNorm(h, eps=eps, device=META)
        self.fc1 = nn.Linear(h, inter, device=META)
        self.fc2 = nn.Linear(inter, h, device=META)
        self.fc_drop = nn.Dropout(drop)
        self.ln2 = nn.LayerNorm(h, eps=eps, device=META)

    def _split(self, x):
        b, s, h = x.shape
        return x.view(b, s, self.heads, h // self.heads).permute(0, 2, 1, 3)

    def forward(self, x):
        b, s, h = x.shape
        d = h // self.heads
        q, k, v = self._split(self.q(x)), self._split(self.k(x)), self._split(self.v(x))
        if self.sdpa:
            ctx = fz.scaled_dot_product_attention(q, k, v, self.drop, training=self.training)
        else:
            if self.fused:
                p = self.drop if self.training else 0.0
                probs = fz.scale_softmax_dropout(torch.matmul(q, k.transpose(-1, -2)), 1 / math.sqrt(d), p)
            else:
                scores = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(d)
                probs = self.attn_drop(F.softmax(scores, dim=-1))
            ctx = torch.matmul(probs, v)
        ctx = ctx.permute(0, 2, 1, 3).contiguous().view(b, s, h)
        if self.fused:
            x = fz.bias_dropout_add_layer_norm(F.linear(ctx, self.o.weight), self.o.bias, x, self.ln1, p)
            a = fz.bias_gelu(F.linear(x, self.fc1.weight), self.fc1.bias)
            return fz.bias_dropout_add_layer_norm(F.linear(a, self.fc2.weight), self.fc2.bias, x, self.ln2, p)
        x = self.ln1(self.o_drop(self.o(ctx)) + x)
        y = self.fc_drop(self.fc2(F.gelu(self.fc1(x))))
        return self.ln2(y + x)


class BertMLM(nn.Module):
    """head: "mlm_all" (decoder logits at every position, HF BertForMaskedLM),
    "pretraining" (DeepLearningExamples' BertForPreTraining: the MLM decoder
    runs only on the masked positions, gathered with index_select, plus the
    pooler and the next-sentence head) or "squad" (BertForQuestionAnswering:
    one Linear(h, 2) for start/end logits, no pooler, no MLM head).
    fused: the layers' fused chains (BertLayer) and the MLM transform's bias + GELU.
    sdpa: fused attention kernels (BertLayer)."""

    def __init__(self, vocab=30522, hidden=768, layers=12, heads=12, inter=3072,
                 max_pos=512, type_vocab=2, drop=0.1, eps=1e-12, head="mlm_all", fused=False, sdpa=False):
        super().__init__()
        self.head = head
        self.fused = fused
        self.word = nn.Embedding(vocab, hidden, device=META)
        self.pos = nn.Embedding(max_pos, hidden, device=META)
        self.tok_type = nn.Embedding(type_vocab, hidden, device=META)
        self.emb_ln = nn.LayerNorm(hidden, eps=eps, device=META)
        self.emb_drop = nn.Dropout(drop)
        self.register_buffer("position_ids",
                             torch.empty(1, max_pos, dtype=torch.long, device=META))
        self.layers = nn.ModuleList(BertLayer(hidden, heads, inter, drop, eps, fused, sdpa)
                                    for _ in range(layers))
        self.vocab = vocab
        if head == "squad":
            self.qa = nn.Linear(hidden, 2, device=META)
            return
        # MLM head: transform + decoder tied to the word embeddings
        self.head_dense = nn.Linear(hidden, hidden, device=META)
        self.head_ln = nn.LayerNorm(hidden, eps=eps, device=META)
        self.decoder_bias = nn.Parameter(torch.empty(vocab, device=META))
        if head == "pretraining":
            self.pooler = nn.Linear(hidden, hidden, device=META)
            self.nsp = nn.Linear(hidden, 2, device=META)

    def forward(self, ids, types, masked=None):
        s = ids.shape[1]
        x = self.word(ids) + self.tok_type(types) + self.pos(self.position_ids[:, :s])
        x = self.emb_drop(self.emb_ln(x))
        for layer in self.layers:
            x = layer(x)
        if self.head == "squad":
            start, end = self.qa(x).split(1, dim=-1)
            return start.squeeze(-1), end.squeeze(-1)
        if self.head == "pretraining":
            pooled = torch.tanh(self.pooler(x[:, 0]))
            x = torch.index_select(x.reshape(-1, x.shape[-1]), 0, masked)
        if self.fused:
            x = self.head_ln(fz.bias_gelu(F.linear(x, self.head_dense.weight), self.head_dense.bias))
        else:
            x = self.head_ln(F.gelu(self.head_dense(x)))
        logits = F.linear(x, self.word.weight, self.decoder_bias)
        if self.head == "pretraining":
            return logits, self.nsp(pooled)
        return logits


def _lm_loss(logits, labels):
    return F.cross_entropy(logits.view(-1, logits.shape[-1]), labels.reshape(-1))


def _bert_inputs(B, S):
    ids = torch.empty(B, S, dtype=torch.long, device=META)
    types = torch.empty(B, S, dtype=torch.long, device=META)
    labels = torch.empty(B, S, dtype=torch.long, device=META)
    return (ids, types), labels


def masked_positions(S):
    """Masked tokens per sequence in DeepLearningExamples' BERT pre-training:
    max_predictions_per_seq 20 at seq 128 and 80 at seq 512 (5/32 of S, the
    15 % masking rate rounded up); the LDDL loader pads every sequence to it."""
    return 5 * S // 32


def _bert_pretraining_inputs(B, S):
    ids = torch.empty(B, S, dtype=torch.long, device=META)
    types = torch.empty(B, S, dtype=torch.long, device=META)
    masked = torch.empty(B * masked_positions(S), dtype=torch.long, device=META)
    mlm_labels = torch.empty(B * masked_positions(S), dtype=torch.long, device=META)
    nsp_labels = torch.empty(B, dtype=torch.long, device=META)
    return (ids, types, masked), (mlm_labels, nsp_labels)


def _pretraining_loss(out, target):
    logits, nsp = out
    mlm_labels, nsp_labels = target
    return F.cross_entropy(logits, mlm_labels) + F.cross_entropy(nsp, nsp_labels)


def _squad_inputs(B, S):
    ids = torch.empty(B, S, dtype=torch.long, device=META)
    types = torch.empty(B, S, dtype=torch.long, device=META)
    start = torch.empty(B, dtype=torch.long, device=META)
    end = torch.empty(B, dtype=torch.long, device=META)
    return (ids, types), (start, end)


def _squad_loss(out, target):
    (start_logits, end_logits), (start, end) = out, target
    return (F.cross_entropy(start_logits, start) + F.cross_entropy(end_logits, end)) / 2


# ----------------------------------------------------------------------------- GPT-2
class GPT2Block(nn.Module):
    def __init__(self, h, heads, n_pos, drop, eps, sdpa=False):
        super().__init__()
        self.heads = heads
        self.sdpa = sdpa
        self.drop = drop
        self.ln1 = nn.LayerNorm(h, eps=eps, device=META)
        self.c_attn = nn.Linear(h, 3 * h, device=META)
        self.c_proj = nn.Linear(h, h, device=META)
        self.attn_drop = nn.Dropout(drop)
        self.resid_drop = nn.Dropout(drop)
        self.ln2 = nn.LayerNorm(h, eps=eps, device=META)
        self.c_fc = nn.Linear(h, 4 * h, device=META)
        self.c_proj2 = nn.Linear(4 * h, h, device=META)
        self.mlp_drop = nn.Dropout(drop)
        self.register_buffer("bias", torch.empty(1, 1, n_pos, n_pos, dtype=torch.bool,
                                                 device=META), persistent=False)

    def forward(self, x):
        b, s, h = x.shape
        d = h // self.heads
        q, k, v = self.c_attn(self.ln1(x)).split(h, dim=2)
        q = q.view(b, s, self.heads, d).transpose(1, 2)
        k = k.view(b, s, self.heads, d).transpose(1, 2)
        v = v.view(b, s, self.heads, d).transpose(1, 2)
        if self.sdpa:
            a = fz.scaled_dot_product_attention(q, k, v, self.drop, causal=True, training=self.training)
        else:
            w = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(d)
            mask = self.bias[:, :, :s, :s]
            w = torch.where(mask, w, torch.full([], torch.finfo(w.dtype).min, dtype=w.dtype,
                                                device=w.device))
            w = self.attn_drop(F.softmax(w, dim=-1))
            a = torch.matmul(w, v)
        a = a.transpose(1, 2).contiguous().view(b, s, h)
        x = x + self.resid_drop(self.c_proj(a))
        m = self.c_proj2(F.gelu(self.c_fc(self.ln2(x)), approximate="tanh"))
        return x + self.mlp_drop(m)


class GPT2LM(nn.Module):
    def __init__(self, vocab=50257, n_pos=1024, hidden=768, layers=12, heads=12,
                 drop=0.1, eps=1e-5, sdpa=False):
        super().__init__()
        self.wte = nn.Embedding(vocab, hidden, device=META)
        self.wpe = nn.Embedding(n_pos, hidden, device=META)
        self.drop = nn.Dropout(drop)
        self.blocks = nn.ModuleList(GPT2Block(hidden, heads, n_pos, drop, eps, sdpa)
                                    for _ in range(layers))
        self.ln_f = nn.LayerNorm(hidden, eps=eps, device=META)

    def forward(self, ids):
        s = ids.shape[1]
        pos = torch.arange(0, s, dtype=torch.long, device=ids.device).unsqueeze(0)
        x = self.drop(self.wte(ids) + self.wpe(pos))
        for blk in self.blocks:
            x = blk(x)
        x = self.ln_f(x)
        return F.linear(x, self.wte.weight)   # lm_head tied to wte


def _causal_loss(logits, ids):
    shift_logits = logits[..., :-1, :].contiguous()
    shift_labels = ids[..., 1:].contiguous()
    return F.cross_entropy(shift_logits.view(-1, shift_logits.shape[-1]),
                           shift_labels.view(-1))


def _ids_inputs(B, S):
    ids = torch.empty(B, S, dtype=torch.long, device=META)
    return (ids,), ids


# ----------------------------------------------------------------------------- Llama
LLAMA2_7B = {
    "layers": 32, "hidden": 4096, "heads": 32, "kv_heads": 32, "intermediate": 11008,
    "vocab": 32000, "seq": 4096, "rms_eps": 1e-5, "rope_theta": 10000.0,
}


class RMSNorm(nn.Module):
    def __init__(self, h, eps):
        super().__init__()
        self.weight = nn.Parameter(torch.empty(h, device=META))
        self.eps = eps

    def forward(self, x):
        dt = x.dtype
        x = x.to(torch.float32)
        var = x.pow(2).mean(-1, keepdim=True)
        x = x * torch.rsqrt(var + self.eps)
        return self.weight * x.to(dt)


def _rotate_half(x):
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat((-x2, x1), dim=-1)


class LlamaBlock(nn.Module):
    def __init__(self, c, sdpa=False):
        super().__init__()
        self.sdpa = sdpa
        h, self.heads, self.kv = c["hidden"], c["heads"], c.get("kv_heads", c["heads"])
        d = h // self.heads
        self.d = d
        self.norm1 = RMSNorm(h, c["rms_eps"])
        self.q = nn.Linear(h, self.heads * d, bias=False, device=META)
        self.k = nn.Linear(h, self.kv * d, bias=False, device=META)
        self.v = nn.Linear(h, self.kv * d, bias=False, device=META)
        self.o = nn.Linear(self.heads * d, h, bias=False, device=META)
        self.norm2 = RMSNorm(h, c["rms_eps"])
        self.gate = nn.Linear(h, c["intermediate"], bias=False, device=META)
        self.up = nn.Linear(h, c["intermediate"], bias=False, device=META)
        self.down = nn.Linear(c["intermediate"], h, bias=False, device=META)

    def forward(self, x, cos, sin, mask):
        b, s, h = x.shape
        y = self.norm1(x)
        q = self.q(y).view(b, s, self.heads, self.d).transpose(1, 2)
        k = self.k(y).view(b, s, self.kv, self.d).transpose(1, 2)
        v = self.v(y).view(b, s, self.kv, self.d).transpose(1, 2)
        q = q * cos + _rotate_half(q) * sin
        k = k * cos + _rotate_half(k) * sin
        if self.kv != self.heads:  # grouped-query attention
            rep = self.heads // self.kv
            k = k[:, :, None].expand(b, self.kv, rep, s, self.d).reshape(b, self.heads, s, self.d)
            v = v[:, :, None].expand(b, self.kv, rep, s, self.d).reshape(b, self.heads, s, self.d)
        if self.sdpa:
            a = fz.scaled_dot_product_attention(q, k, v, causal=True, training=self.training)
        else:
            w = torch.matmul(q, k.transpose(2, 3)) / math.sqrt(self.d)
            w = w + mask
            w = F.softmax(w, dim=-1, dtype=torch.float32).to(q.dtype)
            a = torch.matmul(w, v)
        a = a.transpose(1, 2).contiguous().view(b, s, h)
        x = x + self.o(a)
        y = self.norm2(x)
        return x + self.down(F.silu(self.gate(y)) * self.up(y))


class LlamaLM(nn.Module):
    def __init__(self, c, sdpa=False):
        super().__init__()
        self.c = dict(c)
        self.sdpa = sdpa
        h = c["hidden"]
        self.embed = nn.Embedding(c["vocab"], h, device=META)
        self.blocks = nn.ModuleList(LlamaBlock(c, sdpa) for _ in range(c["layers"]))
        self.norm = RMSNorm(h, c["rms_eps"])
        self.lm_head = nn.Linear(h, c["vocab"], bias=False, device=META)
        d = h // c["heads"]
        # rotary tables, computed once (as HF's rotary embedding caches them)
        self.register_buffer("cos_cached", torch.empty(c["seq"], d, device=META),
                             persistent=False)
        self.register_buffer("sin_cached", torch.empty(c["seq"], d, device=META),
                             persistent=False)

    def forward(self, ids):
        b, s = ids.shape
        x = self.embed(ids)
        cos = self.cos_cached[:s].to(x.dtype)
        sin = self.sin_cached[:s].to(x.dtype)
        # a causal fused kernel needs no mask tensor
        mask = None if self.sdpa else torch.full((s, s), torch.finfo(x.dtype).min, device=x.device).triu(1)
        for blk in self.blocks:
            x = blk(x, cos, sin, mask)
        return self.lm_head(self.norm(x))


# ----------------------------------------------------------------------------- specs
BERT_BASE = dict(vocab=30522, hidden=768, layers=12, heads=12, inter=3072, max_pos=512)
BERT_LARGE = dict(vocab=30522, hidden=1024, layers=24, heads=16, inter=4096, max_pos=512)
GPT2_SMALL = dict(vocab=50257, n_pos=1024, hidden=768, layers=12, heads=12)
GPT2_MEDIUM = dict(vocab=50257, n_pos=1024, hidden=1024, layers=24, heads=16)


def transformer_specs():
    specs = []
    for name, cfg in (("bert_base", BERT_BASE), ("bert_large", BERT_LARGE)):
        specs.append(ModelSpec(
            name=name, family="transformer", build=(lambda c=cfg: BertMLM(**c)),
            inputs=_bert_inputs, loss=_lm_loss,
            input_desc="token ids + segment ids, S tokens (int64); MLM labels (B,S)",
            default_batch=32, seq=128, config=dict(cfg, dropout=0.1, head="mlm (tied decoder)"),
            notes="masked-LM loss over all S positions (logits for every token, as the "
                  "HF BertForMaskedLM head computes them); no NSP head, no padding mask"))
        specs.append(ModelSpec(
            name=name + "_pretraining", family="transformer",
            build=(lambda c=cfg: BertMLM(**c, head="pretraining")),
            inputs=_bert_pretraining_inputs, loss=_pretraining_loss,
            input_desc="token ids + segment ids, S tokens (int64); 5S/32 masked positions "
                       "per sequence and their labels; next-sentence label",
            default_batch=32, seq=128, fit_seqs=(32, 64, 96, 160),
            config=dict(cfg, dropout=0.1, head="pretraining (masked-only MLM + NSP)",
                        masked_per_seq="5S/32"),
            notes="DeepLearningExamples BertForPreTraining: MLM decoder (tied) on the "
                  "masked positions only (index_select; 20 at S=128, 80 at S=512), pooler "
                  "+ next-sentence head; no padding mask"))
        specs.append(ModelSpec(
            name=name + "_squad", family="transformer",
            build=(lambda c=cfg: BertMLM(**c, head="squad")),
            inputs=_squad_inputs, loss=_squad_loss,
            input_desc="token ids + segment ids, S tokens (int64); answer start and end",
            default_batch=32, seq=384,
            config=dict(cfg, dropout=0.1, head="squad (Linear(h, 2) start/end)"),
            notes="BertForQuestionAnswering: start/end logits from one Linear(h, 2), "
                  "mean of the two cross-entropies; no pooler, no MLM head, no padding mask"))
        # The same heads with fused scale-softmax-dropout, bias-GELU and
        # bias-dropout-residual-LayerNorm chains (tools/tracer/fused.py):
        # --fused softmax,layer_norm,gelu.
        for head, base in (("pretraining", specs[-2]), ("squad", specs[-1])):
            specs.append(ModelSpec(
                name=f"{name}_{head}_fused", family="transformer",
                build=(lambda c=cfg, hd=head: BertMLM(**c, head=hd, fused=True)),
                inputs=base.inputs, loss=base.loss, input_desc=base.input_desc,
                default_batch=base.default_batch, seq=base.seq, fit_seqs=base.fit_seqs,
                config=dict(base.config, fused="scale+softmax+dropout, bias+GELU, bias+dropout+residual+LayerNorm"),
                notes=base.notes + "; fused scale+softmax+dropout (attention scores), bias+GELU and "
                      "bias+dropout+residual-add+LayerNorm kernels (NVFuser / apex / Megatron style), "
                      "bias-free matmuls"))
    for name, cfg in (("gpt2_small", GPT2_SMALL), ("gpt2_medium", GPT2_MEDIUM)):
        specs.append(ModelSpec(
            name=name, family="transformer", build=(lambda c=cfg: GPT2LM(**c)),
            inputs=_ids_inputs, loss=_causal_loss,
            input_desc="token ids, S tokens (int64); next-token labels",
            default_batch=8, seq=1024, config=dict(cfg, dropout=0.1, lm_head="tied"),
            notes="causal-LM loss on shifted tokens; GELU tanh approximation"))
    specs.append(ModelSpec(
        name="llama2_7b", family="transformer",
        build=(lambda: LlamaLM(LLAMA2_7B)), inputs=_ids_inputs, loss=_causal_loss,
        input_desc="token ids, S tokens (int64); next-token labels",
        default_batch=1, seq=4096, config=dict(LLAMA2_7B),
        notes="Llama-2-7B shapes: RMSNorm, rotary embedding, SwiGLU MLP, untied lm_head, "
              "all 32 layers traced; no dropout; eager attention (no flash attention)"))
    # Fused attention (--attention fused): every eager-attention model again
    # with one scaled-dot-product kernel per layer each way (tools/tracer/fused.py).
    sdpa_builds = {"llama2_7b": lambda: LlamaLM(LLAMA2_7B, sdpa=True)}
    for name, cfg in (("gpt2_small", GPT2_SMALL), ("gpt2_medium", GPT2_MEDIUM)):
        sdpa_builds[name] = lambda c=cfg: GPT2LM(**c, sdpa=True)
    for name, cfg in (("bert_base", BERT_BASE), ("bert_large", BERT_LARGE)):
        for head, suffix in (("mlm_all", ""), ("pretraining", "_pretraining"), ("squad", "_squad")):
            sdpa_builds[name + suffix] = lambda c=cfg, hd=head: BertMLM(**c, head=hd, sdpa=True)
    for base in [sp for sp in specs if sp.name in sdpa_builds]:
        specs.append(ModelSpec(
            name=base.name + "_sdpa", family=base.family, build=sdpa_builds[base.name],
            inputs=base.inputs, loss=base.loss, input_desc=base.input_desc,
            default_batch=base.default_batch, seq=base.seq, fit_seqs=base.fit_seqs,
            config=dict(base.config, attention="fused scaled-dot-product kernel"),
            notes=base.notes.replace("; eager attention (no flash attention)", "") +
            "; attention as one fused scaled-dot-product kernel forward and one backward "
            "(FlashAttention / memory-efficient: no S x S tensors)"))
    return specs
