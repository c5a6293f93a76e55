#!/usr/bin/env python3
"""Fixtures for tupe-convert (tests/fixtures/convert/), made with Hugging Face `transformers`,
`torch`, `safetensors` and `numpy` from PyPI, and the built tupe-convert and tupe-modeltool
(`make tests` first; --build names the build directory, default the newest under build/).

Writes:
  tiny.json, vocab.txt          the tiny configuration (hidden 32, 2 layers, 2 heads, FFN 64,
                                32 positions) and a 60-token vocabulary
  input.safetensors             input.ids I32 [3, 12] and input.lengths I32 [3]: the inputs of
                                every logits fixture (right-padded with 0)
  bert-a/                       a BERT-A checkpoint made by `tupe-modeltool init --seed 11`
  bert-a-hf/                    `tupe-convert export --to hf` of it (make check re-exports and
                                compares the bytes)
  bert-a-hf.logits.safetensors  "logits" [M, 60]: BertForMaskedLM.from_pretrained(bert-a-hf) on
                                the inputs, rows = the valid positions in (sequence, position)
                                order
  hf-bert/                      a BertForMaskedLM built by transformers from torch seed 5
                                (layer_norm_eps 1e-12, type_vocab_size 2, every parameter drawn
                                at random), saved with save_pretrained
  hf-bert.logits.safetensors    its logits (token type 0)
  hf-legacy/                    the same weights under the legacy LayerNorm.gamma/beta names,
                                with a position_ids buffer and the tied decoder tensors present
  hf-sharded/                   the same model saved in several shards with an index
  hf-bare/                      its encoder as a BertModel (no "bert." prefix, a pooler, no
                                masked-LM head)
  hf-cls/, hf-cls.logits...     a BertForSequenceClassification (3 named labels, finetuning_task
                                MNLI) and its logits [3, 3]
  fairseq/tupe-r.safetensors    a TUPE-R model under the TUPE fairseq names, made from a .pt file
                                by share/tupe/fairseq2safetensors.py; values from torch seed 7
  fairseq/tupe-r.logits...      its masked-LM logits computed by tests/reference/tupe_ref.py
                                (float64), the independent PyTorch model of the variants
  fairseq/tupe-a-cls.safetensors + .logits  TUPE-A with a masked-LM head and a classification
                                head "sentence_classification_head" (2 labels), no "args"
                                metadata (so --heads 2 is needed), logits [3, 2] by tupe_ref
  npy/word_embeddings.npy       numpy.save of bert-a's word embeddings (float32), and
  npy/word_embeddings.bf16.npy  of their bf16 bits (uint16) after `tupe-convert cast --dtype
                                bf16`; every file `tupe-convert npy` writes is read back here
                                with numpy.load and compared
  bad/                          malformed inputs, one per kind (see BAD below)
  VERSIONS                      the package versions used
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
from safetensors.numpy import load_file as np_load
from safetensors.torch import load_file, save_file

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
OUT = os.path.join(ROOT, "tests", "fixtures", "convert")
sys.path.insert(0, HERE)
import tupe_ref  # noqa: E402

TINY = {"model_type": "tupe", "position": "bert-a", "untie_cls": True, "vocab_size": 0,
        "hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 2,
        "intermediate_size": 64, "max_position_embeddings": 32, "type_vocab_size": 0,
        "hidden_act": "gelu", "hidden_dropout_prob": 0.1, "attention_probs_dropout_prob": 0.1,
        "activation_dropout": 0.0, "classifier_dropout": 0.1, "layer_norm_eps": 1e-5,
        "initializer_range": 0.02, "rel_pos_buckets": 32, "max_rel_pos": 128, "num_labels": 0}
V = 60
LABELS = ["contradiction", "entailment", "neutral"]


def run(*cmd):
    subprocess.run([str(c) for c in cmd], check=True)


def inputs():
    g = np.random.default_rng(3)
    lengths = np.array([12, 8, 5], dtype=np.int32)
    ids = np.zeros((3, 12), dtype=np.int32)
    for b, n in enumerate(lengths):
        ids[b, :n] = g.integers(5, V, n)
        ids[b, 0], ids[b, n - 1] = 2, 3       # [CLS] ... [SEP]
    return ids, lengths


def valid_rows(x, lengths):
    """[B, T, ...] -> the rows of valid positions in (sequence, position) order."""
    return np.concatenate([x[b, :n] for b, n in enumerate(lengths)], axis=0)


def save_logits(path, logits):
    save_file({"logits": torch.from_numpy(np.ascontiguousarray(logits, dtype=np.float32))}, path,
              metadata={"format": "pt"})


def randomize(model, seed):
    """Every parameter random, so that no mapping error hides behind a 0 or a 1."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            p.copy_(torch.randn(p.shape, generator=g) * 0.05 + (1.0 if name.endswith("LayerNorm.weight") else 0.0))


def hf_logits(model, ids, lengths, mlm=True):
    from transformers import BertForMaskedLM  # noqa: F401
    t = torch.from_numpy(ids).long()
    am = (torch.arange(t.shape[1])[None, :] < torch.from_numpy(lengths)[:, None]).long()
    with torch.no_grad():
        out = model(input_ids=t, attention_mask=am, token_type_ids=torch.zeros_like(t)).logits
    return valid_rows(out.numpy(), lengths) if mlm else out.numpy()


def bert_config(**kw):
    from transformers import BertConfig
    base = dict(vocab_size=V, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                intermediate_size=64, max_position_embeddings=32)
    base.update(kw)
    return BertConfig(**base)


def fairseq_names(sd, lm=True, head=None):
    """tupe_ref (contract) names -> the TUPE fairseq names of formats.md §3.3."""
    e = "decoder.sentence_encoder."
    out = {}
    simple = {"embeddings.word_embeddings.weight": e + "embed_tokens.weight",
              "embeddings.LayerNorm.weight": e + "emb_layer_norm.weight",
              "embeddings.LayerNorm.bias": e + "emb_layer_norm.bias",
              "position.embeddings.weight": e + "pos.weight",
              "position.LayerNorm.weight": e + "pos_ln.weight",
              "position.LayerNorm.bias": e + "pos_ln.bias",
              "position.query.weight": e + "pos_q_linear.weight",
              "position.query.bias": e + "pos_q_linear.bias",
              "position.key.weight": e + "pos_k_linear.weight",
              "position.key.bias": e + "pos_k_linear.bias",
              "position.relative_bias.weight": e + "relative_attention_bias.weight",
              "cls.predictions.transform.dense.weight": "decoder.lm_head.dense.weight",
              "cls.predictions.transform.dense.bias": "decoder.lm_head.dense.bias",
              "cls.predictions.transform.LayerNorm.weight": "decoder.lm_head.layer_norm.weight",
              "cls.predictions.transform.LayerNorm.bias": "decoder.lm_head.layer_norm.bias",
              "cls.predictions.bias": "decoder.lm_head.bias"}
    for k, v in simple.items():
        if k in sd:
            out[v] = sd[k]
    L = 1 + max(int(k.split(".")[2]) for k in sd if k.startswith("encoder.layer."))
    for n in range(L):
        p, f = "encoder.layer.%d." % n, e + "layers.%d." % n
        a = p + "attention.self."
        out[f + "self_attn.in_proj_weight"] = torch.cat([sd[a + "query.weight"], sd[a + "key.weight"], sd[a + "value.weight"]], 0)
        out[f + "self_attn.in_proj_bias"] = torch.cat([sd[a + "query.bias"], sd[a + "key.bias"], sd[a + "value.bias"]], 0)
        for ours, fs in (("attention.output.dense.", "self_attn.out_proj."),
                         ("attention.output.LayerNorm.", "self_attn_layer_norm."),
                         ("intermediate.dense.", "fc1."), ("output.dense.", "fc2."),
                         ("output.LayerNorm.", "final_layer_norm.")):
            for s in ("weight", "bias"):
                out[f + fs + s] = sd[p + ours + s]
    if lm:
        out["decoder.lm_head.weight"] = sd["embeddings.word_embeddings.weight"].clone()
    if head:
        for s in ("dense.weight", "dense.bias", "out_proj.weight", "out_proj.bias"):
            out["classification_heads.%s.%s" % (head, s)] = sd["classifier." + s]
    return {k: v.float().contiguous() for k, v in out.items()}


def ref_model(position, labels, seed):
    cfg = tupe_ref.make_config(os.path.join(OUT, "tiny.json"), position=position, vocab_size=V,
                               num_labels=labels)
    m = tupe_ref.TupeModel(cfg).eval()
    randomize(m, seed)
    with torch.no_grad():     # the values a float32 file holds, computed in float64
        for p in m.parameters():
            p.copy_(p.float())
    return m.double()


def ref_logits(m, ids, lengths):
    T = ids.shape[1]
    pos = torch.tensor([b * T + t for b, n in enumerate(lengths) for t in range(n)])
    with torch.no_grad():
        out = m(torch.from_numpy(ids).long(), torch.from_numpy(lengths).long(),
                mask_pos=pos if hasattr(m, "cls") else None)
    return out["logits"].numpy()


# ---- malformed inputs ----------------------------------------------------------------------------

def tiny_hf():
    from transformers import BertForMaskedLM
    torch.manual_seed(9)
    m = BertForMaskedLM(bert_config(vocab_size=10, hidden_size=4, num_hidden_layers=1,
                                    num_attention_heads=1, intermediate_size=8,
                                    max_position_embeddings=8))
    randomize(m, 9)
    d = tempfile.mkdtemp()
    m.save_pretrained(d)
    sd = load_file(os.path.join(d, "model.safetensors"))
    cfg = json.load(open(os.path.join(d, "config.json")))
    shutil.rmtree(d)
    return sd, cfg


def write_hf(path, sd, cfg, config=True):
    os.makedirs(path, exist_ok=True)
    save_file({k: v.contiguous() for k, v in sd.items()}, os.path.join(path, "model.safetensors"),
              metadata={"format": "pt"})
    if config:
        with open(os.path.join(path, "config.json"), "w") as f:
            json.dump(cfg, f, indent=2, sort_keys=True)


def make_bad(bad):
    sd, cfg = tiny_hf()
    L0 = "bert.encoder.layer.0."

    def variant(name, edit_sd=None, edit_cfg=None, config=True):
        s, c = dict(sd), json.loads(json.dumps(cfg))
        if edit_sd:
            edit_sd(s)
        if edit_cfg:
            edit_cfg(c)
        write_hf(os.path.join(bad, name), s, c, config)

    variant("missing-tensor", lambda s: s.pop(L0 + "output.dense.bias"))
    variant("wrong-shape", lambda s: s.__setitem__(L0 + "attention.self.query.weight", torch.zeros(4, 5)))
    variant("wrong-dtype", lambda s: s.__setitem__(L0 + "intermediate.dense.weight", torch.zeros(8, 4, dtype=torch.int32)))
    variant("config-mismatch", edit_cfg=lambda c: c.__setitem__("vocab_size", 12))
    variant("gamma-and-weight", lambda s: s.__setitem__("bert.embeddings.LayerNorm.gamma", s["bert.embeddings.LayerNorm.weight"].clone()))
    variant("unknown-type", edit_cfg=lambda c: c.__setitem__("model_type", "gpt2"))
    variant("no-config", config=False)
    variant("untied-decoder", lambda s: s.__setitem__("cls.predictions.decoder.weight", s["bert.embeddings.word_embeddings.weight"] + 1))
    variant("extra-tensor", lambda s: s.__setitem__("bert.encoder.layer.1.output.dense.bias", torch.zeros(4)))
    variant("relu", edit_cfg=lambda c: c.__setitem__("hidden_act", "relu"))
    # A directory with only the pickle: refused with the command that converts it.
    d = os.path.join(bad, "bin-only")
    os.makedirs(d, exist_ok=True)
    torch.save({k: v for k, v in list(sd.items())[:2]}, os.path.join(d, "pytorch_model.bin"))
    with open(os.path.join(d, "config.json"), "w") as f:
        json.dump(cfg, f, indent=2, sort_keys=True)
    # An index naming a shard that is not there.
    d = os.path.join(bad, "shard-missing")
    os.makedirs(d, exist_ok=True)
    names = sorted(sd)
    half = len(names) // 2
    save_file({k: sd[k] for k in names[:half]}, os.path.join(d, "model-00001-of-00002.safetensors"),
              metadata={"format": "pt"})
    wm = {k: "model-0000%d-of-00002.safetensors" % (1 if i < half else 2) for i, k in enumerate(names)}
    with open(os.path.join(d, "model.safetensors.index.json"), "w") as f:
        json.dump({"metadata": {"total_size": 0}, "weight_map": wm}, f, indent=2)
    with open(os.path.join(d, "config.json"), "w") as f:
        json.dump(cfg, f, indent=2, sort_keys=True)
    # fairseq: an output layer that is not the token embedding.
    m = ref_model("tupe-a", 0, 13)
    fs = fairseq_names({k: v for k, v in m.state_dict().items()})
    fs["decoder.lm_head.weight"] = fs["decoder.lm_head.weight"] + 0.5
    save_file(fs, os.path.join(bad, "fairseq-untied.safetensors"), metadata={"format": "pt"})


def main():
    ap = argparse.ArgumentParser(description="make tests/fixtures/convert")
    ap.add_argument("--build", help="build directory (default: the newest build/*/)")
    a = ap.parse_args()
    build = a.build or max(glob.glob(os.path.join(ROOT, "build", "*", "")), key=os.path.getmtime)
    conv = os.path.join(build, "bin", "tupe-convert")
    tool = os.path.join(build, "tests", "tupe-modeltool")
    for p in (conv, tool):
        if not os.access(p, os.X_OK):
            sys.exit("%s: not built (make tests)" % p)

    from transformers import (AutoTokenizer, BertForMaskedLM,
                              BertForSequenceClassification, BertModel)
    import safetensors
    import transformers

    shutil.rmtree(OUT, ignore_errors=True)
    os.makedirs(OUT)
    with open(os.path.join(OUT, "tiny.json"), "w") as f:
        json.dump(TINY, f, indent=2)
        f.write("\n")
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + ["w%d" % i for i in range(5, V)]
    with open(os.path.join(OUT, "vocab.txt"), "w") as f:
        f.write("".join(t + "\n" for t in vocab))
    ids, lengths = inputs()
    save_file({"input.ids": torch.from_numpy(ids), "input.lengths": torch.from_numpy(lengths)},
              os.path.join(OUT, "input.safetensors"), metadata={"format": "pt"})

    # tupe -> transformers
    ck, hf = os.path.join(OUT, "bert-a"), os.path.join(OUT, "bert-a-hf")
    run(tool, "init", "--model", os.path.join(OUT, "tiny.json"), "--position", "bert-a",
        "--vocab-size", V, "--seed", 11, "-o", ck)
    run(conv, "export", "--to", "hf", ck, "-o", hf, "--vocab", os.path.join(OUT, "vocab.txt"))
    m = BertForMaskedLM.from_pretrained(hf, attn_implementation="eager").eval()
    save_logits(os.path.join(OUT, "bert-a-hf.logits.safetensors"), hf_logits(m, ids, lengths))
    tok = AutoTokenizer.from_pretrained(hf)
    assert tok("w7 w9")["input_ids"] == [2, 7, 9, 3], tok("w7 w9")
    # The other variants: tests/reference/make_hf_fixtures.py (modeling_tupe.py).

    # transformers -> tupe
    torch.manual_seed(5)
    m = BertForMaskedLM(bert_config()).eval()
    randomize(m, 5)
    m.tie_weights()
    hfb = os.path.join(OUT, "hf-bert")
    m.save_pretrained(hfb)
    shutil.copy(os.path.join(OUT, "vocab.txt"), hfb)
    save_logits(os.path.join(OUT, "hf-bert.logits.safetensors"), hf_logits(m, ids, lengths))
    m.save_pretrained(os.path.join(OUT, "hf-sharded"), max_shard_size="40KB")
    bare = BertModel(bert_config()).eval()            # with a pooler, without the prefix
    bare.load_state_dict(m.bert.state_dict(), strict=False)
    bare.save_pretrained(os.path.join(OUT, "hf-bare"))
    assert not any(k.startswith("bert.") for k in load_file(os.path.join(OUT, "hf-bare", "model.safetensors")))
    assert os.path.exists(os.path.join(OUT, "hf-sharded", "model.safetensors.index.json"))
    sd = load_file(os.path.join(hfb, "model.safetensors"))
    legacy = {}
    for k, v in sd.items():
        k = k.replace("LayerNorm.weight", "LayerNorm.gamma").replace("LayerNorm.bias", "LayerNorm.beta")
        legacy[k] = v
    legacy["bert.embeddings.position_ids"] = torch.arange(32, dtype=torch.int64)[None, :]
    legacy["cls.predictions.decoder.weight"] = sd["bert.embeddings.word_embeddings.weight"].clone()
    legacy["cls.predictions.decoder.bias"] = sd["cls.predictions.bias"].clone()
    write_hf(os.path.join(OUT, "hf-legacy"), legacy, json.load(open(os.path.join(hfb, "config.json"))))

    torch.manual_seed(6)
    c = bert_config(num_labels=3, id2label=dict(enumerate(LABELS)),
                    label2id={l: i for i, l in enumerate(LABELS)}, finetuning_task="MNLI")
    m = BertForSequenceClassification(c).eval()
    randomize(m, 6)
    m.save_pretrained(os.path.join(OUT, "hf-cls"))
    save_logits(os.path.join(OUT, "hf-cls.logits.safetensors"), hf_logits(m, ids, lengths, mlm=False))

    # fairseq -> tupe
    fdir = os.path.join(OUT, "fairseq")
    os.makedirs(fdir)
    m = ref_model("tupe-r", 0, 7)
    state = fairseq_names(m.state_dict())
    state["decoder.sentence_encoder.version"] = torch.tensor([2.0])
    with tempfile.TemporaryDirectory() as d:
        pt = os.path.join(d, "checkpoint_best.pt")
        ns = argparse.Namespace(arch="bert_base", encoder_attention_heads=2, rel_pos=True,
                                rel_pos_bins=32, max_rel_pos=128, max_positions=32, lr=[1e-4])
        torch.save({"args": ns, "model": state, "extra_state": {}}, pt)
        run(sys.executable, os.path.join(ROOT, "share", "tupe", "fairseq2safetensors.py"), pt,
            os.path.join(fdir, "tupe-r.safetensors"))
    save_logits(os.path.join(fdir, "tupe-r.logits.safetensors"), ref_logits(m, ids, lengths))
    m = ref_model("tupe-a", 2, 8)
    sd = m.state_dict()
    mlm = ref_model("tupe-a", 0, 8).state_dict()     # the pre-training head left in the file
    sd.update({k: v for k, v in mlm.items() if k.startswith("cls.")})
    save_file(fairseq_names(sd, lm=True, head="sentence_classification_head"),
              os.path.join(fdir, "tupe-a-cls.safetensors"), metadata={"format": "pt"})
    save_logits(os.path.join(fdir, "tupe-a-cls.logits.safetensors"), ref_logits(m, ids, lengths))

    # .npy: numpy's own bytes, and numpy reading ours
    ndir = os.path.join(OUT, "npy")
    os.makedirs(ndir)
    word = np_load(os.path.join(ck, "model.safetensors"))["embeddings.word_embeddings.weight"]
    np.save(os.path.join(ndir, "word_embeddings.npy"), word)
    with tempfile.TemporaryDirectory() as d:
        run(conv, "cast", "-q", "--dtype", "bf16", ck, "-o", os.path.join(d, "bf16"))
        bits = load_file(os.path.join(d, "bf16", "model.safetensors"))["embeddings.word_embeddings.weight"]
        np.save(os.path.join(ndir, "word_embeddings.bf16.npy"), bits.view(torch.int16).numpy().view(np.uint16))
        run(conv, "npy", ck, "-o", os.path.join(d, "all"))
        tensors = np_load(os.path.join(ck, "model.safetensors"))
        for k, v in tensors.items():
            got = np.load(os.path.join(d, "all", k + ".npy"))
            assert got.dtype == v.dtype and got.shape == v.shape and np.array_equal(got, v), k
        assert len(os.listdir(os.path.join(d, "all"))) == len(tensors)

    make_bad(os.path.join(OUT, "bad"))
    with open(os.path.join(OUT, "VERSIONS"), "w") as f:
        f.write("python %s\ntorch %s\ntransformers %s\nsafetensors %s\nnumpy %s\n" % (
            sys.version.split()[0], torch.__version__, transformers.__version__,
            safetensors.__version__, np.__version__))
    print("wrote", OUT)


if __name__ == "__main__":
    main()
