#!/usr/bin/env python3
"""Fixtures for the Hugging Face export of every variant (tests/fixtures/hf/), made with
`transformers`, `torch` and `safetensors` from PyPI and the built tupe-convert, tupe-tokenize
and tests/tupe-modeltool (`make tests` first; --build names the build directory).

Run it once per transformers version, each from its own virtual environment; the first run
(without --logits-only) writes the checkpoints, later runs add their version's logits:

    /work/venvs/hf5/bin/python tests/reference/make_hf_fixtures.py          # transformers 5.x
    /work/venvs/hf4/bin/python tests/reference/make_hf_fixtures.py --logits-only   # 4.x

Writes:
  input.safetensors        input.ids I32 [4, 16], input.lengths [4] (16, 11, 7, 3: right-padded)
  input-types.safetensors  the same and input.types (0, then 1 from position 6 on), for the
                           case with a token-type embedding
  CASE/                    a checkpoint made by `tupe-modeltool init` (every tensor random)
  CASE.files               sha256 of every file `tupe-convert export --to hf` writes from it
                           (config.json without its tupe_version line): make check re-exports
                           and compares, so the directory transformers read is the one tupe
                           writes today
  CASE.logits.VERSION.safetensors   "logits": what AutoModelForMaskedLM (valid positions, in
                           (sequence, position) order) or AutoModelForSequenceClassification
                           ([4, C]) of that transformers version computed from the export on the
                           padded batch; make check compares tupe's logits with them (1e-4)
  tokenizer.CASING.files   sha256 of the export that gave them (a one-layer model over the
                           bert-base-uncased vocabulary, --uncased and --cased)
  CASE.attn.VERSION.npy    output_attentions [layers, heads, 9, 9] of that version for
                           "[CLS] w7 w12 w33 w5 w41 w59 w8 [SEP]" (AutoTokenizer's ids):
                           make check compares `tupe-attnviz attn --npy` with them
  tokenizer.uncased.ids.zst, tokenizer.cased.ids.zst   the ids AutoTokenizer gives, one line
                           per line of ../tokenize/edge.txt.zst (with [CLS] ... [SEP]); every
                           version must give the same ids
  VERSIONS                 the versions used, and the largest differences measured

Each run also checks, within transformers: the model loads with AutoModel,
AutoModelForMaskedLM and AutoModelForSequenceClassification; output_attentions gives rows that
sum to 1 and are 0 on padded keys; each sequence alone, without padding, gives the logits it
has in the padded batch; the loss is computed when labels are given.
"""
import argparse
import glob
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile

import numpy as np
import torch
from safetensors.torch import load_file, save_file

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
OUT = os.path.join(ROOT, "tests", "fixtures", "hf")
CONV = os.path.join(ROOT, "tests", "fixtures", "convert")
DATA = os.environ.get("TUPE_DATA", os.path.join(os.path.dirname(ROOT), "shared", "data"))
V = 60

# name: (position, --tie-cls, labels, token types, training state)
CASES = {
    "bert-a": ("bert-a", False, 0, 0, None),
    "bert-r": ("bert-r", False, 0, 0, None),
    "bert-ad": ("bert-ad", False, 0, 0, None),
    "tupe-a": ("tupe-a", False, 0, 0, None),
    "tupe-a-tie": ("tupe-a", True, 0, 0, None),
    "tupe-r": ("tupe-r", False, 0, 0, None),
    "tupe-r-types": ("tupe-r", False, 0, 2, None),
    "cls-bert-a": ("bert-a", False, 3, 0,
                   {"task": "MNLI", "labels": ["contradiction", "entailment", "neutral"]}),
    "cls-tupe-r": ("tupe-r", False, 2, 0, {"task": "RTE", "labels": ["entailment", "not_entailment"]}),
    "cls-tupe-a-tie": ("tupe-a", True, 2, 0, {"task": "SST-2", "labels": ["0", "1"]}),
    "reg-bert-ad": ("bert-ad", False, 1, 0, {"task": "STS-B", "labels": [], "regression": True}),
    "reg-bert-r": ("bert-r", False, 1, 0, {"task": "STS-B", "labels": [], "regression": True}),
}


def run(*cmd, **kw):
    return subprocess.run([str(c) for c in cmd], check=True, **kw)


def inputs():
    g = np.random.default_rng(22)
    lengths = np.array([16, 11, 7, 3], dtype=np.int32)
    ids = np.zeros((4, 16), dtype=np.int32)
    for b, n in enumerate(lengths):
        ids[b, :n] = g.integers(5, V, n)
        ids[b, 0], ids[b, n - 1] = 2, 3       # [CLS] ... [SEP]
    types = np.zeros_like(ids)
    types[:, 6:] = 1
    return ids, lengths, types


def export_files(d):
    """sha256 of every file of an export; config.json without its tupe_version line."""
    lines = []
    for name in sorted(os.listdir(d)):
        data = open(os.path.join(d, name), "rb").read()
        if name == "config.json":
            data = b"".join(l for l in data.splitlines(True) if b'"tupe_version"' not in l)
        lines.append("%s  %s\n" % (hashlib.sha256(data).hexdigest(), name))
    return "".join(lines)


def hf_outputs(hf, ids, lengths, types, labels):
    """Logits (valid rows for masked LM), after the checks named in the module docstring."""
    from transformers import AutoModel, AutoModelForMaskedLM, AutoModelForSequenceClassification
    cls = AutoModelForSequenceClassification if labels else AutoModelForMaskedLM
    m = cls.from_pretrained(hf, trust_remote_code=True, attn_implementation="eager").eval()
    t = torch.from_numpy(ids).long()
    tt = torch.from_numpy(types).long()
    am = (torch.arange(t.shape[1])[None, :] < torch.from_numpy(lengths)[:, None]).long()
    with torch.no_grad():
        out = m(input_ids=t, attention_mask=am, token_type_ids=tt, output_attentions=True)
    B, T = t.shape
    assert len(out.attentions) == m.config.num_hidden_layers
    for a in out.attentions:
        assert a.shape == (B, m.config.num_attention_heads, T, T), a.shape
        assert torch.allclose(a.sum(-1), torch.ones(()), atol=1e-5)
        assert float((a * (1 - am[:, None, None, :])).abs().max()) == 0.0
    logits = out.logits
    for b, n in enumerate(lengths):           # padding changes nothing
        with torch.no_grad():
            alone = m(input_ids=t[b:b + 1, :n], token_type_ids=tt[b:b + 1, :n]).logits
        got = logits[b, :n] if not labels else logits[b:b + 1]
        assert float((alone[0] if not labels else alone).sub(got).abs().max()) < 1e-5
    with torch.no_grad():                     # losses
        if labels:
            lab = torch.zeros(B) if labels == 1 else torch.arange(B) % labels
            assert torch.isfinite(m(input_ids=t, attention_mask=am, token_type_ids=tt, labels=lab).loss)
        else:
            lab = torch.where(am.bool(), t, torch.full_like(t, -100))
            assert torch.isfinite(m(input_ids=t, attention_mask=am, token_type_ids=tt, labels=lab).loss)
    base = AutoModel.from_pretrained(hf, trust_remote_code=True).eval()
    with torch.no_grad():
        h = base(input_ids=t, attention_mask=am, token_type_ids=tt).last_hidden_state
        h2 = m(input_ids=t, attention_mask=am, token_type_ids=tt, output_hidden_states=True).hidden_states[-1]
    for b, n in enumerate(lengths):
        assert float((h[b, :n] - h2[b, :n]).abs().max()) < 1e-5
    if not labels:                            # an MLM export also loads under a new head
        AutoModelForSequenceClassification.from_pretrained(hf, trust_remote_code=True)
        return torch.cat([logits[b, :n] for b, n in enumerate(lengths)]).numpy()
    return logits.numpy()


ATTN_TEXT = "w7 w12 w33 w5 w41 w59 w8"


def attentions(hf, labels):
    """output_attentions for [CLS] ATTN_TEXT [SEP] (AutoTokenizer's ids), [layers, heads, T, T]."""
    from transformers import AutoModelForMaskedLM, AutoModelForSequenceClassification, AutoTokenizer
    tok = AutoTokenizer.from_pretrained(hf, trust_remote_code=True)
    cls = AutoModelForSequenceClassification if labels else AutoModelForMaskedLM
    m = cls.from_pretrained(hf, trust_remote_code=True, attn_implementation="eager").eval()
    enc = tok(ATTN_TEXT, return_tensors="pt")
    assert enc["input_ids"][0].tolist() == [2, 7, 12, 33, 5, 41, 59, 8, 3], enc
    with torch.no_grad():
        out = m(**enc, output_attentions=True)
    return torch.stack([a[0] for a in out.attentions]).numpy().astype(np.float32)


def tokenizer_ids(hf, lines):
    from transformers import AutoTokenizer
    tok = AutoTokenizer.from_pretrained(hf, trust_remote_code=True)
    return "".join(" ".join(map(str, tok(l)["input_ids"])) + "\n" for l in lines)


def zst_text(path):
    return subprocess.run(["zstd", "-dc", path], check=True, capture_output=True).stdout.decode("utf-8")


def main():
    ap = argparse.ArgumentParser(description="make tests/fixtures/hf")
    ap.add_argument("--build", help="build directory (default: the newest build/*/)")
    ap.add_argument("--logits-only", action="store_true",
                    help="keep the checkpoints; add this transformers version's logits")
    a = ap.parse_args()
    build = a.build or max(glob.glob(os.path.join(ROOT, "build", "*", "")), key=os.path.getmtime)
    conv = os.path.join(build, "bin", "tupe-convert")
    tool = os.path.join(build, "tests", "tupe-modeltool")
    import transformers
    ver = transformers.__version__
    vocab = os.path.join(CONV, "vocab.txt")

    if not a.logits_only:
        shutil.rmtree(OUT, ignore_errors=True)
        os.makedirs(OUT)
        ids, lengths, types = inputs()
        base = {"input.ids": torch.from_numpy(ids), "input.lengths": torch.from_numpy(lengths)}
        save_file(base, os.path.join(OUT, "input.safetensors"), metadata={"format": "pt"})
        save_file(dict(base, **{"input.types": torch.from_numpy(types)}),
                  os.path.join(OUT, "input-types.safetensors"), metadata={"format": "pt"})
        for seed, (name, (pos, tie, labels, ntypes, state)) in enumerate(CASES.items(), 40):
            cmd = [tool, "init", "--model", os.path.join(CONV, "tiny.json"), "--position", pos,
                   "--vocab-size", V, "--seed", seed, "--labels", labels, "--types", ntypes,
                   "-o", os.path.join(OUT, name)]
            if tie:
                cmd.append("--tie-cls")
            if state:
                cmd += ["--train-state", json.dumps(state)]
            run(*cmd, stdout=subprocess.DEVNULL)
    inp = load_file(os.path.join(OUT, "input-types.safetensors"))
    ids, lengths, types = (inp[k].numpy() for k in ("input.ids", "input.lengths", "input.types"))

    worst = {}
    with tempfile.TemporaryDirectory() as d:
        for name, (pos, tie, labels, ntypes, state) in CASES.items():
            hf = os.path.join(d, name)
            run(conv, "export", "--to", "hf", os.path.join(OUT, name), "-o", hf, "--vocab", vocab)
            files = export_files(hf)
            fpath = os.path.join(OUT, name + ".files")
            if a.logits_only:
                assert open(fpath).read() == files, "%s: the export changed since the first run" % name
            else:
                with open(fpath, "w") as f:
                    f.write(files)
            logits = hf_outputs(hf, ids, lengths, types if ntypes else np.zeros_like(types), labels)
            save_file({"logits": torch.from_numpy(np.ascontiguousarray(logits, dtype=np.float32))},
                      os.path.join(OUT, "%s.logits.%s.safetensors" % (name, ver)),
                      metadata={"format": "pt", "transformers": ver})
            # What tupe computes, for the record in VERSIONS (make check measures it again).
            mine = os.path.join(d, name + ".tupe.safetensors")
            run(tool, "logits", "-c", os.path.join(OUT, name), "--input",
                os.path.join(OUT, "input-types.safetensors" if ntypes else "input.safetensors"),
                "-o", mine, stdout=subprocess.DEVNULL)
            worst[name] = float(np.abs(load_file(mine)["logits"].numpy() - logits).max())
            assert worst[name] <= 1e-4, (name, worst[name])
            np.save(os.path.join(OUT, "%s.attn.%s.npy" % (name, ver)), attentions(hf, labels))

        # The tokenizer: a one-layer model over the bert-base-uncased vocabulary.
        lines = zst_text(os.path.join(ROOT, "tests", "fixtures", "tokenize", "edge.txt.zst")).split("\n")
        if lines[-1] == "":
            lines.pop()
        mini = os.path.join(d, "mini.json")
        with open(mini, "w") as f:
            json.dump({"hidden_size": 4, "num_hidden_layers": 1, "num_attention_heads": 1,
                       "intermediate_size": 8, "max_position_embeddings": 512}, f)
        run(tool, "init", "--model", mini, "--position", "tupe-a", "--vocab-size", 30522,
            "-o", os.path.join(d, "tokck"), stdout=subprocess.DEVNULL)
        for case, flag in (("uncased", "--uncased"), ("cased", "--cased")):
            hf = os.path.join(d, "tok-" + case)
            run(conv, "export", "--to", "hf", os.path.join(d, "tokck"), "-o", hf, "--vocab",
                os.path.join(DATA, "vocab", "bert-base-uncased-vocab.txt"), flag)
            text = tokenizer_ids(hf, lines)
            path = os.path.join(OUT, "tokenizer.%s.ids.zst" % case)
            fpath = os.path.join(OUT, "tokenizer.%s.files" % case)
            if a.logits_only:
                assert zst_text(path) == text, "%s: transformers %s gives other ids" % (case, ver)
                assert open(fpath).read() == export_files(hf), "tokenizer %s: the export changed" % case
            else:
                run("zstd", "-q", "-19", "-f", "-o", path, input=text.encode())
                with open(fpath, "w") as f:
                    f.write(export_files(hf))

    import safetensors
    import tokenizers
    path = os.path.join(OUT, "VERSIONS")
    keep = [l for l in open(path)] if a.logits_only and os.path.exists(path) else [
        "python %s\ntorch %s\nsafetensors %s\nnumpy %s\n" % (
            sys.version.split()[0], torch.__version__, safetensors.__version__, np.__version__)]
    keep = [l for l in keep if not l.startswith("transformers %s " % ver)]
    keep.append("transformers %s (tokenizers %s): max abs logits difference, tupe - transformers: %s\n"
                % (ver, tokenizers.__version__, ", ".join("%s %.3g" % (k, v) for k, v in worst.items())))
    with open(path, "w") as f:
        f.writelines(keep)
    print("wrote", OUT, "with transformers", ver, "largest difference %.3g" % max(worst.values()))


if __name__ == "__main__":
    main()
