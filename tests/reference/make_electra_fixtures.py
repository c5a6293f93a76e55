#!/usr/bin/env python3
"""ELECTRA fixtures: one training step of a generator + discriminator pair, from Hugging Face
transformers' own ElectraForMaskedLM and ElectraForPreTraining (the independent reference; see
shared/docs/electra.md §4.3), in float64.

Writes tests/fixtures/electra/<case>.safetensors; the case bert-a is ELECTRA exactly (absolute
positions, the only encoding transformers' Electra classes have).

Model: discriminator L2 H64 A2 FFN128, embedding_size 48 (so both networks project the shared
embeddings: 48 -> 64 and 48 -> 32), generator_hidden_size 0.5 (H32, 1 head = 32 // 64 at least
one, FFN 128), vocab 97, 32 positions, every dropout 0, LayerNorm eps 1e-5 (tupe's). The two
networks share the word, position and token-type tables and the embedding LayerNorm, as the
original (`disc.electra.embeddings = gen.electra.embeddings`); the generator's decoder is the
word table. tupe has no token types: the reference's one token-type row is zero and frozen.

Batch: B = 3, T = 16, lengths [16, 11, 6], [CLS] = 2 at 0, [MASK] = 4; 9 masked positions (none
of them [CLS]), 7 of them [MASK] in the generator's input and 2 left as they are (ELECTRA's 15%).
Samples: Gumbel-max over the generator's logits with tupe's noise, Philox4x32-10 re-implemented
here from lib/base/philox.h: stream (step, key = sequence index, tag 8 | position << 8), block
v / 4, u = (x >> 8) / 2^24, g = -log(-log(u + 1e-9) + 1e-9). A sample equal to the original is
"real" (label 0).

Loss: mean MLM cross-entropy over the masked positions + 50 x mean binary cross-entropy over the
non-padding tokens (transformers' means: no +1e-6 in the denominators).

Tensors: input.ids / lengths / mask_pos / mask_label, param.<tupe name> (BF16), out.gen_logits
[M, V], out.samples [M], out.labels [B, T], out.disc_logits [B, T] (0 at padding), out.mlm_loss,
out.rtd_loss, out.loss, grad.<tupe name>, adam.loss [5] and adam.param.<name> after 5 steps of
tupe's AdamW (tupe_ref.AdamW) with the same noise every step; electra_adam.loss [5] and
electra_adam.param.<name> the same from the same start with ELECTRA's optimizer and schedule
(ElectraAdam below, restated from google-research/electra model/optimization.py: no bias
correction, TensorFlow's clip_by_global_norm, the warmup multiplying a polynomial decay that
starts at step 0, no decay of names matching LayerNorm, layer_norm or bias): what
`tupe-pretrain --recipe electra` runs. Metadata: config (tupe's JSON), noise, adam, versions.

Run: python3 tests/reference/make_electra_fixtures.py [--check]
"""
import argparse
import json
import os
import platform
import sys

import numpy as np
import torch
import safetensors
from safetensors.torch import save, load_file

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import tupe_ref as R  # noqa: E402

OUT = os.path.join(R.ROOT, "tests", "fixtures", "electra")

B, T, V, P = 3, 16, 97, 32
LENGTHS = [16, 11, 6]
MASKED = [(0, 1), (0, 4), (0, 9), (0, 15), (1, 2), (1, 7), (1, 10), (2, 1), (2, 5)]
KEPT = {(0, 9), (1, 7)}          # chosen but left unmasked in the generator's input
MASK_ID, CLS_ID = 4, 2
NOISE = {"seed": 7, "step": 3}
LAMBDA = 50.0
D_H, D_L, D_A, D_F, E, FRAC = 64, 2, 2, 128, 48, 0.5
ADAM = {"lr": 1e-3, "betas": [0.9, 0.999], "eps": 1e-6, "weight_decay": 0.01, "clip": 1.0,
        "warmup": 2, "total": 6, "exclude_ln_bias": False}
STEPS = 5
ADAM_PARAMS = ["embeddings.word_embeddings.weight", "embeddings.LayerNorm.bias",
               "generator.encoder.layer.0.attention.self.query.weight",
               "encoder.layer.1.output.dense.weight", "discriminator_predictions.dense_prediction.weight",
               "generator_lm_head.bias"]


class ElectraAdam:
    """google-research/electra's create_optimizer + AdamWeightDecayOptimizer, restated: at the
    global step g (0 before the first update) lr = ((peak - end)(1 - min(g, T)/T)^power + end)
    * min(1, g / W); gradients scaled by clip / max(norm, clip); m, v without bias correction;
    p -= lr (m / (sqrt(v) + eps) + wd p), wd only for names without LayerNorm/layer_norm/bias."""

    def __init__(self, named_params, peak, warmup, total, power=1.0, end=0.0, betas=(0.9, 0.999),
                 eps=1e-6, weight_decay=0.01, clip=1.0):
        self.params = list(named_params.items())
        self.peak, self.warmup, self.total, self.power, self.end = peak, warmup, total, power, end
        self.b1, self.b2, self.eps, self.wd, self.clip = betas[0], betas[1], eps, weight_decay, clip
        self.decay = {n: not any(x in n for x in ("LayerNorm", "layer_norm", "bias"))
                      for n, _ in self.params}
        self.m = {n: torch.zeros_like(p) for n, p in self.params}
        self.v = {n: torch.zeros_like(p) for n, p in self.params}
        self.g = 0

    def lr(self):
        g = min(self.g, self.total)
        lr = (self.peak - self.end) * (1 - g / self.total) ** self.power + self.end
        return lr * min(1.0, self.g / self.warmup) if self.warmup else lr

    @torch.no_grad()
    def step(self):
        lr = self.lr()
        grads = {n: (p.grad if p.grad is not None else torch.zeros_like(p)) for n, p in self.params}
        norm = torch.sqrt(sum((g * g).sum() for g in grads.values()))
        scale = self.clip / torch.maximum(norm, torch.tensor(self.clip, dtype=norm.dtype))
        for n, p in self.params:
            g = grads[n] * scale
            self.m[n].mul_(self.b1).add_(g, alpha=1 - self.b1)
            self.v[n].mul_(self.b2).addcmul_(g, g, value=1 - self.b2)
            u = self.m[n] / (self.v[n].sqrt() + self.eps)
            if self.decay[n]:
                u = u + self.wd * p
            p.sub_(lr * u)
        self.g += 1
        return lr


# ---- tupe's Philox (lib/base/philox.h), vectorized over the blocks --------------------------

M32 = np.uint64(0xFFFFFFFF)


def philox(c0, c1, c2, c3, k0, k1):
    c = [np.asarray(x, dtype=np.uint64) & M32 for x in (c0, c1, c2, c3)]
    k0, k1 = np.uint64(k0), np.uint64(k1)
    for r in range(10):
        if r > 0:
            k0 = (k0 + np.uint64(0x9E3779B9)) & M32
            k1 = (k1 + np.uint64(0xBB67AE85)) & M32
        p0 = np.uint64(0xD2511F53) * c[0]
        p1 = np.uint64(0xCD9E8D57) * c[2]
        hi0, lo0 = p0 >> np.uint64(32), p0 & M32
        hi1, lo1 = p1 >> np.uint64(32), p1 & M32
        c = [hi1 ^ c[1] ^ k0, lo1, hi0 ^ c[3] ^ k1, lo0]
    return c


def gumbel(seed, step, key, pos, n):
    """tupe_electra_sample's noise for one position: n values, float64."""
    blocks = np.arange((n + 3) // 4, dtype=np.uint64)
    k = seed ^ ((key >> 32) * 0x9E3779B97F4A7C15 & 0xFFFFFFFFFFFFFFFF)
    out = philox(blocks, step, key & 0xFFFFFFFF, 8 | (pos << 8), k & 0xFFFFFFFF, k >> 32)
    x = np.stack(out, axis=1).reshape(-1)[:n]
    u = (x >> np.uint64(8)).astype(np.float64) / 16777216.0
    u = u.astype(np.float32).astype(np.float64)     # tupe_u01f is a float
    return -np.log(-np.log(u + 1e-9) + 1e-9)


# ---- the models -------------------------------------------------------------------------------

def hf_configs():
    from transformers import ElectraConfig
    common = dict(vocab_size=V, embedding_size=E, num_hidden_layers=D_L, hidden_act="gelu",
                  hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0,
                  max_position_embeddings=P, type_vocab_size=1, layer_norm_eps=1e-5,
                  pad_token_id=None)
    g_h = round(D_H * FRAC)
    gen = ElectraConfig(hidden_size=g_h, num_attention_heads=max(1, g_h // 64),
                        intermediate_size=4 * g_h, **common)
    disc = ElectraConfig(hidden_size=D_H, num_attention_heads=D_A, intermediate_size=D_F, **common)
    return gen, disc


def tupe_config():
    return {"position": "bert-a", "vocab_size": V, "hidden_size": D_H, "num_hidden_layers": D_L,
            "num_attention_heads": D_A, "intermediate_size": D_F, "max_position_embeddings": P,
            "type_vocab_size": 0, "hidden_dropout_prob": 0.0, "attention_probs_dropout_prob": 0.0,
            "activation_dropout": 0.0, "classifier_dropout": 0.0, "layer_norm_eps": 1e-5,
            "embedding_size": E, "generator_hidden_size": FRAC}


class Pair(torch.nn.Module):
    def __init__(self):
        super().__init__()
        from transformers import ElectraForMaskedLM, ElectraForPreTraining
        gc, dc = hf_configs()
        for c in (gc, dc):
            c._attn_implementation = "eager"
        self.gen = ElectraForMaskedLM(gc)
        self.disc = ElectraForPreTraining(dc)
        self.disc.electra.embeddings = self.gen.electra.embeddings   # shared, as the original
        self.gen.electra.embeddings.token_type_embeddings.weight.requires_grad_(False)


def tupe_name(hf):
    """The pair's parameter names as tupe lays them out (model/electra.h); None: not ours."""
    if "token_type_embeddings" in hf or hf.endswith("generator_lm_head.weight"):
        return None
    for net, pre in (("gen.", "generator."), ("disc.", "")):
        if not hf.startswith(net):
            continue
        n = hf[len(net):]
        if n.startswith("electra.embeddings."):
            return n[len("electra."):]
        if n.startswith("electra."):
            return pre + n[len("electra."):]
        return n      # the heads keep transformers' names
    return None


def named(pair):
    return {tupe_name(k): p for k, p in pair.named_parameters() if tupe_name(k)}


def make_batch(gen):
    ids = torch.randint(5, V, (B, T), generator=gen, dtype=torch.int64)
    ids[:, 0] = CLS_ID
    for b, n in enumerate(LENGTHS):
        ids[b, n:] = 0
    orig = ids.clone()
    for b, t in MASKED:
        if (b, t) not in KEPT:
            ids[b, t] = MASK_ID
    return ids, orig


def step(pair, ids, orig):
    am = torch.zeros(B, T, dtype=torch.int64)
    for b, n in enumerate(LENGTHS):
        am[b, :n] = 1
    pos = [b * T + t for b, t in MASKED]
    labels = torch.full((B, T), -100, dtype=torch.int64)
    for b, t in MASKED:
        labels[b, t] = orig[b, t]
    g = pair.gen(input_ids=ids, attention_mask=am, labels=labels)
    gl = g.logits.reshape(B * T, V)[pos]
    corrupted = orig.clone()
    margins = []
    with torch.no_grad():
        for k, (b, t) in enumerate(MASKED):
            x = gl[k].numpy() + gumbel(NOISE["seed"], NOISE["step"], b, t, V)
            top = np.sort(x)[-2:]
            margins.append(top[1] - top[0])
            corrupted[b, t] = int(np.argmax(x))
    replaced = (corrupted != orig).long() * am
    d = pair.disc(input_ids=corrupted, attention_mask=am)
    # ElectraForPreTraining's own loss casts the labels to float32: the same mean, in float64
    act = am.reshape(-1) == 1
    rtd = torch.nn.functional.binary_cross_entropy_with_logits(
        d.logits.reshape(-1)[act], replaced.reshape(-1)[act].double())
    loss = g.loss + LAMBDA * rtd
    return {"loss": loss, "mlm": g.loss, "rtd": rtd, "gen_logits": gl,
            "samples": corrupted.reshape(-1)[pos], "labels": replaced,
            "disc_logits": d.logits * am, "margin": min(margins)}


def versions():
    import transformers
    return {"python": platform.python_version(), "torch": torch.__version__,
            "transformers": transformers.__version__, "safetensors": safetensors.__version__,
            "numpy": np.__version__}


def make_case():
    torch.manual_seed(0)
    pair = Pair().double().eval()
    gen = torch.Generator().manual_seed(31031)
    params = {}
    for name, p in named(pair).items():
        x = torch.randn(p.shape, generator=gen, dtype=torch.float64) * 0.02
        if "LayerNorm" in name and name.endswith(".weight"):
            x = x + 1.0
        params[name] = x.to(torch.bfloat16)

    def load():
        with torch.no_grad():
            for name, p in named(pair).items():
                p.copy_(params[name].to(torch.float64))
            pair.gen.electra.embeddings.token_type_embeddings.weight.zero_()

    load()
    ids, orig = make_batch(torch.Generator().manual_seed(4343))
    # a sample equal to the original must be "real": make the first [MASK] position's original
    # the token its noise draws (the generator sees [MASK] there, so the draw stays)
    b0, t0 = MASKED[0]
    with torch.no_grad():
        orig[b0, t0] = int(step(pair, ids, orig)["samples"][0])
    out = step(pair, ids, orig)
    assert out["margin"] > 1e-3, f"a sample is nearly tied (margin {out['margin']})"
    out["loss"].backward()
    t = {"input.ids": ids.to(torch.int32), "input.lengths": torch.tensor(LENGTHS, dtype=torch.int32),
         "input.mask_pos": torch.tensor([b * T + tt for b, tt in MASKED], dtype=torch.int32),
         "input.mask_label": torch.tensor([int(orig[b, tt]) for b, tt in MASKED], dtype=torch.int32)}
    for k, v in params.items():
        t["param." + k] = v
    t["out.gen_logits"] = out["gen_logits"].detach().float().contiguous()
    t["out.samples"] = out["samples"].to(torch.int32).contiguous()
    t["out.labels"] = out["labels"].to(torch.int32).contiguous()
    t["out.disc_logits"] = out["disc_logits"].detach().float().contiguous()
    for k in ("loss", "mlm", "rtd"):
        t["out." + ("loss" if k == "loss" else k + "_loss")] = out[k].detach().float().reshape(())
    for k, p in named(pair).items():
        g = p.grad if p.grad is not None else torch.zeros_like(p)
        t["grad." + k] = g.float().contiguous()
    info = {"loss": float(out["loss"].detach()), "mlm": float(out["mlm"].detach()),
            "rtd": float(out["rtd"].detach()),
            "replaced": int(out["labels"].sum()), "margin": float(out["margin"])}

    load()
    pair.zero_grad(set_to_none=True)

    class Flat(torch.nn.Module):     # tupe's names for the optimizer's weight-decay rule
        def __init__(self, d):
            super().__init__()
            self.d = d

        def named_parameters(self, *a, **k):
            return iter(self.d.items())

    def steps(opt, prefix):        # 5 updates from the start: their losses, then the tensors
        losses = []
        for _ in range(STEPS):
            pair.zero_grad(set_to_none=True)
            o = step(pair, ids, orig)
            assert o["margin"] > 1e-3, f"a sample is nearly tied (margin {o['margin']})"
            o["loss"].backward()
            losses.append(float(o["loss"].detach()))
            opt.step()
        t[prefix + ".loss"] = torch.tensor(losses, dtype=torch.float32)
        sd = named(pair)
        for k in ADAM_PARAMS:
            t[prefix + ".param." + k] = sd[k].detach().float().contiguous()
        info[prefix + "_losses"] = losses

    steps(R.AdamW(Flat(named(pair)), lr=ADAM["lr"], betas=ADAM["betas"], eps=ADAM["eps"],
                  weight_decay=ADAM["weight_decay"], clip=ADAM["clip"], warmup=ADAM["warmup"],
                  total=ADAM["total"], exclude_ln_bias=ADAM["exclude_ln_bias"]), "adam")
    # the same 5 steps from the same start with ELECTRA's optimizer (tupe-pretrain --recipe
    # electra); the first update has learning rate 0
    load()
    pair.zero_grad(set_to_none=True)
    steps(ElectraAdam(named(pair), ADAM["lr"], ADAM["warmup"], ADAM["total"], betas=ADAM["betas"],
                      eps=ADAM["eps"], weight_decay=ADAM["weight_decay"], clip=ADAM["clip"]),
          "electra_adam")
    meta = {"config": json.dumps(tupe_config()), "noise": json.dumps(NOISE),
            "adam": json.dumps(ADAM), "case": "bert-a", "versions": json.dumps(versions())}
    return t, meta, info


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--check", action="store_true", help="compare with the committed fixture")
    a = ap.parse_args()
    torch.set_num_threads(1)
    os.makedirs(OUT, exist_ok=True)
    t, meta, info = make_case()
    path = os.path.join(OUT, "bert-a.safetensors")
    if a.check:
        old = load_file(path)
        bad = set(old) ^ set(t) or [k for k in t if not torch.equal(old[k], t[k])]
        print("bert-a: " + ("differs: %s" % sorted(bad)[:5] if bad else "identical"))
        return 1 if bad else 0
    with open(path + ".tmp", "wb") as f:
        f.write(save(t, metadata=meta))
    os.replace(path + ".tmp", path)
    print(f"bert-a: {os.path.getsize(path)} bytes, {info}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
