#!/usr/bin/env python3
"""Fixtures for `tupe-convert import --from hf` of RoFormer checkpoints and `export --to hf` of
rope models (tests/fixtures/roformer/), made with Hugging Face `transformers`, `torch` and
`safetensors` from PyPI and the built tupe-convert and tests/tupe-modeltool (`make tests` first;
--build names the build directory, default the newest under build/). The inputs and the
vocabulary are tests/fixtures/convert's (make_convert_fixtures.py), read, not written.

    /work/venv/bin/python tests/reference/make_roformer_fixtures.py

Writes:
  hf-roformer/                  a RoFormerForMaskedLM built by transformers from torch seed 9
                                (hidden 32, 2 layers, 2 heads, FFN 64, 32 positions,
                                type_vocab_size 2, layer_norm_eps 1e-12, every parameter drawn at
                                random but its frozen sinusoidal table), saved with
                                save_pretrained, and vocab.txt
  hf-roformer.logits.safetensors  "logits" [M, 60]: its masked-LM logits on
                                ../convert/input.safetensors (token type 0, right-padded batch),
                                rows = the valid positions in (sequence, position) order
  hf-roformer-types.logits.safetensors  the same with token type 1 from position 4 on, and
  input-types.safetensors       those inputs (input.ids, input.lengths, input.types)
  hf-roformer-bare/             its encoder as a RoFormerModel (names without "roformer.", no
                                masked-LM head)
  hf-roformer-cls/              a RoFormerForSequenceClassification (its head applies GELU where
                                tupe's applies tanh: import refuses it)
  bad/sinusoid/                 hf-roformer with one value of its sinusoidal table changed
                                (row 3, column 1): import refuses it, naming the place
  rope/, rope-half/             rope checkpoints made by `tupe-modeltool init` (the tiny
                                configuration; rope interleaved with 2 token types, seed 12;
                                rope half-split without token types, seed 13)
  CASE.files                    sha256 of every file `tupe-convert export --to hf` writes from
                                it (config.json without its tupe_version line)
  CASE.logits.safetensors       what RoFormerForMaskedLM (AutoModelForMaskedLM) computed from
                                that export on the padded batch (input-types for rope, input
                                for rope-half), valid rows; make check compares tupe's (1e-4)
  VERSIONS                      the package versions used, the largest differences measured
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
from safetensors.torch import load_file, save_file

from fixture_io import run, save_logits, write_versions

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
OUT = os.path.join(ROOT, "tests", "fixtures", "roformer")
CONV = os.path.join(ROOT, "tests", "fixtures", "convert")
V = 60


def config(**kw):
    from transformers import RoFormerConfig
    base = dict(vocab_size=V, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                intermediate_size=64, max_position_embeddings=32, type_vocab_size=2,
                layer_norm_eps=1e-12, pad_token_id=0)
    base.update(kw)
    return RoFormerConfig(**base)


def randomize(model, seed):
    """Every parameter random (RoFormer's frozen sines and cosines excepted), so that no mapping
    error hides behind a 0 or a 1."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "embed_positions" in name:
                continue
            p.copy_(torch.randn(p.shape, generator=g) * 0.05 + (1.0 if name.endswith("LayerNorm.weight") else 0.0))


def logits(model, ids, lengths, types):
    t = torch.from_numpy(ids).long()
    am = (torch.arange(t.shape[1])[None, :] < torch.from_numpy(lengths)[:, None]).long()
    with torch.no_grad():
        out = model(input_ids=t, attention_mask=am, token_type_ids=torch.from_numpy(types).long()).logits
        for b, n in enumerate(lengths):       # padding changes nothing
            alone = model(input_ids=t[b:b + 1, :n], token_type_ids=torch.from_numpy(types[b:b + 1, :n]).long()).logits
            assert float((alone[0] - out[b, :n]).abs().max()) < 1e-5
    return np.concatenate([out[b, :n].numpy() for b, n in enumerate(lengths)], axis=0)


def export_cases(build, out, ids, lengths, types):
    """rope models -> RoFormerForMaskedLM: the export's hashes and transformers' logits."""
    sys.path.insert(0, HERE)
    import make_hf_fixtures as hfx
    conv = os.path.join(build, "bin", "tupe-convert")
    tool = os.path.join(build, "tests", "tupe-modeltool")
    tiny = json.load(open(os.path.join(CONV, "tiny.json")))
    worst = {}
    with tempfile.TemporaryDirectory() as d:
        for name, seed, extra, ntypes in (("rope", 12, {}, 2), ("rope-half", 13, {"rope_layout": "half"}, 0)):
            mj = os.path.join(d, name + ".json")
            json.dump(dict(tiny, position="rope", **extra), open(mj, "w"))
            ck = os.path.join(out, name)
            run(tool, "init", "--model", mj, "--vocab-size", V, "--seed", seed, "--types", ntypes,
                "-o", ck, stdout=subprocess.DEVNULL)
            hf = os.path.join(d, name + "-hf")
            run(conv, "export", "--to", "hf", ck, "-o", hf, "--vocab", os.path.join(CONV, "vocab.txt"))
            assert json.load(open(os.path.join(hf, "config.json")))["model_type"] == "roformer"
            with open(os.path.join(out, name + ".files"), "w") as f:
                # the dot files (the directory's kind and contents, base/outdir.h) are tupe's own
                f.write("".join(l for l in hfx.export_files(hf).splitlines(True) if "  ." not in l))
            t = types if ntypes else np.zeros_like(types)
            lg = hfx.hf_outputs(hf, ids, lengths, t, 0)
            save_logits(os.path.join(out, name + ".logits.safetensors"), lg)
            mine = os.path.join(d, name + ".tupe.safetensors")
            run(tool, "logits", "-c", ck, "--input",
                os.path.join(out, "input-types.safetensors") if ntypes else os.path.join(CONV, "input.safetensors"),
                "-o", mine, stdout=subprocess.DEVNULL)
            worst[name] = float(np.abs(load_file(mine)["logits"].numpy() - lg).max())
            assert worst[name] <= 1e-4, (name, worst[name])
    return worst


def main():
    from transformers import RoFormerForMaskedLM, RoFormerForSequenceClassification, RoFormerModel

    global OUT
    ap = argparse.ArgumentParser(description="make tests/fixtures/roformer")
    ap.add_argument("--build", help="build directory (default: the newest build/*/)")
    ap.add_argument("--out", default=OUT, help="where to write (default %(default)s)")
    a = ap.parse_args()
    OUT = a.out
    build = a.build or max(glob.glob(os.path.join(ROOT, "build", "*", "")), key=os.path.getmtime)
    shutil.rmtree(OUT, ignore_errors=True)
    os.makedirs(OUT)
    inp = load_file(os.path.join(CONV, "input.safetensors"))
    ids, lengths = inp["input.ids"].numpy(), inp["input.lengths"].numpy()
    types = np.zeros_like(ids)
    types[:, 4:] = 1
    save_file({"input.ids": inp["input.ids"], "input.lengths": inp["input.lengths"],
               "input.types": torch.from_numpy(types)},
              os.path.join(OUT, "input-types.safetensors"), metadata={"format": "pt"})

    torch.manual_seed(9)
    m = RoFormerForMaskedLM(config()).eval()
    randomize(m, 9)
    m.tie_weights()
    hf = os.path.join(OUT, "hf-roformer")
    m.save_pretrained(hf)
    shutil.copy(os.path.join(CONV, "vocab.txt"), hf)
    sd = load_file(os.path.join(hf, "model.safetensors"))
    assert "roformer.encoder.embed_positions.weight" in sd, sorted(sd)
    # what was saved is what was computed
    m2 = RoFormerForMaskedLM.from_pretrained(hf).eval()
    save_logits(os.path.join(OUT, "hf-roformer.logits.safetensors"),
                logits(m2, ids, lengths, np.zeros_like(ids)))
    save_logits(os.path.join(OUT, "hf-roformer-types.logits.safetensors"),
                logits(m2, ids, lengths, types))

    bare = RoFormerModel(config()).eval()
    bare.load_state_dict(m.roformer.state_dict())
    bare.save_pretrained(os.path.join(OUT, "hf-roformer-bare"))
    assert not any(k.startswith("roformer.") for k in
                   load_file(os.path.join(OUT, "hf-roformer-bare", "model.safetensors")))

    bad = os.path.join(OUT, "bad", "sinusoid")
    os.makedirs(bad)
    sd = load_file(os.path.join(hf, "model.safetensors"))
    sd["roformer.encoder.embed_positions.weight"][3, 1] += 0.01
    save_file(sd, os.path.join(bad, "model.safetensors"), metadata={"format": "pt"})
    shutil.copy(os.path.join(hf, "config.json"), bad)

    torch.manual_seed(10)
    c = RoFormerForSequenceClassification(config(num_labels=2)).eval()
    randomize(c, 10)
    c.save_pretrained(os.path.join(OUT, "hf-roformer-cls"))

    worst = export_cases(build, OUT, ids, lengths, types)
    write_versions(os.path.join(OUT, "VERSIONS"), "export: max abs logits difference, tupe - "
                   "transformers: %s" % ", ".join("%s %.3g" % kv for kv in worst.items()))
    print("wrote", OUT)


if __name__ == "__main__":
    main()
