#!/usr/bin/env python3
"""tupe-attnviz fixtures: three tiny trained checkpoints and what tupe-attnviz must compute from
them, computed here with numpy only (plus Hugging Face transformers as a second opinion on the
BERT-A attention, when it is installed).

Usage (from the repository root, after `make`):
    python3 tests/reference/make_attnviz_fixtures.py [BIN_DIR]     # default: build/*/bin

Writes tests/fixtures/attnviz/:
  vocab.txt              100 tokens: [PAD] [UNK] [CLS] [SEP] [MASK] w5 ... w99
  sentences.txt          input sentences (one per line; a blank line, an unknown word, capitals)
  tupe-a/, tupe-r/, bert-a/model.safetensors
                         4 heads of 8, 2 layers, 64 positions, trained for 300 steps by the built
                         tupe-pretrain on a synthetic corpus encoded by tupe-tokenize and packed
                         by tupe-shard (runs of repeated words, so that positions matter); bert-a
                         has two token types and layer_norm_eps 1e-12, like a BERT imported by
                         tupe-convert
  expected/<model>/*.npy float32 (counts int64), the arrays tupe-attnviz --npy writes:
    tupe-a, tupe-r (pos --max-pos 48): pos_abs, pos_rel, pos_bias, pos_softmax [4, 48, 48]
    bert-a (decomp on sentences.txt --max-len 64), for MODE paper and exact:
        MODE/decomp_{ww,wp,pw,pp[,rest]}.npy [4, n, n]   per head, averaged over the inputs
        MODE/decomp_mean.npy [K, n, n], MODE/decomp_count.npy [n]
        exact/logits.npy [4, n, n]   the true layer-0 scores, averaged the same way
    tupe-r, bert-a (attn on the first sentence): attn.npy [2, 4, T, T], ids.npy [T]

Everything is computed in float64 from the float32 tensors of the checkpoints: the position
table through LayerNorm and the two projections, the [CLS] reset, the spec's explicit bucket
table (tupe-spec §4) with TUPE-R's two [CLS] buckets, the decomposition of formats.md §4.3 and
a complete encoder forward pass for the attention maps. Versions: numpy (and transformers)
printed to expected/VERSIONS.txt.
"""
import glob
import json
import math
import os
import shutil
import struct
import subprocess
import sys
import tempfile

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
OUT = os.path.join(ROOT, "tests", "fixtures", "attnviz")
N_POS = 48
SENTENCES = [
    "w5 w5 w5 w17 w17 w17 w8 w8 w8 w30",
    "w12 w12 w12 w6 w6 w6 w9 w9 w9 w44 w44 w44 w5 w5 w5 w71 w71 w71 w20 w20",
    "",
    "W7 w7 w7 w11 zzz w11 w13",
    "w5 w6 w7 w8 w9 w10 w11 w12 w13 w14 w15 w16 w17 w18 w19 w20 w21 w22 w23 w24 w25 w26 w27 "
    "w28 w29 w30 w31 w32 w33 w34 w35 w36 w37 w38 w39 w40",
    "w90 w90 w90 w5 w5 w5",
    "w25 w25 w25 w60 w60 w60 w61 w61 w61 w62 w62 w62 w63 w63",
]


# ---- safetensors, read with numpy only ---------------------------------------------------------

def read_safetensors(path):
    with open(path, "rb") as f:
        buf = f.read()
    (n,) = struct.unpack("<Q", buf[:8])
    header = json.loads(buf[8:8 + n])
    meta = header.pop("__metadata__", {})
    data = buf[8 + n:]
    tensors = {}
    for name, t in header.items():
        assert t["dtype"] == "F32", (name, t["dtype"])
        b, e = t["data_offsets"]
        tensors[name] = np.frombuffer(data[b:e], dtype="<f4").reshape(t["shape"]).astype(np.float64)
    return tensors, json.loads(meta["config"])


# ---- the model's pieces ----------------------------------------------------------------------------

def layernorm(x, g, b, eps):
    m = x.mean(-1, keepdims=True)
    v = ((x - m) ** 2).mean(-1, keepdims=True)
    return (x - m) / np.sqrt(v + eps) * g + b


def bucket(i, j):
    """tupe-spec §4's explicit table (32 buckets, distance 128) for key j of query i."""
    n = i - j
    right = n < 0
    n = abs(n)
    if n < 8:
        b = n
    else:
        b = 8 + sum(n >= t for t in (12, 16, 23, 32, 46, 64, 91))
    return b + (16 if right else 0)


def bucket_table(cfg, T):
    assert cfg["rel_pos_buckets"] == 32 and cfg["max_rel_pos"] == 128
    t = np.array([[bucket(i, j) for j in range(T)] for i in range(T)])
    if cfg["position"] == "tupe-r" and cfg["untie_cls"]:
        t[:, 0] = 32
        t[0, :] = 16
    return t


def heads_split(x, H):  # [R, D] -> [H, R, d]
    R, D = x.shape
    return x.reshape(R, H, D // H).transpose(1, 0, 2)


def positional(w, cfg, T):
    """The additive positional term [H, T, T] and its parts (abs, rel), or Nones."""
    H, D = cfg["num_attention_heads"], cfg["hidden_size"]
    d = D // H
    pos = cfg["position"]
    ab = rel = None
    if pos in ("tupe-a", "tupe-r"):
        P = layernorm(w["position.embeddings.weight"][:T + 1], w["position.LayerNorm.weight"],
                      w["position.LayerNorm.bias"], cfg["layer_norm_eps"])
        q = heads_split(P @ w["position.query.weight"].T + w["position.query.bias"], H)
        k = heads_split(P @ w["position.key.weight"].T + w["position.key.bias"], H)
        A = q @ k.transpose(0, 2, 1) / math.sqrt(2 * d)
        ab = A[:, 1:, 1:].copy()
        if cfg["untie_cls"]:
            ab[:, :, 0] = A[:, 1, 1][:, None]
            ab[:, 0, :] = A[:, 0, 0][:, None]
    if pos in ("tupe-r", "bert-r"):
        rb = w["position.relative_bias.weight"]
        rel = rb[bucket_table(cfg, T)].transpose(2, 0, 1)
    return ab, rel


def softmax(x):
    x = x - x.max(-1, keepdims=True)
    e = np.exp(x)
    return e / e.sum(-1, keepdims=True)


_erf = np.vectorize(math.erf)


def forward_attn(w, cfg, ids):
    """Attention probabilities [L, H, T, T] of one sequence (token types 0)."""
    H, D, L = cfg["num_attention_heads"], cfg["hidden_size"], cfg["num_hidden_layers"]
    d, T, eps, pos = D // H, len(ids), cfg["layer_norm_eps"], cfg["position"]
    x = w["embeddings.word_embeddings.weight"][ids]
    if pos in ("bert-a", "bert-r"):
        x = x + w["embeddings.position_embeddings.weight"][:T]
    if cfg["type_vocab_size"] > 0:
        x = x + w["embeddings.token_type_embeddings.weight"][0]
    x = layernorm(x, w["embeddings.LayerNorm.weight"], w["embeddings.LayerNorm.bias"], eps)
    ab, rel = positional(w, cfg, T)
    bias = (0 if ab is None else ab) + (0 if rel is None else rel)
    scale = 1 / math.sqrt(2 * d) if pos.startswith("tupe") else 1 / math.sqrt(d)
    assert pos != "bert-ad"
    probs = []
    for l in range(L):
        p = "encoder.layer.%d." % l
        lin = lambda v, n: v @ w[p + n + ".weight"].T + w[p + n + ".bias"]
        q = heads_split(lin(x, "attention.self.query"), H)
        k = heads_split(lin(x, "attention.self.key"), H)
        v = heads_split(lin(x, "attention.self.value"), H)
        a = softmax(scale * q @ k.transpose(0, 2, 1) + bias)
        probs.append(a)
        ctx = (a @ v).transpose(1, 0, 2).reshape(T, D)
        x = layernorm(x + lin(ctx, "attention.output.dense"), w[p + "attention.output.LayerNorm.weight"],
                      w[p + "attention.output.LayerNorm.bias"], eps)
        h = lin(x, "intermediate.dense")
        h = 0.5 * h * (1 + _erf(h / math.sqrt(2)))
        x = layernorm(x + lin(h, "output.dense"), w[p + "output.LayerNorm.weight"],
                      w[p + "output.LayerNorm.bias"], eps)
    return np.stack(probs)


def decomp_one(w, cfg, ids, mode):
    """[K, H, T, T] terms of layer 0 for one input (formats.md §4.3), and the true scores."""
    H, D = cfg["num_attention_heads"], cfg["hidden_size"]
    d, T, eps = D // H, len(ids), cfg["layer_norm_eps"]
    s = 1 / math.sqrt(d)
    E = w["embeddings.word_embeddings.weight"][ids]
    P = w["embeddings.position_embeddings.weight"][:T]
    tt = w["embeddings.token_type_embeddings.weight"][0] if cfg["type_vocab_size"] > 0 else np.zeros(D)
    Wq, bq = w["encoder.layer.0.attention.self.query.weight"], w["encoder.layer.0.attention.self.query.bias"]
    Wk, bk = w["encoder.layer.0.attention.self.key.weight"], w["encoder.layer.0.attention.self.key.bias"]
    g, b = w["embeddings.LayerNorm.weight"], w["embeddings.LayerNorm.bias"]
    X = layernorm(E + P + tt, g, b, eps)
    true = s * heads_split(X @ Wq.T + bq, H) @ heads_split(X @ Wk.T + bk, H).transpose(0, 2, 1)
    if cfg["position"] == "bert-r":
        true = true + positional(w, cfg, T)[1]
    dot = lambda a, c: s * heads_split(a, H) @ heads_split(c, H).transpose(0, 2, 1)
    if mode == "paper":
        qw, kw, qp, kp = E @ Wq.T, E @ Wk.T, P @ Wq.T, P @ Wk.T
        return np.stack([dot(qw, kw), dot(qw, kp), dot(qp, kw), dot(qp, kp)]), true
    x = E + P + tt
    sigma = np.sqrt(x.var(-1, keepdims=True) + eps)
    cen = lambda v: g * (v - v.mean(-1, keepdims=True)) / sigma
    wh, ph = cen(E), cen(P)
    ch = cen(np.broadcast_to(tt, E.shape)) + b
    assert np.allclose(wh + ph + ch, X, atol=1e-12)
    qw, kw, qp, kp = wh @ Wq.T, wh @ Wk.T, ph @ Wq.T, ph @ Wk.T
    qc, kc = ch @ Wq.T + bq, ch @ Wk.T + bk
    terms = [dot(qw, kw), dot(qw, kp), dot(qp, kw), dot(qp, kp)]
    rest = true - sum(terms)
    # the rest term written out, as tupe-attnviz computes it
    direct = dot(qw + qp, kc) + dot(qc, kw + kp + kc)
    if cfg["position"] == "bert-r":
        direct = direct + positional(w, cfg, T)[1]
    assert np.abs(direct - rest).max() < 1e-10
    return np.stack(terms + [rest]), true


# ---- inputs ---------------------------------------------------------------------------------------

def load_vocab(path):
    with open(path) as f:
        return [l.rstrip("\n") for l in f]


def encode(vocab, sentence, max_len):
    """WordPiece on a vocabulary of whole words: lowercased words, [UNK] when absent."""
    index = {t: i for i, t in enumerate(vocab)}
    ids = [index.get(wd, index["[UNK]"]) for wd in sentence.lower().split()]
    ids = ids[:max_len - 2]
    return [index["[CLS]"]] + ids + [index["[SEP]"]]


# ---- making the checkpoints ------------------------------------------------------------------------

def run(cmd, **kw):
    print("+", " ".join(cmd), file=sys.stderr)
    subprocess.run(cmd, check=True, **kw)


def make_checkpoints(bindir, tmp):
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + ["w%d" % i for i in range(5, 100)]
    with open(os.path.join(OUT, "vocab.txt"), "w") as f:
        f.write("".join(t + "\n" for t in vocab))
    rng = np.random.default_rng(7)
    with open(os.path.join(tmp, "corpus.txt"), "w") as f:
        for _ in range(1500):
            n = int(rng.integers(20, 60))
            words, t = [], 5
            for i in range(n):
                if i % 3 == 0:
                    t = 5 + int(95 * rng.random() ** 4)
                words.append("w%d" % t)
            f.write(" ".join(words) + "\n\n")
    tok = os.path.join(tmp, "c.tok")
    run([os.path.join(bindir, "tupe-tokenize"), "encode", "-q", "--vocab", os.path.join(OUT, "vocab.txt"),
         "-o", tok, os.path.join(tmp, "corpus.txt")])
    shards = os.path.join(tmp, "shards")
    run([os.path.join(bindir, "tupe-shard"), "write", "-q", "-o", shards, "--seq-len", "64",
         "--valid-fraction", "0.05", "--shards", "2", tok])
    base = {"hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 4,
            "intermediate_size": 64, "max_position_embeddings": 64}
    models = {"tupe-a": {"position": "tupe-a"}, "tupe-r": {"position": "tupe-r"},
              "bert-a": {"position": "bert-a", "type_vocab_size": 2, "layer_norm_eps": 1e-12}}
    for name, extra in models.items():
        cfgp = os.path.join(tmp, name + ".json")
        with open(cfgp, "w") as f:
            json.dump(dict(base, **extra), f)
        rd = os.path.join(tmp, "run-" + name)
        run([os.path.join(bindir, "tupe-pretrain"), "train", "-q", "--data", shards, "--model", cfgp,
             "--batch", "16", "--warmup", "20", "--lr", "5e-3", "--steps", "300", "--log-every", "100",
             "--eval-every", "0", "--save-every", "0", "--threads", "2", "-o", rd])
        os.makedirs(os.path.join(OUT, name), exist_ok=True)
        shutil.copy(os.path.join(rd, "checkpoints", "step-00000300", "model.safetensors"),
                    os.path.join(OUT, name, "model.safetensors"))


def save(path, a, dtype=np.float32):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    np.save(path, np.ascontiguousarray(a, dtype=dtype))


def main():
    bindir = sys.argv[1] if len(sys.argv) > 1 else sorted(glob.glob(os.path.join(ROOT, "build", "*", "bin")))[0]
    os.makedirs(OUT, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        make_checkpoints(bindir, tmp)
    with open(os.path.join(OUT, "sentences.txt"), "w") as f:
        f.write("".join(s + "\n" for s in SENTENCES))
    vocab = load_vocab(os.path.join(OUT, "vocab.txt"))
    exp = os.path.join(OUT, "expected")
    shutil.rmtree(exp, ignore_errors=True)

    # pos
    for name in ("tupe-a", "tupe-r"):
        w, cfg = read_safetensors(os.path.join(OUT, name, "model.safetensors"))
        ab, rel = positional(w, cfg, N_POS)
        total = ab + (0 if rel is None else rel)
        save(os.path.join(exp, name, "pos_abs.npy"), ab)
        if rel is not None:
            save(os.path.join(exp, name, "pos_rel.npy"), rel)
            save(os.path.join(exp, name, "pos_bias.npy"), total)
        save(os.path.join(exp, name, "pos_softmax.npy"), softmax(total))

    # decomp (the sentences that are not blank, as tupe-attnviz reads --input)
    w, cfg = read_safetensors(os.path.join(OUT, "bert-a", "model.safetensors"))
    inputs = [encode(vocab, s, 64) for s in SENTENCES if s.strip()]
    n = max(len(x) for x in inputs)
    H = cfg["num_attention_heads"]
    count = np.array([sum(len(x) > k for x in inputs) for k in range(n)], dtype=np.int64)
    div = count[np.maximum.outer(np.arange(n), np.arange(n))]
    for mode in ("paper", "exact"):
        K = 4 if mode == "paper" else 5
        acc = np.zeros((K, H, n, n))
        acc_true = np.zeros((H, n, n))
        for ids in inputs:
            t, true = decomp_one(w, cfg, ids, mode)
            T = len(ids)
            acc[:, :, :T, :T] += t
            acc_true[:, :T, :T] += true
        mean, mean_true = acc / div, acc_true / div
        for k, key in enumerate(("ww", "wp", "pw", "pp", "rest")[:K]):
            save(os.path.join(exp, "bert-a", mode, "decomp_%s.npy" % key), mean[k])
        save(os.path.join(exp, "bert-a", mode, "decomp_mean.npy"), mean.mean(1))
        save(os.path.join(exp, "bert-a", mode, "decomp_count.npy"), count, np.int64)
        if mode == "exact":
            assert np.abs(mean.sum(0) - mean_true).max() < 1e-9
            save(os.path.join(exp, "bert-a", mode, "logits.npy"), mean_true)

    # attn, on the first sentence
    versions = ["numpy %s" % np.__version__]
    for name in ("tupe-r", "bert-a"):
        w, cfg = read_safetensors(os.path.join(OUT, name, "model.safetensors"))
        ids = encode(vocab, SENTENCES[0], 64)
        probs = forward_attn(w, cfg, ids)
        save(os.path.join(exp, name, "attn.npy"), probs)
        save(os.path.join(exp, name, "ids.npy"), ids, np.int32)
        if name == "bert-a":
            versions += check_hf(w, cfg, ids, probs)
    with open(os.path.join(exp, "VERSIONS.txt"), "w") as f:
        f.write("\n".join(versions) + "\n")


def check_hf(w, cfg, ids, probs):
    """Hugging Face BertModel(output_attentions=True) on the same weights: the same maps."""
    try:
        import torch
        import transformers
    except ImportError:
        print("transformers not installed: no second opinion on the BERT-A attention", file=sys.stderr)
        return []
    hc = transformers.BertConfig(vocab_size=cfg["vocab_size"], hidden_size=cfg["hidden_size"],
                                 num_hidden_layers=cfg["num_hidden_layers"],
                                 num_attention_heads=cfg["num_attention_heads"],
                                 intermediate_size=cfg["intermediate_size"],
                                 max_position_embeddings=cfg["max_position_embeddings"],
                                 type_vocab_size=cfg["type_vocab_size"], layer_norm_eps=cfg["layer_norm_eps"],
                                 hidden_act="gelu", attn_implementation="eager")
    m = transformers.BertModel(hc, add_pooling_layer=False).double().eval()
    sd = {k: torch.from_numpy(v) for k, v in w.items() if not k.startswith("cls.")}
    missing, unexpected = m.load_state_dict(sd, strict=False)
    assert not unexpected and all("position_ids" in k or "token_type_ids" in k for k in missing), (missing, unexpected)
    with torch.no_grad():
        out = m(torch.tensor([ids]), output_attentions=True)
    hf = np.stack([a[0].numpy() for a in out.attentions])
    err = np.abs(hf - probs).max()
    assert err < 1e-10, err
    print("Hugging Face BertModel agrees on the BERT-A attention (max diff %.3g)" % err, file=sys.stderr)
    return ["torch %s" % torch.__version__, "transformers %s (BERT-A attention checked, max diff %.3g)"
            % (transformers.__version__, err)]


if __name__ == "__main__":
    main()
