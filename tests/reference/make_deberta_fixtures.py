#!/usr/bin/env python3
"""Parity fixtures for --position deberta (tests/fixtures/deberta/), computed by transformers'
own DebertaV2ForMaskedLM (DeBERTa v3's configuration: relative_attention, pos_att_type
p2c|c2p, share_att_key, norm_rel_ebd layer_norm, position_biased_input false, log buckets) in
float64, with the same weights as tupe's model under tupe's names.

    /work/venv/bin/python tests/reference/make_deberta_fixtures.py [--check]

Writes
  deberta.safetensors  the model fixture in the layout of tests/fixtures/model (test_parity):
      the tiny preset (L2 H64 A2 FFN256), vocab 97, max_position_embeddings 32, every dropout
      0, position_buckets (rel_pos_buckets) 8 and max_relative_positions (max_rel_pos) 12, so
      that T = 16 has exact rows (|i-j| <= 4), log rows and clamped rows; the batch of
      make_model_fixtures.py (B 3, T 16, lengths 16 11 6, 9 masked positions); param.* (BF16,
      tupe's names), out.logits, out.loss (mean cross-entropy of the masked positions),
      grad.* of every parameter, adam.loss and adam.param.* after 5 AdamW steps of
      tupe_ref.AdamW (tupe's optimizer) over transformers' model; hf.attn.L [B,H,T,T]: the
      attention probabilities of layer L (output_attentions; rows past a sequence's length are
      transformers' own and are not compared)
  buckets.safetensors  make_log_bucket_position(r, k, m) for r in [-1100, 1100] at
      (k, m) = (8, 12), (32, 128), (64, 128), (256, 512) (DeBERTa v3 base): "b.K.M" int32
  hf-deberta/          a DebertaV2ForMaskedLM built by transformers from torch seed 19 (hidden 32,
                       2 layers, 2 heads, FFN 64, 32 positions, 2 token types, layer_norm_eps
                       1e-7, position_buckets 8, max_relative_positions 10: T = 12 reaches log
                       and clamped rows; every parameter random), saved with save_pretrained,
                       and ../convert/vocab.txt
  hf-deberta.logits.safetensors, hf-deberta-types.logits.safetensors  its masked-LM logits on
                       ../convert/input.safetensors (token type 0; then type 1 from position 4,
                       ../roformer/input-types.safetensors), valid rows
  hf-deberta-bare/     its encoder as a DebertaV2Model (no "deberta." prefix, no head)
  hf-deberta-v3head/   the same weights with legacy false (lm_predictions.lm_head.*, the newer
                       head): the same logits
  hf-deberta-cls/      a DebertaV2ForSequenceClassification (import refuses its ContextPooler)
  deberta/             a deberta checkpoint made by `tupe-modeltool init` (../convert/tiny.json
                       with position deberta, rel_pos_buckets 8, max_rel_pos 10, seed 21)
  deberta.files        sha256 of what `tupe-convert export --to hf` writes from it
  deberta.logits.safetensors  what transformers' AutoModelForMaskedLM (DebertaV2ForMaskedLM)
                       computed from that export on the padded batch, valid rows (make check
                       compares tupe's, 1e-4)
  VERSIONS             package versions, and the largest differences measured

    --build DIR        the build holding tupe-convert and tests/tupe-modeltool (default: the
                       newest build/*/)
"""
import argparse
import glob
import json
import os
import shutil
import subprocess
import sys
import tempfile

import numpy as np

import torch
from safetensors.torch import save, load_file

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import tupe_ref as R  # noqa: E402
import make_model_fixtures as MF  # noqa: E402
from make_roformer_fixtures import logits as hf_logits  # noqa: E402
from fixture_io import run, save_logits, versions, write_versions  # noqa: E402

OUT = os.path.join(R.ROOT, "tests", "fixtures", "deberta")
K, MAXREL = 8, 12
BUCKETS = [(8, 12), (32, 128), (64, 128), (256, 512)]


def tupe_config():
    cfg = json.loads(open(os.path.join(R.ROOT, "share", "tupe", "models", "tiny.json")).read())
    cfg.update(position="deberta", vocab_size=MF.V, max_position_embeddings=MF.P,
               hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0,
               activation_dropout=0.0, classifier_dropout=0.0, rel_pos_buckets=K,
               max_rel_pos=MAXREL)
    return cfg


def hf_config(cfg):
    from transformers import DebertaV2Config
    return DebertaV2Config(
        vocab_size=cfg["vocab_size"], hidden_size=cfg["hidden_size"],
        num_hidden_layers=cfg["num_hidden_layers"], num_attention_heads=cfg["num_attention_heads"],
        intermediate_size=cfg["intermediate_size"], hidden_act="gelu", hidden_dropout_prob=0.0,
        attention_probs_dropout_prob=0.0, max_position_embeddings=cfg["max_position_embeddings"],
        type_vocab_size=cfg["type_vocab_size"], layer_norm_eps=cfg["layer_norm_eps"],
        relative_attention=True, position_buckets=cfg["rel_pos_buckets"],
        max_relative_positions=cfg["max_rel_pos"], pos_att_type="p2c|c2p", share_att_key=True,
        norm_rel_ebd="layer_norm", position_biased_input=False, pad_token_id=0, legacy=True)


def hf_name(n):
    """tupe's parameter name -> DebertaV2ForMaskedLM's (legacy head)."""
    if n.startswith("cls."):
        return n
    if n == "position.rel_embeddings.weight":
        return "deberta.encoder.rel_embeddings.weight"
    if n.startswith("position.rel_embeddings.LayerNorm."):
        return "deberta.encoder.LayerNorm." + n.rsplit(".", 1)[1]
    for a, b in ((".self.query.", ".self.query_proj."), (".self.key.", ".self.key_proj."),
                 (".self.value.", ".self.value_proj.")):
        n = n.replace(a, b)
    return "deberta." + n


def tupe_names(cfg):
    """tupe's parameter names and shapes, from tupe_ref's layout of the same tensors: the MLM
    model without the positional ones, plus DeBERTa's table and its LayerNorm."""
    ref = R.TupeModel(dict(cfg, position="nope"))
    names = {k: tuple(v.shape) for k, v in ref.state_dict().items()}
    D = cfg["hidden_size"]
    names["position.rel_embeddings.weight"] = (2 * cfg["rel_pos_buckets"], D)
    names["position.rel_embeddings.LayerNorm.weight"] = (D,)
    names["position.rel_embeddings.LayerNorm.bias"] = (D,)
    return names


def forward(hf, batch, attentions=False):
    ids, lengths = batch["input.ids"].long(), batch["input.lengths"].long()
    mask = (torch.arange(ids.shape[1])[None, :] < lengths[:, None]).long()
    out = hf(input_ids=ids, attention_mask=mask, output_attentions=attentions)
    logits = out.logits.reshape(-1, out.logits.shape[-1])[batch["input.mask_pos"].long()]
    loss = torch.nn.functional.cross_entropy(logits, batch["input.mask_label"].long())
    return logits, loss, out.attentions


def make_model_fixture():
    from transformers import DebertaV2ForMaskedLM
    cfg = tupe_config()
    hf = DebertaV2ForMaskedLM(hf_config(cfg)).double().eval()
    hp = dict(hf.named_parameters())
    names = tupe_names(cfg)
    assert sorted(hf_name(n) for n in names) == sorted(hp), (
        sorted(set(hf_name(n) for n in names) ^ set(hp)))
    gen = torch.Generator().manual_seed(20230)
    params = {}
    for n in sorted(names):
        x = torch.randn(names[n], generator=gen, dtype=torch.float64) * 0.02
        if "LayerNorm" in n and n.endswith(".weight"):
            x = x + 1.0
        params[n] = x.to(torch.bfloat16)
    sd = {hf_name(n): v.to(torch.float64) for n, v in params.items()}

    def load():
        with torch.no_grad():
            for k, p in hf.named_parameters():
                p.copy_(sd[k])
    load()
    batch = MF.make_batch(0, torch.Generator().manual_seed(4242))
    logits, loss, attn = forward(hf, batch, attentions=True)
    loss.backward()
    t = dict(batch)
    for n, v in params.items():
        t["param." + n] = v
    t["out.logits"] = logits.detach().float().contiguous()
    t["out.loss"] = loss.detach().float().reshape(())
    for n in names:
        g = hp[hf_name(n)].grad
        t["grad." + n] = (g if g is not None else torch.zeros(names[n])).float().contiguous()
    for l, a in enumerate(attn):
        t[f"hf.attn.{l}"] = a.detach().float().contiguous()

    load()
    adam = dict(MF.ADAM)
    opt = R.AdamW(hf, lr=adam["lr"], betas=adam["betas"], eps=adam["eps"],
                  weight_decay=adam["weight_decay"], clip=adam["clip"], warmup=adam["warmup"],
                  total=adam["total"], exclude_ln_bias=adam["exclude_ln_bias"])
    losses = []
    for _ in range(MF.STEPS):
        hf.zero_grad(set_to_none=True)
        _, l, _ = forward(hf, batch)
        l.backward()
        losses.append(float(l.detach()))
        opt.step()
    t["adam.loss"] = torch.tensor(losses, dtype=torch.float32)
    for n in ("embeddings.word_embeddings.weight", "encoder.layer.0.attention.self.query.weight",
              "encoder.layer.1.attention.self.key.bias", "position.rel_embeddings.weight",
              "position.rel_embeddings.LayerNorm.weight"):
        t["adam.param." + n] = hp[hf_name(n)].detach().float().contiguous()
    meta = {"config": json.dumps(cfg), "adam": json.dumps(adam), "case": "deberta",
            "versions": json.dumps(versions())}
    return t, meta, {"loss": float(loss.detach()), "adam_losses": losses}


def make_buckets():
    from transformers.models.deberta_v2.modeling_deberta_v2 import make_log_bucket_position
    r = torch.arange(-1100, 1101, dtype=torch.long)
    return {f"b.{k}.{m}": make_log_bucket_position(r, k, m).to(torch.int32).contiguous()
            for k, m in BUCKETS}


CONV = os.path.join(R.ROOT, "tests", "fixtures", "convert")
HFK, HFM, HFV = 8, 10, 60


def hf_small(**kw):
    from transformers import DebertaV2Config
    base = dict(vocab_size=HFV, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                intermediate_size=64, max_position_embeddings=32, type_vocab_size=2,
                layer_norm_eps=1e-7, pad_token_id=0, hidden_act="gelu", relative_attention=True,
                position_buckets=HFK, max_relative_positions=HFM, pos_att_type="p2c|c2p",
                share_att_key=True, norm_rel_ebd="layer_norm", position_biased_input=False,
                legacy=True)
    base.update(kw)
    return DebertaV2Config(**base)


def randomize(model, seed):
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            p.copy_(torch.randn(p.shape, generator=g) * 0.05 +
                    (1.0 if name.endswith("LayerNorm.weight") else 0.0))


def hf_dirs(ids, lengths, types):
    """DebertaV2 directories saved by transformers, for import."""
    from transformers import (DebertaV2ForMaskedLM, DebertaV2ForSequenceClassification,
                              DebertaV2Model)
    for d in ("hf-deberta", "hf-deberta-bare", "hf-deberta-v3head", "hf-deberta-cls"):
        shutil.rmtree(os.path.join(OUT, d), ignore_errors=True)
    torch.manual_seed(19)
    m = DebertaV2ForMaskedLM(hf_small()).eval()
    randomize(m, 19)
    hf = os.path.join(OUT, "hf-deberta")
    m.save_pretrained(hf)
    shutil.copy(os.path.join(CONV, "vocab.txt"), hf)
    m2 = DebertaV2ForMaskedLM.from_pretrained(hf).eval()
    lg = hf_logits(m2, ids, lengths, np.zeros_like(ids))
    save_logits(os.path.join(OUT, "hf-deberta.logits.safetensors"), lg)
    save_logits(os.path.join(OUT, "hf-deberta-types.logits.safetensors"),
                hf_logits(m2, ids, lengths, types))
    bare = DebertaV2Model(hf_small()).eval()
    bare.load_state_dict(m.deberta.state_dict())
    bare.save_pretrained(os.path.join(OUT, "hf-deberta-bare"))
    assert not any(k.startswith("deberta.") for k in
                   load_file(os.path.join(OUT, "hf-deberta-bare", "model.safetensors")))
    v3 = DebertaV2ForMaskedLM(hf_small(legacy=False)).eval()
    sd = {k: v for k, v in m.state_dict().items() if not k.startswith("cls.")}
    pre = "cls.predictions."
    sd["lm_predictions.lm_head.dense.weight"] = m.state_dict()[pre + "transform.dense.weight"]
    sd["lm_predictions.lm_head.dense.bias"] = m.state_dict()[pre + "transform.dense.bias"]
    sd["lm_predictions.lm_head.LayerNorm.weight"] = m.state_dict()[pre + "transform.LayerNorm.weight"]
    sd["lm_predictions.lm_head.LayerNorm.bias"] = m.state_dict()[pre + "transform.LayerNorm.bias"]
    sd["lm_predictions.lm_head.bias"] = m.state_dict()[pre + "bias"]
    missing, unexpected = v3.load_state_dict(sd, strict=False)
    assert not unexpected and not missing, (missing, unexpected)
    v3dir = os.path.join(OUT, "hf-deberta-v3head")
    v3.save_pretrained(v3dir)
    shutil.copy(os.path.join(CONV, "vocab.txt"), v3dir)
    v3err = float(np.abs(hf_logits(v3, ids, lengths, np.zeros_like(ids)) - lg).max())
    assert v3err < 1e-5, v3err
    torch.manual_seed(20)
    c = DebertaV2ForSequenceClassification(hf_small(num_labels=2)).eval()
    randomize(c, 20)
    c.save_pretrained(os.path.join(OUT, "hf-deberta-cls"))


def export_case(build, ids, lengths):
    """A deberta checkpoint -> DebertaV2ForMaskedLM: the export's hashes and transformers'
    logits."""
    import make_hf_fixtures as hfx
    conv = os.path.join(build, "bin", "tupe-convert")
    tool = os.path.join(build, "tests", "tupe-modeltool")
    tiny = json.load(open(os.path.join(CONV, "tiny.json")))
    ck = os.path.join(OUT, "deberta")
    shutil.rmtree(ck, ignore_errors=True)
    with tempfile.TemporaryDirectory() as d:
        mj = os.path.join(d, "deberta.json")
        json.dump(dict(tiny, position="deberta", rel_pos_buckets=HFK, max_rel_pos=HFM), open(mj, "w"))
        run(tool, "init", "--model", mj, "--vocab-size", HFV, "--seed", 21, "-o", ck,
            stdout=subprocess.DEVNULL)
        hf = os.path.join(d, "deberta-hf")
        run(conv, "export", "--to", "hf", ck, "-o", hf, "--vocab", os.path.join(CONV, "vocab.txt"))
        assert json.load(open(os.path.join(hf, "config.json")))["model_type"] == "deberta-v2"
        with open(os.path.join(OUT, "deberta.files"), "w") as f:
            f.write("".join(l for l in hfx.export_files(hf).splitlines(True) if "  ." not in l))
        from transformers import AutoModelForMaskedLM
        # hf_outputs' checks would fail on DeBERTa's padded query rows, which attend to
        # everything (its mask is the outer product of the key mask): valid rows only here
        lg = hf_logits(AutoModelForMaskedLM.from_pretrained(hf).eval(), ids, lengths,
                       np.zeros_like(ids))
        save_logits(os.path.join(OUT, "deberta.logits.safetensors"), lg)
        mine = os.path.join(d, "deberta.tupe.safetensors")
        run(tool, "logits", "-c", ck, "--input", os.path.join(CONV, "input.safetensors"), "-o",
            mine, stdout=subprocess.DEVNULL)
        worst = float(np.abs(load_file(mine)["logits"].numpy() - lg).max())
        assert worst <= 1e-4, worst
    return worst


def write(path, t, meta=None):
    with open(path + ".tmp", "wb") as f:
        f.write(save(t, metadata=meta))
    os.replace(path + ".tmp", path)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--check", action="store_true", help="compare with the committed fixtures")
    ap.add_argument("--build", help="build directory (default: the newest build/*/)")
    a = ap.parse_args()
    torch.set_num_threads(max(1, min(2, torch.get_num_threads())))
    os.makedirs(OUT, exist_ok=True)
    t, meta, info = make_model_fixture()
    bk = make_buckets()
    if a.check:
        bad = 0
        for name, new in (("deberta", t), ("buckets", bk)):
            old = load_file(os.path.join(OUT, name + ".safetensors"))
            if set(old) != set(new) or any(not torch.equal(old[k], new[k]) for k in new):
                print(f"{name}: differs")
                bad += 1
            else:
                print(f"{name}: identical")
        return 1 if bad else 0
    write(os.path.join(OUT, "deberta.safetensors"), t, meta)
    write(os.path.join(OUT, "buckets.safetensors"), bk)
    inp = load_file(os.path.join(CONV, "input.safetensors"))
    ids, lengths = inp["input.ids"].numpy(), inp["input.lengths"].numpy()
    types = load_file(os.path.join(R.ROOT, "tests", "fixtures", "roformer",
                                   "input-types.safetensors"))["input.types"].numpy()
    hf_dirs(ids, lengths, types)
    build = a.build or max(glob.glob(os.path.join(R.ROOT, "build", "*", "")), key=os.path.getmtime)
    worst = export_case(build, ids, lengths)
    write_versions(os.path.join(OUT, "VERSIONS"),
                   f"export: max abs logits difference, tupe - transformers: {worst:.3g}")
    print(f"deberta: loss {info['loss']:.6f}, adam losses "
          f"{[round(x, 6) for x in info['adam_losses']]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
