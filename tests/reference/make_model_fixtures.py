#!/usr/bin/env python3
"""Parity fixtures for the model (contract §6), from the PyTorch reference tupe_ref.py.

Writes tests/fixtures/model/<case>.safetensors for the cases
  bert-a bert-r bert-ad tupe-a tupe-a-tie tupe-r   (MLM head)
  cls-tupe-r (classification, 3 labels)  reg-bert-a (regression, 1 label)
  rope (interleaved, base 10000; also hf.logits from transformers' RoFormerForMaskedLM with the
  same weights)  rope-half (half-split, base 100)  alibi (6 heads of 8, hidden 48: the slope
  rule for a head count that is not a power of two)  nope                 (MLM head)
and tests/fixtures/VERSIONS-model.txt (package versions).

Model: the tiny preset (L2 H64 A2 FFN256) with vocab_size 97, max_position_embeddings 32 and
every dropout 0. Batch: B = 3, T = 16, lengths [16, 11, 6], ids in [5, 97) with [CLS] = 2 at
index 0 and padding id 0; 9 masked positions, one of them position 0 of sequence 0.

Initial parameters are drawn N(0, 0.02) (LayerNorm weights 1 + N(0, 0.02)), rounded to bfloat16
and stored as BF16, so both sides start from values exact in fp32. Everything is then computed
in float64 (torch, CPU) from those values and stored as F32: the fixtures carry no fp32 rounding
of their own, only the final rounding of the stored result.

Tensors (contract §6): input.ids / lengths / mask_pos / mask_label (MLM) or input.labels (heads),
param.<name> (BF16), out.logits, out.loss, out.pos_bias (bert-r and the tupe variants),
grad.<name> for every parameter, adam.loss [5] and adam.param.<name> after 5 AdamW steps.
Metadata: config, adam, case, versions (JSON strings where structured).

Packages: torch, safetensors, numpy (versions in tests/fixtures/VERSIONS-model.txt).
Run from anywhere: python3 tests/reference/make_model_fixtures.py [--check]
  --check  recompute and compare with the committed files instead of writing them.
"""
import argparse
import json
import os
import platform
import sys

import torch
import safetensors
from safetensors.torch import save, load_file

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import tupe_ref as R  # noqa: E402

FIX = os.path.join(R.ROOT, "tests", "fixtures")
OUT = os.path.join(FIX, "model")

B, T, V, P = 3, 16, 97, 32
LENGTHS = [16, 11, 6]
# (sequence, token) of the masked positions: [CLS] of sequence 0, the last valid token of
# sequences 0 and 1, something in every sequence.
MASKED = [(0, 0), (0, 4), (0, 9), (0, 15), (1, 2), (1, 7), (1, 10), (2, 1), (2, 5)]

ADAM = {"lr": 1e-3, "betas": [0.9, 0.999], "eps": 1e-6, "weight_decay": 0.01, "clip": 1.0,
        "warmup": 2, "total": 6, "exclude_ln_bias": False}
STEPS = 5

# case -> (position, untie_cls, num_labels, adam overrides)
CASES = {
    "bert-a": ("bert-a", True, 0, {}),
    "bert-r": ("bert-r", True, 0, {}),
    "bert-ad": ("bert-ad", True, 0, {}),
    "tupe-a": ("tupe-a", True, 0, {}),
    "tupe-a-tie": ("tupe-a", False, 0, {}),
    "tupe-r": ("tupe-r", True, 0, {}),
    "cls-tupe-r": ("tupe-r", True, 3, {}),
    "reg-bert-a": ("bert-a", True, 1, {"exclude_ln_bias": True, "clip": 0.05}),
    "rope": ("rope", True, 0, {}),
    "rope-half": ("rope", True, 0, {}, {"rope_layout": "half", "rope_base": 100.0}),
    "alibi": ("alibi", True, 0, {}, {"hidden_size": 48, "num_attention_heads": 6}),
    "nope": ("nope", True, 0, {}),
}
ADAM_PARAMS = ["embeddings.word_embeddings.weight", "encoder.layer.0.attention.self.query.weight",
               "embeddings.LayerNorm.bias", "position.embeddings.weight",
               "position.relative_bias.weight"]


def versions():
    import numpy
    return {"python": platform.python_version(), "torch": torch.__version__,
            "safetensors": safetensors.__version__, "numpy": numpy.__version__}


def case_config(position, untie, num_labels, extra=None):
    return R.make_config("tiny", vocab_size=V, max_position_embeddings=P, position=position,
                         untie_cls=untie, num_labels=num_labels, hidden_dropout_prob=0.0,
                         attention_probs_dropout_prob=0.0, activation_dropout=0.0,
                         classifier_dropout=0.0, **(extra or {}))


def roformer_logits(cfg, params, batch):
    """The MLM logits of transformers' RoFormerForMaskedLM (interleaved RoPE, base 10000) with
    the same weights: BERT names under roformer., no token types (one all-zero row)."""
    from transformers import RoFormerConfig, RoFormerForMaskedLM
    hc = RoFormerConfig(vocab_size=cfg["vocab_size"], embedding_size=cfg["hidden_size"],
                        hidden_size=cfg["hidden_size"], num_hidden_layers=cfg["num_hidden_layers"],
                        num_attention_heads=cfg["num_attention_heads"],
                        intermediate_size=cfg["intermediate_size"], hidden_act="gelu",
                        hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0,
                        max_position_embeddings=cfg["max_position_embeddings"], type_vocab_size=1,
                        layer_norm_eps=cfg["layer_norm_eps"], rotary_value=False, pad_token_id=0)
    hf = RoFormerForMaskedLM(hc).double().eval()
    sd = {}
    for k, v in params.items():
        sd[k if k.startswith("cls.") else "roformer." + k] = v.to(torch.float64)
    sd["cls.predictions.decoder.weight"] = sd["roformer.embeddings.word_embeddings.weight"]
    sd["cls.predictions.decoder.bias"] = sd["cls.predictions.bias"]
    sd["roformer.embeddings.token_type_embeddings.weight"] = torch.zeros(1, cfg["hidden_size"],
                                                                        dtype=torch.float64)
    missing, unexpected = hf.load_state_dict(sd, strict=False)
    assert not unexpected, unexpected
    assert all("embed_positions" in k for k in missing), missing
    ids, lengths = batch["input.ids"].long(), batch["input.lengths"].long()
    mask = (torch.arange(ids.shape[1])[None, :] < lengths[:, None]).long()
    with torch.no_grad():
        out = hf(input_ids=ids, attention_mask=mask).logits       # [B, T, V]
    return out.reshape(-1, out.shape[-1])[batch["input.mask_pos"].long()]


def make_batch(num_labels, gen):
    ids = torch.randint(5, V, (B, T), generator=gen, dtype=torch.int64)
    ids[:, 0] = 2
    for b, n in enumerate(LENGTHS):
        ids[b, n:] = 0
    batch = {"input.ids": ids.to(torch.int32), "input.lengths": torch.tensor(LENGTHS, dtype=torch.int32)}
    if num_labels == 0:
        batch["input.mask_pos"] = torch.tensor([b * T + t for b, t in MASKED], dtype=torch.int32)
        batch["input.mask_label"] = torch.randint(5, V, (len(MASKED),), generator=gen,
                                                  dtype=torch.int64).to(torch.int32)
    elif num_labels == 1:
        # Values exact in fp32 so that both sides read the same numbers.
        batch["input.labels"] = torch.tensor([0.75, -0.25, 0.5], dtype=torch.float32)
    else:
        batch["input.labels"] = torch.tensor([0, 2, 1], dtype=torch.int32)
    return batch


def init_params(model, gen):
    """Contract §6: N(0, 0.02) everywhere, LayerNorm weights 1 + N(0, 0.02); bf16-rounded."""
    params = {}
    for name, p in model.state_dict().items():
        x = torch.randn(p.shape, generator=gen, dtype=torch.float64) * 0.02
        if "LayerNorm" in name and name.endswith(".weight"):
            x = x + 1.0
        params[name] = x.to(torch.bfloat16)
    return params


def run(model, batch):
    mp = batch.get("input.mask_pos")
    labels = batch["input.labels"] if "input.labels" in batch else batch["input.mask_label"]
    out = model(batch["input.ids"], batch["input.lengths"], mp)
    return out, model.loss(out, labels)


def make_case(case, index):
    position, untie, num_labels, adam_over = CASES[case][:4]
    cfg = case_config(position, untie, num_labels, CASES[case][4] if len(CASES[case]) > 4 else None)
    adam = dict(ADAM, **adam_over)
    gen = torch.Generator().manual_seed(20210 + index)
    batch = make_batch(num_labels, torch.Generator().manual_seed(4242 + num_labels))
    model = R.TupeModel(cfg).double().eval()
    params = init_params(model, gen)
    model.load_state_dict({k: v.to(torch.float64) for k, v in params.items()}, strict=True)

    out, loss = run(model, batch)
    loss.backward()
    t = dict(batch)
    for k, v in params.items():
        t["param." + k] = v
    t["out.logits"] = out["logits"].detach().float()
    t["out.loss"] = loss.detach().float().reshape(())
    if out["pos_bias"] is not None:
        t["out.pos_bias"] = out["pos_bias"].detach().float().contiguous()
    if position == "rope" and cfg["rope_layout"] == "interleaved" and cfg["rope_base"] == 10000:
        hfl = roformer_logits(cfg, params, batch)
        err = float((hfl - out["logits"].detach()).abs().max())
        assert err < 1e-5, f"RoFormer differs from the reference by {err}"
        t["hf.logits"] = hfl.float().contiguous()
        info_hf = err
    else:
        info_hf = None
    for k, p in model.named_parameters():
        g = p.grad if p.grad is not None else torch.zeros_like(p)
        t["grad." + k] = g.float().contiguous()

    # 5 AdamW steps on the same batch from the same start.
    model.load_state_dict({k: v.to(torch.float64) for k, v in params.items()}, strict=True)
    opt = R.AdamW(model, lr=adam["lr"], betas=adam["betas"], eps=adam["eps"],
                  weight_decay=adam["weight_decay"], clip=adam["clip"], warmup=adam["warmup"],
                  total=adam["total"], exclude_ln_bias=adam["exclude_ln_bias"])
    losses, norms = [], []
    for _ in range(STEPS):
        model.zero_grad(set_to_none=True)
        _, l = run(model, batch)
        l.backward()
        losses.append(float(l.detach()))
        norms.append(opt.step()[1])
    t["adam.loss"] = torch.tensor(losses, dtype=torch.float32)
    sd = dict(model.named_parameters())
    for k in ADAM_PARAMS:
        if k in sd:
            t["adam.param." + k] = sd[k].detach().float().contiguous()

    meta = {"config": json.dumps(cfg), "adam": json.dumps(adam), "case": case,
            "versions": json.dumps(versions())}
    info = {"loss": float(loss.detach()), "adam_losses": losses, "grad_norms": norms,
            "roformer": info_hf}
    return t, meta, info


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--check", action="store_true", help="compare with the committed fixtures")
    ap.add_argument("cases", nargs="*", default=list(CASES))
    a = ap.parse_args()
    torch.set_num_threads(max(1, min(2, torch.get_num_threads())))
    os.makedirs(OUT, exist_ok=True)
    bad = 0
    for case in a.cases:
        t, meta, info = make_case(case, list(CASES).index(case))
        path = os.path.join(OUT, case + ".safetensors")
        if a.check:
            old = load_file(path)
            diff = set(old) ^ set(t)
            errs = [k for k in t if k in old and not torch.equal(old[k], t[k])]
            if diff or errs:
                bad += 1
                print(f"{case}: differs: {sorted(diff)} {errs[:5]}")
            else:
                print(f"{case}: identical")
            continue
        with open(path + ".tmp", "wb") as f:
            f.write(save(t, metadata=meta))
        os.replace(path + ".tmp", path)
        print(f"{case}: {os.path.getsize(path)} bytes, loss {info['loss']:.6f}, "
              f"adam losses {[round(x, 6) for x in info['adam_losses']]}, "
              f"grad norms {[round(x, 4) for x in info['grad_norms']]}"
              + (f", RoFormer's logits within {info['roformer']:.2g}" if info["roformer"] is not None else ""))
    if not a.check:
        with open(os.path.join(FIX, "VERSIONS-model.txt"), "w") as f:
            try:
                import transformers
                tv = transformers.__version__
            except ImportError:
                tv = "not installed"
            v = versions()
            f.write(f"python {v['python']}\nnumpy {v['numpy']}\ntorch {v['torch']}\n"
                    f"safetensors {v['safetensors']}\n"
                    f"transformers {tv} (check_model_fixtures.py, and hf.logits of the rope case)\n")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
