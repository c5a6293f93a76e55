#!/usr/bin/env python3
"""The competitor of tests/bench/attnviz.sh: what a user does without tupe-attnviz, with numpy and
matplotlib (PyPI), on the same checkpoint and inputs, producing the same matrices and figures.

  bench_attnviz.py pos CKPT N OUT.png
      V_h + R_h of every head for N positions from the checkpoint's tensors (numpy), its softmax
      over keys, and a 3 x 4 grid of imshow panels (viridis, one colorbar) saved as PNG.
  bench_attnviz.py decomp CKPT VOCAB SENTENCES MAXLEN OUT.png
      the exact four-term decomposition (plus the rest) of layer 0 averaged over the sentences
      (numpy, float64), and a 1 x 5 grid of imshow panels (coolwarm, symmetric limits).

The numbers are those of tests/reference/make_attnviz_fixtures.py (same functions). Prints one
JSON line: {"what": ..., "seconds": ...} (the whole run inside Python, imports excluded).
"""
import json
import os
import sys
import time

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import make_attnviz_fixtures as ref  # noqa: E402


def grid(mats, titles, cmap, lo, hi, cols, out):
    rows = (len(mats) + cols - 1) // cols
    fig, axes = plt.subplots(rows, cols, figsize=(4 * cols, 4 * rows), squeeze=False)
    for ax, m, t in zip(axes.flat, mats, titles):
        im = ax.imshow(m, cmap=cmap, vmin=lo, vmax=hi, interpolation="nearest")
        ax.set_title(t)
    fig.colorbar(im, ax=axes.ravel().tolist())
    fig.savefig(out, dpi=100)
    plt.close(fig)


def pos(ckpt, n, out):
    w, cfg = ref.read_safetensors(os.path.join(ckpt, "model.safetensors"))
    ab, rel = ref.positional(w, cfg, n)
    total = (0 if ab is None else ab) + (0 if rel is None else rel)
    soft = ref.softmax(total).astype(np.float32)
    grid(list(soft), ["H%d" % h for h in range(len(soft))], "viridis", 0, float(soft.max()), 4, out)


def decomp_exact(w, cfg, ids):
    """formats.md §4.3 exact mode, written plainly (the fixture script's version also checks
    itself, which costs more)."""
    H, D = cfg["num_attention_heads"], cfg["hidden_size"]
    s = 1 / np.sqrt(D // H)
    T = len(ids)
    E = w["embeddings.word_embeddings.weight"][ids]
    P = w["embeddings.position_embeddings.weight"][:T]
    tt = w["embeddings.token_type_embeddings.weight"][0] if cfg["type_vocab_size"] > 0 else np.zeros(D)
    L0 = "encoder.layer.0.attention.self."
    Wq, bq, Wk, bk = w[L0 + "query.weight"], w[L0 + "query.bias"], w[L0 + "key.weight"], w[L0 + "key.bias"]
    g, b = w["embeddings.LayerNorm.weight"], w["embeddings.LayerNorm.bias"]
    sigma = np.sqrt((E + P + tt).var(-1, keepdims=True) + cfg["layer_norm_eps"])
    cen = lambda v: g * (v - v.mean(-1, keepdims=True)) / sigma
    wh, ph, ch = cen(E), cen(P), cen(np.broadcast_to(tt, E.shape)) + b
    qw, kw, qp, kp, qc, kc = wh @ Wq.T, wh @ Wk.T, ph @ Wq.T, ph @ Wk.T, ch @ Wq.T + bq, ch @ Wk.T + bk
    split = lambda a: np.ascontiguousarray(a.reshape(T, H, D // H).transpose(1, 0, 2))
    dot = lambda a, c: s * split(a) @ split(c).transpose(0, 2, 1)
    return np.stack([dot(qw, kw), dot(qw, kp), dot(qp, kw), dot(qp, kp),
                     dot(qw + qp, kc) + dot(qc, kw + kp + kc)])


def decomp(ckpt, vocab, sentences, max_len, out):
    w, cfg = ref.read_safetensors(os.path.join(ckpt, "model.safetensors"))
    voc = ref.load_vocab(vocab)
    with open(sentences) as f:
        inputs = [ref.encode(voc, s, max_len) for s in f if s.strip()]
    n = max(len(x) for x in inputs)
    H = cfg["num_attention_heads"]
    acc = np.zeros((5, H, n, n))
    count = np.array([sum(len(x) > k for x in inputs) for k in range(n)])
    for ids in inputs:
        t = decomp_exact(w, cfg, ids)
        acc[:, :, :len(ids), :len(ids)] += t
    mean = (acc / count[np.maximum.outer(np.arange(n), np.arange(n))]).mean(1)
    m = float(np.abs(mean).max())
    grid(list(mean), ["ww", "wp", "pw", "pp", "rest"], "coolwarm", -m, m, 5, out)


if __name__ == "__main__":
    t0 = time.perf_counter()
    if sys.argv[1] == "pos":
        pos(sys.argv[2], int(sys.argv[3]), sys.argv[4])
    else:
        decomp(sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5]), sys.argv[6])
    print(json.dumps({"what": sys.argv[1], "seconds": time.perf_counter() - t0}))
