#!/usr/bin/env python3
"""GLUE fixtures: metric values from scikit-learn and SciPy, and small files in the QQP and MNLI
layouts (those tasks are not in ../shared/data).

Writes:
  tests/fixtures/glue/metrics.txt   one case per line:
      cls  NAME  NCLASS  pred0,pred1,...  gold0,gold1,...  acc  f1  mcc
      reg  NAME  x0,x1,...  y0,y1,...  pearson  spearman
    numbers printed with repr() (17 significant digits); "nan" where the reference gives NaN.
  tests/fixtures/glue/data/QQP/{train,dev,test}.tsv    the QQP layout, with two malformed rows
  tests/fixtures/glue/data/MNLI/{train,dev_matched,dev_mismatched,test_matched,test_mismatched}.tsv
Sentences are synthetic; the layouts (headers, column counts, label columns) are GLUE's.
"""
import os
import warnings

import numpy as np
import scipy
import sklearn
from scipy.stats import pearsonr, spearmanr
from sklearn.metrics import accuracy_score, f1_score, matthews_corrcoef

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
OUT = os.path.join(ROOT, "tests", "fixtures", "glue")


def fmt(v):
    return "nan" if v is None or (isinstance(v, float) and np.isnan(v)) else repr(float(v))


def cls_case(name, k, pred, gold):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        acc = accuracy_score(gold, pred)
        f1 = f1_score(gold, pred, pos_label=1, average="binary", zero_division=0) if k == 2 else float("nan")
        mcc = matthews_corrcoef(gold, pred)
    return "cls\t%s\t%d\t%s\t%s\t%s\t%s\t%s" % (name, k, ",".join(map(str, pred)), ",".join(map(str, gold)),
                                             fmt(acc), fmt(f1), fmt(mcc))


def reg_case(name, x, y):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        p = pearsonr(x, y)[0]
        s = spearmanr(x, y)[0]
    return "reg\t%s\t%s\t%s\t%s\t%s" % (name, ",".join(repr(float(v)) for v in x),
                                       ",".join(repr(float(v)) for v in y), fmt(p), fmt(s))


def metrics():
    rng = np.random.default_rng(7)
    lines = []
    for i in range(6):
        n = int(rng.integers(5, 60))
        gold = rng.integers(0, 2, n)
        pred = np.where(rng.random(n) < 0.7, gold, 1 - gold)
        lines.append(cls_case("binary%d" % i, 2, pred.tolist(), gold.tolist()))
    for i in range(3):
        n = int(rng.integers(10, 80))
        gold = rng.integers(0, 3, n)
        pred = np.where(rng.random(n) < 0.6, gold, rng.integers(0, 3, n))
        lines.append(cls_case("three%d" % i, 3, pred.tolist(), gold.tolist()))
    # degenerate: one class predicted everywhere, all correct, all wrong, no positives at all
    lines.append(cls_case("all-one-predicted", 2, [1] * 8, [1, 0, 1, 1, 0, 1, 0, 1]))
    lines.append(cls_case("all-zero-predicted", 2, [0] * 8, [1, 0, 1, 1, 0, 1, 0, 1]))
    lines.append(cls_case("perfect", 2, [0, 1, 1, 0, 1], [0, 1, 1, 0, 1]))
    lines.append(cls_case("inverted", 2, [1, 0, 0, 1, 0], [0, 1, 1, 0, 1]))
    lines.append(cls_case("no-positives", 2, [0, 0, 0, 0], [0, 0, 0, 0]))
    lines.append(cls_case("single-gold-class", 2, [0, 1, 0, 1], [1, 1, 1, 1]))
    for i in range(4):
        n = int(rng.integers(5, 50))
        x = rng.normal(size=n)
        y = 0.6 * x + rng.normal(size=n) * 0.8
        lines.append(reg_case("normal%d" % i, x.tolist(), y.tolist()))
    # ties (STS-B scores come in steps of 0.2 and 0.25)
    x = np.round(rng.uniform(0, 5, 40) * 5) / 5
    y = np.round((x + rng.normal(size=40) * 0.7) * 4) / 4
    lines.append(reg_case("ties", x.tolist(), y.tolist()))
    lines.append(reg_case("many-ties", [1.0, 1.0, 1.0, 2.0, 2.0, 3.0, 3.0, 3.0, 3.0], [2.0, 1.0, 2.0, 2.0, 5.0, 3.0, 3.0, 4.0, 3.0]))
    lines.append(reg_case("constant-prediction", [2.5] * 6, [0.0, 1.0, 2.0, 3.0, 4.0, 5.0]))
    lines.append(reg_case("perfect-negative", [1.0, 2.0, 3.0, 4.0], [4.0, 3.0, 2.0, 1.0]))
    with open(os.path.join(OUT, "metrics.txt"), "w") as f:
        f.write("# sklearn %s, scipy %s\n" % (sklearn.__version__, scipy.__version__))
        f.write("\n".join(lines) + "\n")


def write(path, rows):
    full = os.path.join(OUT, "data", path)
    os.makedirs(os.path.dirname(full), exist_ok=True)
    with open(full, "w", newline="") as f:
        for r in rows:
            f.write("\t".join(r) + "\n")


def layouts():
    q = ["id", "qid1", "qid2", "question1", "question2", "is_duplicate"]
    rows = [q]
    for i in range(12):
        rows.append([str(i), str(2 * i), str(2 * i + 1), "How do I learn %d things?" % i,
                     '"Quoted" question number %d?' % i, str(i % 2)])
    rows.insert(6, ["99", "198", '"What is the best way to start', "1"])   # wrong arity, like the 2018 file
    rows.insert(9, ["100", "200", "201", "question one", "question two", "maybe"])  # bad label
    write("QQP/train.tsv", rows)
    write("QQP/dev.tsv", [q] + [[str(i), str(i), str(i + 1), "q a %d" % i, "q b %d" % i, str((i + 1) % 2)] for i in range(6)])
    write("QQP/test.tsv", [["id", "question1", "question2"]] + [[str(i), "t a %d" % i, "t b %d" % i] for i in range(5)])
    base = ["index", "promptID", "pairID", "genre", "sentence1_binary_parse", "sentence2_binary_parse",
            "sentence1_parse", "sentence2_parse", "sentence1", "sentence2"]
    labs = ["entailment", "neutral", "contradiction"]
    write("MNLI/train.tsv", [base + ["label1", "gold_label"]] +
          [[str(i), str(i), "%di" % i, "fiction", "( a )", "( b )", "(ROOT a)", "(ROOT b)",
            "premise %d" % i, "hypothesis %d" % i, labs[i % 3], labs[i % 3]] for i in range(9)])
    for split, n in (("dev_matched", 7), ("dev_mismatched", 5)):
        write("MNLI/%s.tsv" % split, [base + ["label1", "label2", "label3", "label4", "label5", "gold_label"]] +
              [[str(i), str(i), "%dd" % i, "slate", "( a )", "( b )", "(ROOT a)", "(ROOT b)",
                "dev premise %d" % i, "dev hypothesis %d" % i, labs[0], labs[1], labs[2], labs[0], labs[1],
                labs[(i + 1) % 3]] for i in range(n)])
    for split, n in (("test_matched", 4), ("test_mismatched", 3)):
        write("MNLI/%s.tsv" % split, [base] +
              [[str(i), str(i), "%dt" % i, "travel", "( a )", "( b )", "(ROOT a)", "(ROOT b)",
                "test premise %d" % i, "test hypothesis %d" % i] for i in range(n)])


if __name__ == "__main__":
    os.makedirs(OUT, exist_ok=True)
    metrics()
    layouts()
    print("fixtures written under", OUT)
