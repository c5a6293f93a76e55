#!/usr/bin/env python3
"""Independent PyTorch reference of the TUPE model (all six positional-encoding variants).

Written from ../shared/docs/tupe-spec.md and the model contract (configuration JSON, parameter
names, fixture format); it shares no code with the C model. Package: torch (PyPI), safetensors.

Variants (contract §1, §3), selected by the configuration's "position" and "untie_cls":
  bert-a    absolute position embedding added to the input (Hugging Face BERT layout)
  bert-r    bert-a plus a T5 relative bias (32 buckets x heads), shared by all layers
  bert-ad   no position in the input; LN(p)·U^Q, LN(p)·U^K added to every layer's Q and K,
            scores scaled by 1/sqrt(4d)
  tupe-a    untied absolute bias B^A (table rows 0/1 = θ1/θ2 vectors), [CLS] reset,
            content scaled by 1/sqrt(2d); untie_cls=false is the paper's TUPE-A tie-cls
  tupe-r    tupe-a plus the 33-bucket relative bias (bucket 16 = [CLS]->others, 32 = others->[CLS])
And the later encodings (../shared/docs/positional-encodings.md §1), written from that note:
  rope      no position in the input; q and k rotated after their projection and bias, per
            head, angle of pair t at position m = m·rope_base^(-2t/d); rope_layout
            "interleaved" pairs (x_2t, x_2t+1) (RoFormer), "half" pairs (x_t, x_t+d/2) (NeoX)
  alibi     no position in the input; -m_h·|i-j| added to the scaled scores, Press et al.'s
            slopes (get_slopes, also for head counts that are not powers of two)
  nope      no positional information

Main API:
  make_config(preset_or_path=None, **overrides) -> dict   (contract §1 JSON, validated)
  TupeModel(config)          nn.Module; state_dict() keys are exactly the contract §2 names
  model(ids, lengths, mask_pos=None, token_type=None) -> dict(hidden, logits, pos_bias)
  model.loss(out, labels)    MLM / classification / regression loss of contract §4
  AdamW(model, **adam)       hand-written fairseq AdamW + LR schedule + clipping (contract §5)
  relative_bucket(...), bucket_table(...)  spec §4
  load_fixture(path, dtype)  -> (model, batch, expected, meta) from tests/fixtures/model/*.safetensors
"""
import json
import math
import os

import torch
import torch.nn as nn
import torch.nn.functional as F

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PRESET_DIR = os.path.join(ROOT, "share", "tupe", "models")

POSITIONS = ("bert-a", "bert-r", "bert-ad", "tupe-a", "tupe-r", "rope", "alibi", "nope")
# The six variants of the paper, as (position, untie_cls).
VARIANTS = {
    "bert-a": ("bert-a", True),
    "bert-r": ("bert-r", True),
    "bert-ad": ("bert-ad", True),
    "tupe-a": ("tupe-a", True),
    "tupe-a-tie": ("tupe-a", False),
    "tupe-r": ("tupe-r", True),
}

# Contract §1, in its key order.
DEFAULT_CONFIG = {
    "model_type": "tupe",
    "position": "tupe-r",
    "untie_cls": True,
    "vocab_size": 0,
    "hidden_size": 768,
    "num_hidden_layers": 12,
    "num_attention_heads": 12,
    "intermediate_size": 3072,
    "max_position_embeddings": 512,
    "type_vocab_size": 0,
    "hidden_act": "gelu",
    "hidden_dropout_prob": 0.1,
    "attention_probs_dropout_prob": 0.1,
    "activation_dropout": 0.0,
    "classifier_dropout": 0.1,
    "layer_norm_eps": 1e-5,
    "initializer_range": 0.02,
    "rel_pos_buckets": 32,
    "max_rel_pos": 128,
    "num_labels": 0,
}
# Only in "rope" configurations (the C side writes them only there).
ROPE_DEFAULTS = {"rope_base": 10000.0, "rope_layout": "interleaved"}


def make_config(preset=None, **overrides):
    """A configuration dict: the preset (name in share/tupe/models or a JSON path), then overrides."""
    cfg = dict(DEFAULT_CONFIG)
    if preset is not None:
        path = preset if os.path.exists(preset) else os.path.join(PRESET_DIR, preset + ".json")
        with open(path) as f:
            cfg.update(json.load(f))
    cfg.update(overrides)
    if cfg["position"] == "rope":
        cfg = dict(ROPE_DEFAULTS, **cfg)
    unknown = set(cfg) - set(DEFAULT_CONFIG) - (set(ROPE_DEFAULTS) if cfg["position"] == "rope" else set())
    if unknown:
        raise ValueError(f"unknown configuration keys: {sorted(unknown)}")
    if cfg["position"] not in POSITIONS:
        raise ValueError(f"position must be one of {POSITIONS}, not {cfg['position']!r}")
    if cfg["hidden_act"] != "gelu":
        raise ValueError("hidden_act must be 'gelu' (exact erf)")
    if cfg["hidden_size"] % cfg["num_attention_heads"]:
        raise ValueError("hidden_size must be a multiple of num_attention_heads")
    if cfg["vocab_size"] <= 0:
        raise ValueError("vocab_size must be set (presets leave it 0: it comes from the vocabulary)")
    if cfg["rel_pos_buckets"] % 4 or cfg["max_rel_pos"] <= cfg["rel_pos_buckets"] // 4:
        raise ValueError("rel_pos_buckets must be a multiple of 4 and max_rel_pos > rel_pos_buckets/4")
    return cfg


# ---- spec §4: relative position buckets ------------------------------------------------------

def relative_bucket(relative_position, num_buckets=32, max_distance=128):
    """T5 bidirectional bucket of relative_position = j - i (key minus query), spec §4.

    Half the buckets per side; keys to the right (j > i) get +num_buckets/2. Within a side,
    n < max_exact = num_buckets/4 maps to n, larger n to max_exact + trunc(ln(n/max_exact) /
    ln(max_distance/max_exact) * max_exact) capped at half-1, computed in float32 as the spec says.
    """
    half = num_buckets // 2
    max_exact = half // 2
    ret = (relative_position > 0).long() * half
    n = relative_position.abs()
    nf = n.clamp(min=1).to(torch.float32)
    large = max_exact + (torch.log(nf / max_exact) / math.log(max_distance / max_exact)
                         * (half - max_exact)).to(torch.long)
    large = large.clamp(max=half - 1)
    return ret + torch.where(n < max_exact, n, large)


def bucket_table(n, num_buckets=32, max_distance=128, cls_buckets=False):
    """[n, n] bucket indices for query i, key j. cls_buckets: the TUPE-R untied form
    (column 0 <- num_buckets, then row 0 <- num_buckets/2, so [0,0] = num_buckets/2)."""
    k = torch.arange(n)
    b = relative_bucket(k[None, :] - k[:, None], num_buckets, max_distance)
    if cls_buckets:
        b[:, 0] = num_buckets
        b[0, :] = num_buckets // 2
    return b


# ---- ALiBi and RoPE (positional-encodings.md §1.1, §1.2) ---------------------------------------

def alibi_slopes(n):
    """Press et al.'s get_slopes (attention_with_linear_biases, fairseq transformer.py)."""
    def pow2(n):
        start = 2 ** (-2 ** -(math.log2(n) - 3))
        return [start * start ** i for i in range(n)]
    if math.log2(n).is_integer():
        return pow2(n)
    c = 2 ** math.floor(math.log2(n))
    return pow2(c) + alibi_slopes(2 * c)[0::2][:n - c]


def alibi_bias(H, T):
    """Symmetric [H, T, T]: -m_h |i - j| (MosaicBERT's rebuild_alibi_tensor)."""
    k = torch.arange(T, dtype=torch.float64)
    dist = (k[None, :] - k[:, None]).abs()
    m = torch.tensor(alibi_slopes(H), dtype=torch.float64)
    return -m[:, None, None] * dist[None]


def rope_rotate(x, base, interleaved):
    """x [B, H, T, d] rotated by position (dim 2). Angles in float64."""
    T, d = x.shape[2], x.shape[3]
    inv = base ** (-torch.arange(0, d, 2, dtype=torch.float64) / d)          # [d/2]
    ang = torch.arange(T, dtype=torch.float64)[:, None] * inv[None, :]         # [T, d/2]
    cos, sin = ang.cos().to(x.dtype), ang.sin().to(x.dtype)
    if interleaved:
        a, b = x[..., 0::2], x[..., 1::2]
        return torch.stack((a * cos - b * sin, b * cos + a * sin), dim=-1).flatten(-2)
    a, b = x[..., : d // 2], x[..., d // 2:]
    return torch.cat((a * cos - b * sin, b * cos + a * sin), dim=-1)


# ---- the model -----------------------------------------------------------------------------

class Embeddings(nn.Module):
    def __init__(self, c):
        super().__init__()
        D = c["hidden_size"]
        self.word_embeddings = nn.Embedding(c["vocab_size"], D)
        if c["position"] in ("bert-a", "bert-r"):
            self.position_embeddings = nn.Embedding(c["max_position_embeddings"], D)
        if c["type_vocab_size"] > 0:
            self.token_type_embeddings = nn.Embedding(c["type_vocab_size"], D)
        self.LayerNorm = nn.LayerNorm(D, eps=c["layer_norm_eps"])
        self.p = c["hidden_dropout_prob"]

    def forward(self, ids, valid, token_type):
        T = ids.shape[1]
        x = self.word_embeddings(ids)
        if hasattr(self, "position_embeddings"):
            x = x + self.position_embeddings.weight[:T]
        if hasattr(self, "token_type_embeddings"):
            tt = token_type if token_type is not None else torch.zeros_like(ids)
            x = x + self.token_type_embeddings(tt)
        x = F.dropout(self.LayerNorm(x), self.p, self.training)
        return x * valid.unsqueeze(-1).to(x.dtype)     # spec §2.5: pad rows zeroed after dropout


class Position(nn.Module):
    """Everything positional that is shared by all layers (contract §2 'position.*')."""

    def __init__(self, c):
        super().__init__()
        D, H = c["hidden_size"], c["num_attention_heads"]
        P = c["max_position_embeddings"]
        self.kind = c["position"]
        self.untie = bool(c["untie_cls"])
        self.H, self.d = H, D // H
        nb, md = c["rel_pos_buckets"], c["max_rel_pos"]
        if self.kind in ("tupe-a", "tupe-r", "bert-ad"):
            rows = P + 1 if self.kind != "bert-ad" else P
            self.embeddings = nn.Embedding(rows, D)
            self.LayerNorm = nn.LayerNorm(D, eps=c["layer_norm_eps"])
            self.query = nn.Linear(D, D)
            self.key = nn.Linear(D, D)
        if self.kind == "tupe-r":
            self.relative_bias = nn.Embedding(nb + 1, H)
            self.register_buffer("buckets", bucket_table(P, nb, md, cls_buckets=self.untie),
                                 persistent=False)
        elif self.kind == "bert-r":
            self.relative_bias = nn.Embedding(nb, H)
            self.register_buffer("buckets", bucket_table(P, nb, md), persistent=False)

    def projections(self, rows):
        """LN(table rows) projected by U^Q and U^K, [n, D] each (no scale)."""
        p = self.LayerNorm(self.embeddings.weight[:rows])
        return self.query(p), self.key(p)

    def absolute_bias(self, T):
        """TUPE's B^A [H, T, T] (spec §3), with the [CLS] reset when untied."""
        H, d = self.H, self.d
        s = (2 * d) ** -0.5
        qp, kp = self.projections(T + 1)
        qp = (qp * s).view(T + 1, H, d).transpose(0, 1)        # [H, T+1, d]
        kp = kp.view(T + 1, H, d).transpose(0, 1)
        a = torch.matmul(qp, kp.transpose(1, 2))                # [H, T+1, T+1]
        inner = a[:, 1:, 1:]
        if not self.untie:
            return inner
        theta1 = a[:, 0, 0].view(H, 1, 1)
        theta2 = a[:, 1, 1].view(H, 1, 1)
        k = torch.arange(T, device=a.device)
        row0 = (k == 0).view(T, 1)
        col0 = (k == 0).view(1, T)
        # Row 0 (including [0,0]) <- θ1, then column 0 below it <- θ2; overwritten entries of A
        # (A[1,1] at B[0,0], A[i+1,1]) get no gradient through where().
        return torch.where(row0, theta1, torch.where(col0, theta2, inner))

    def relative(self, T):
        """R [H, T, T] from the bucket table."""
        return self.relative_bias(self.buckets[:T, :T]).permute(2, 0, 1)

    def forward(self, T):
        """(bias [H,T,T] or None, pq [T,D] or None, pk [T,D] or None)."""
        if self.kind == "bert-r":
            return self.relative(T), None, None
        if self.kind == "bert-ad":
            pq, pk = self.projections(T)
            return None, pq, pk
        bias = self.absolute_bias(T)
        if self.kind == "tupe-r":
            bias = bias + self.relative(T)
        return bias, None, None


class SelfAttention(nn.Module):
    def __init__(self, c):
        super().__init__()
        D = c["hidden_size"]
        self.query = nn.Linear(D, D)
        self.key = nn.Linear(D, D)
        self.value = nn.Linear(D, D)


class DenseLayerNorm(nn.Module):
    """A dense layer and a LayerNorm, the pair behind attention.output, output and the MLM transform."""

    def __init__(self, n_in, n_out, eps):
        super().__init__()
        self.dense = nn.Linear(n_in, n_out)
        self.LayerNorm = nn.LayerNorm(n_out, eps=eps)


class Attention(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.self = SelfAttention(c)
        self.output = DenseLayerNorm(c["hidden_size"], c["hidden_size"], c["layer_norm_eps"])


class Intermediate(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.dense = nn.Linear(c["hidden_size"], c["intermediate_size"])


class Layer(nn.Module):
    """Post-LN block (spec §5)."""

    def __init__(self, c):
        super().__init__()
        self.attention = Attention(c)
        self.intermediate = Intermediate(c)
        self.output = DenseLayerNorm(c["intermediate_size"], c["hidden_size"], c["layer_norm_eps"])
        self.H = c["num_attention_heads"]
        self.p_hidden = c["hidden_dropout_prob"]
        self.p_attn = c["attention_probs_dropout_prob"]
        self.p_act = c["activation_dropout"]

    def forward(self, x, attn_add, scale, pq, pk, sdpa, rope=None):
        B, T, D = x.shape
        H, d = self.H, D // self.H
        sa = self.attention.self
        q, k, v = sa.query(x), sa.key(x), sa.value(x)
        if pq is not None:                    # bert-ad: shared position projections
            q = q + pq
            k = k + pk
        q = q.view(B, T, H, d).transpose(1, 2)
        k = k.view(B, T, H, d).transpose(1, 2)
        v = v.view(B, T, H, d).transpose(1, 2)
        if rope is not None:                  # (base, interleaved)
            q = rope_rotate(q, *rope)
            k = rope_rotate(k, *rope)
        p_attn = self.p_attn if self.training else 0.0
        if sdpa:
            ctx = F.scaled_dot_product_attention(q, k, v, attn_mask=attn_add, dropout_p=p_attn,
                                                 scale=scale)
        else:
            scores = torch.matmul(q * scale, k.transpose(-1, -2)) + attn_add
            probs = F.dropout(torch.softmax(scores, dim=-1), p_attn, self.training)
            ctx = torch.matmul(probs, v)
        ctx = ctx.transpose(1, 2).reshape(B, T, D)
        ao = self.attention.output
        x = ao.LayerNorm(x + F.dropout(ao.dense(ctx), self.p_hidden, self.training))
        h = F.dropout(F.gelu(self.intermediate.dense(x)), self.p_act, self.training)
        o = self.output
        return o.LayerNorm(x + F.dropout(o.dense(h), self.p_hidden, self.training))


class Encoder(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.layer = nn.ModuleList(Layer(c) for _ in range(c["num_hidden_layers"]))


class Predictions(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.transform = DenseLayerNorm(c["hidden_size"], c["hidden_size"], c["layer_norm_eps"])
        self.bias = nn.Parameter(torch.zeros(c["vocab_size"]))


class MLMHead(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.predictions = Predictions(c)


class Classifier(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.dense = nn.Linear(c["hidden_size"], c["hidden_size"])
        self.out_proj = nn.Linear(c["hidden_size"], c["num_labels"])
        self.p = c["classifier_dropout"]


class TupeModel(nn.Module):
    """The encoder with an MLM head (num_labels = 0) or a classification/regression head."""

    def __init__(self, config, sdpa=False):
        super().__init__()
        c = dict(config)
        self.config = c
        self.sdpa = sdpa              # F.scaled_dot_product_attention instead of matmul+softmax
        self.embeddings = Embeddings(c)
        if c["position"] not in ("bert-a", "rope", "alibi", "nope"):
            self.position = Position(c)
        self.encoder = Encoder(c)
        if c["num_labels"] > 0:
            self.classifier = Classifier(c)
        else:
            self.cls = MLMHead(c)
        d = c["hidden_size"] // c["num_attention_heads"]
        self.scale = {"bert-a": d ** -0.5, "bert-r": d ** -0.5, "bert-ad": (4 * d) ** -0.5,
                      "tupe-a": (2 * d) ** -0.5, "tupe-r": (2 * d) ** -0.5, "rope": d ** -0.5,
                      "alibi": d ** -0.5, "nope": d ** -0.5}[c["position"]]
        self.rope = ((c["rope_base"], c["rope_layout"] == "interleaved")
                     if c["position"] == "rope" else None)
        self.init_weights()

    @torch.no_grad()
    def init_weights(self, generator=None):
        """BERT init (spec §5): linear/embedding N(0, σ), biases 0, LayerNorm 1/0."""
        std = self.config["initializer_range"]
        for name, p in self.named_parameters():
            if "LayerNorm" in name:
                p.fill_(1.0 if name.endswith("weight") else 0.0)
            elif name.endswith(".bias"):
                p.zero_()
            else:
                p.normal_(0.0, std, generator=generator)

    def forward(self, ids, lengths, mask_pos=None, token_type=None):
        """ids [B,T] int, lengths [B] int, mask_pos [M] flat b*T+t (MLM head only).

        Returns dict(hidden [B,T,D], logits [M,V] or [B,C] or None, pos_bias [H,T,T] or None).
        """
        B, T = ids.shape
        ids = ids.long()
        valid = torch.arange(T, device=ids.device)[None, :] < lengths.to(ids.device).long()[:, None]
        x = self.embeddings(ids, valid, token_type)
        bias, pq, pk = (None, None, None)
        if hasattr(self, "position"):
            bias, pq, pk = self.position(T)
        elif self.config["position"] == "alibi":
            bias = alibi_bias(self.config["num_attention_heads"], T).to(x.dtype)
        # Key-padding mask plus the shared bias, added to the scores of every layer; built once
        # (autograd sums its gradient over layers and the batch).
        attn_add = torch.zeros(B, 1, 1, T, dtype=x.dtype, device=x.device)
        attn_add = attn_add.masked_fill(~valid[:, None, None, :], float("-inf"))
        if bias is not None:
            attn_add = attn_add + bias.unsqueeze(0)
        for layer in self.encoder.layer:
            x = layer(x, attn_add, self.scale, pq, pk, self.sdpa, self.rope)
        logits = None
        if hasattr(self, "cls"):
            if mask_pos is not None:
                h = x.reshape(B * T, -1)[mask_pos.long()]
                tr = self.cls.predictions.transform
                h = tr.LayerNorm(F.gelu(tr.dense(h)))
                logits = F.linear(h, self.embeddings.word_embeddings.weight, self.cls.predictions.bias)
        else:
            cl = self.classifier
            h = F.dropout(torch.tanh(cl.dense(x[:, 0])), cl.p, self.training)
            logits = cl.out_proj(h)
        return {"hidden": x, "logits": logits, "pos_bias": bias}

    def loss(self, out, labels):
        """Contract §4: mean cross-entropy (MLM, classification) or mean squared error (C = 1)."""
        logits = out["logits"]
        if self.config["num_labels"] == 1:
            return ((logits.squeeze(-1) - labels.to(logits.dtype)) ** 2).mean()
        return F.cross_entropy(logits, labels.long())


# ---- optimizer (contract §5, spec §7) ----------------------------------------------------------

class AdamW:
    """fairseq AdamW by hand: decoupled decay p -= lr·wd·p, then p -= α_t·m/(√v + ε) with
    α_t = lr·√(1-β2^t)/(1-β1^t); global-norm clipping before the update; linear warmup then
    linear decay to 0 at `total`."""

    def __init__(self, model, lr=1e-3, betas=(0.9, 0.999), eps=1e-6, weight_decay=0.01,
                 clip=1.0, warmup=0, total=0, exclude_ln_bias=False):
        self.params = [(n, p) for n, p in model.named_parameters() if p.requires_grad]
        self.lr, self.b1, self.b2, self.eps = lr, betas[0], betas[1], eps
        self.wd, self.clip = weight_decay, clip
        self.warmup, self.total = warmup, total
        self.decay = {n: not (exclude_ln_bias and (n.endswith(".bias") or "LayerNorm" in n))
                      for n, _ in self.params}
        self.m = {n: torch.zeros_like(p) for n, p in self.params}
        self.v = {n: torch.zeros_like(p) for n, p in self.params}
        self.t = 0

    def lr_at(self, t):
        """LR of 1-based step t."""
        if self.warmup > 0 and t <= self.warmup:
            return self.lr * t / self.warmup
        if self.total > self.warmup:
            return self.lr * max(0.0, (self.total - t) / (self.total - self.warmup))
        return self.lr

    @torch.no_grad()
    def grad_norm(self):
        norms = [p.grad.norm() for _, p in self.params if p.grad is not None]
        return torch.linalg.vector_norm(torch.stack(norms)) if norms else torch.zeros(())

    @torch.no_grad()
    def step(self):
        """One update from the parameters' .grad; returns (lr, total grad norm before clipping)."""
        self.t += 1
        t = self.t
        lr = self.lr_at(t)
        total = self.grad_norm()
        coef = None
        if self.clip > 0:
            coef = torch.clamp(self.clip / (total + 1e-6), max=1.0)
        alpha = lr * math.sqrt(1 - self.b2 ** t) / (1 - self.b1 ** t)
        for n, p in self.params:
            if p.grad is None:
                g = torch.zeros_like(p)
            else:
                g = p.grad if coef is None else p.grad * coef
            m, v = self.m[n], self.v[n]
            m.mul_(self.b1).add_(g, alpha=1 - self.b1)
            v.mul_(self.b2).addcmul_(g, g, value=1 - self.b2)
            if self.decay[n] and self.wd != 0:
                p.mul_(1 - lr * self.wd)
            p.addcdiv_(m, v.sqrt().add_(self.eps), value=-alpha)
        return lr, float(total)


# ---- fixtures ----------------------------------------------------------------------------------

def load_fixture(path, dtype=torch.float64):
    """Read a tests/fixtures/model/<case>.safetensors file.

    Returns (model, batch, expected, meta): the model (eval mode, in `dtype`) with the fixture's
    initial parameters; batch = dict(ids, lengths, mask_pos, labels); expected = every out.*,
    grad.*, adam.* tensor (names without the 'param.' ones); meta = dict(config, adam, case, versions)
    with the JSON values decoded.
    """
    from safetensors import safe_open
    with safe_open(path, framework="pt") as f:
        raw = f.metadata()
        tensors = {k: f.get_tensor(k) for k in f.keys()}
    meta = {k: (json.loads(v) if k in ("config", "adam", "versions") else v) for k, v in raw.items()}
    model = TupeModel(meta["config"]).to(dtype).eval()
    params = {k[len("param."):]: v.to(dtype) for k, v in tensors.items() if k.startswith("param.")}
    model.load_state_dict(params, strict=True)
    batch = {
        "ids": tensors["input.ids"], "lengths": tensors["input.lengths"],
        "mask_pos": tensors.get("input.mask_pos"),
        "labels": tensors["input.labels"] if "input.labels" in tensors else tensors["input.mask_label"],
    }
    expected = {k: v for k, v in tensors.items() if not k.startswith(("param.", "input."))}
    return model, batch, expected, meta
