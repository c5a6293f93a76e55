#!/usr/bin/env python3
"""Fixtures for `tupe-convert export --to hf` / `import --from hf` of ELECTRA pairs
(tests/fixtures/electra/hf/), checked with Hugging Face `transformers` (ElectraForPreTraining,
ElectraForMaskedLM, ElectraModel, AutoModelForSequenceClassification), `torch` and `safetensors`
from PyPI and the built tupe-convert and tests/tupe-modeltool (`make tests` first; --build names
the build directory, default the newest under build/). The inputs and the vocabulary are
tests/fixtures/convert's and tests/fixtures/roformer's input-types, read, not written.

    /work/venv/bin/python tests/reference/make_hfelectra_fixtures.py

Writes, for each CASE:
  pair             a BERT-A pair made by `tupe-modeltool init` (the tiny configuration: hidden
                   32, 2 layers, 2 heads, FFN 64, 32 positions, vocabulary 60) with
                   embedding_size 24 (both networks project the shared tables), generator 0.5
                   (16 wide, 1 head, FFN 64), no token types, seed 21
  pair-types       embedding_size 32 (no projection in the discriminator; 32 -> 8 in the
                   generator), generator 0.25, 2 token types, seed 22
  pair-tupe-r      as pair with TUPE-R in both networks (the TUPE paper's Table 4), seed 24:
                   the remote-code model (share/tupe/hf/modeling_tupe_electra.py, loaded with
                   trust_remote_code through AutoModelForPreTraining / AutoModelForMaskedLM)
  CASE/            the checkpoint
  CASE.files       sha256 of every file the export writes (config.json without its
                   tupe_version line), discriminator/ and generator/
  CASE.disc.safetensors  "logits" [valid, 1]: ElectraForPreTraining's logits from the export on
                   the right-padded batch (input-types for pair-types, input otherwise), rows
                   the valid positions in (sequence, position) order
  CASE.gen.safetensors   "logits" [valid, 60]: ElectraForMaskedLM's, the same rows
  VERSIONS         the package versions used, the largest differences measured
Checks on the way: each class loads the export with nothing missing or unexpected
(ElectraModel / AutoModel: only the discriminator's head unexpected;
AutoModelForSequenceClassification: only its new classifier missing), padding changes no logit, the generator's output layer is
the word table, and tupe's own logits (tupe-modeltool logits --network) are within 1e-4.
"""
import argparse
import glob
import hashlib
import json
import os
import shutil
import subprocess
import tempfile

import numpy as np
import torch
from safetensors.torch import load_file

from fixture_io import run, save_logits, write_versions

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
OUT = os.path.join(ROOT, "tests", "fixtures", "electra", "hf")
CONV = os.path.join(ROOT, "tests", "fixtures", "convert")
ROF = os.path.join(ROOT, "tests", "fixtures", "roformer")
V = 60
CASES = (("pair", 21, dict(embedding_size=24, generator_hidden_size=0.5), 0, "bert-a"),
         ("pair-types", 22, dict(embedding_size=32, generator_hidden_size=0.25), 2, "bert-a"),
         ("pair-tupe-r", 24, dict(embedding_size=24, generator_hidden_size=0.5), 0, "tupe-r"))


def export_files(d):
    """sha256 of every file under d (dot files, tupe's own, left out)."""
    lines = []
    for sub in sorted(os.listdir(d)):
        if sub.startswith("."):
            continue
        for name in sorted(os.listdir(os.path.join(d, sub))):
            data = open(os.path.join(d, sub, name), "rb").read()
            if name == "config.json":
                data = b"".join(l for l in data.splitlines(True) if b'"tupe_version"' not in l)
            lines.append("%s  %s/%s\n" % (hashlib.sha256(data).hexdigest(), sub, name))
    return "".join(lines)


def load(cls, d, allow_missing=(), allow_unexpected=()):
    m, info = cls.from_pretrained(d, output_loading_info=True, attn_implementation="eager",
                                  trust_remote_code=True)
    for key, allowed in (("missing_keys", allow_missing), ("unexpected_keys", allow_unexpected),
                         ("mismatched_keys", ())):
        bad = [k for k in info.get(key, ()) if not any(k.startswith(a) for a in allowed)]
        assert not bad, (cls.__name__, d, key, bad)
    return m.eval()


def valid_rows(model, ids, lengths, types):
    t = torch.from_numpy(ids).long()
    tt = torch.from_numpy(types).long()
    am = (torch.arange(t.shape[1])[None, :] < torch.from_numpy(lengths)[:, None]).long()
    with torch.no_grad():
        out = model(input_ids=t, attention_mask=am, token_type_ids=tt).logits
        for b, n in enumerate(lengths):       # padding changes nothing
            alone = model(input_ids=t[b:b + 1, :n], token_type_ids=tt[b:b + 1, :n]).logits
            assert float((alone[0] - out[b, :n]).abs().max()) < 1e-5
    rows = np.concatenate([out[b, :n].numpy() for b, n in enumerate(lengths)], axis=0)
    return rows.reshape(rows.shape[0], -1)


def main():
    from transformers import (AutoModel, AutoModelForMaskedLM, AutoModelForPreTraining,
                              AutoModelForSequenceClassification, ElectraForMaskedLM,
                              ElectraForPreTraining, ElectraModel)

    global OUT
    ap = argparse.ArgumentParser(description="make tests/fixtures/electra/hf")
    ap.add_argument("--build", help="build directory (default: the newest build/*/)")
    ap.add_argument("--out", default=OUT, help="where to write (default %(default)s)")
    a = ap.parse_args()
    OUT = a.out
    build = a.build or max(glob.glob(os.path.join(ROOT, "build", "*", "")), key=os.path.getmtime)
    conv = os.path.join(build, "bin", "tupe-convert")
    tool = os.path.join(build, "tests", "tupe-modeltool")
    shutil.rmtree(OUT, ignore_errors=True)
    os.makedirs(OUT)
    tiny = json.load(open(os.path.join(CONV, "tiny.json")))
    worst = {}
    with tempfile.TemporaryDirectory() as d:
        for name, seed, extra, ntypes, position in CASES:
            mj = os.path.join(d, name + ".json")
            json.dump(dict(tiny, position=position, **extra), open(mj, "w"))
            ck = os.path.join(OUT, name)
            run(tool, "init", "--model", mj, "--vocab-size", V, "--seed", seed, "--types", ntypes,
                "-o", ck, stdout=subprocess.DEVNULL)
            hf = os.path.join(d, name + "-hf")
            run(conv, "export", "--to", "hf", ck, "-o", hf, "--vocab", os.path.join(CONV, "vocab.txt"))
            with open(os.path.join(OUT, name + ".files"), "w") as f:
                f.write(export_files(hf))
            inp = os.path.join(ROF, "input-types.safetensors") if ntypes else os.path.join(CONV, "input.safetensors")
            x = load_file(inp)
            ids, lengths = x["input.ids"].numpy(), x["input.lengths"].numpy()
            types = x["input.types"].numpy() if ntypes else np.zeros_like(ids)
            dd, gd = os.path.join(hf, "discriminator"), os.path.join(hf, "generator")
            electra = position == "bert-a"
            disc = load(ElectraForPreTraining if electra else AutoModelForPreTraining, dd)
            gen = load(ElectraForMaskedLM if electra else AutoModelForMaskedLM, gd)
            assert type(disc).__name__ == ("" if electra else "Tupe") + "ElectraForPreTraining"
            if electra:
                assert gen.generator_lm_head.weight.data_ptr() == gen.electra.embeddings.word_embeddings.weight.data_ptr()
            load(ElectraModel if electra else AutoModel, dd, allow_unexpected=("discriminator_predictions.",))
            # a new head: ELECTRA's classifier.*, tupe's pooler (dense + tanh) and classifier
            load(AutoModelForSequenceClassification, dd, allow_missing=("classifier.", "bert.pooler."),
                 allow_unexpected=("discriminator_predictions.",))
            for net, model in (("disc", disc), ("gen", gen)):
                lg = valid_rows(model, ids, lengths, types)
                path = os.path.join(OUT, "%s.%s.safetensors" % (name, net))
                save_logits(path, lg)
                mine = os.path.join(d, "%s.%s.tupe.safetensors" % (name, net))
                run(tool, "logits", "-c", ck, "--input", inp, "--network",
                    "discriminator" if net == "disc" else "generator", "-o", mine,
                    stdout=subprocess.DEVNULL)
                worst["%s %s" % (name, net)] = float(np.abs(load_file(mine)["logits"].numpy() - lg).max())
                assert worst["%s %s" % (name, net)] <= 1e-4, worst
    write_versions(os.path.join(OUT, "VERSIONS"), "max abs logits difference, tupe - transformers: %s"
                   % ", ".join("%s %.3g" % kv for kv in worst.items()))
    print("wrote", OUT)


if __name__ == "__main__":
    main()
