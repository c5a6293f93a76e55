#!/usr/bin/env python3
"""Fixtures of the discriminator's metrics (lib/train/rtdmetrics.h) from scikit-learn: AUC
(roc_auc_score), precision and recall of "replaced" (precision_score / recall_score with
zero_division=0) predicted where the logit > 0.

Cases: scores with many ties (rounded to a tenth) and without, a balanced and an imbalanced
(7% replaced, as a good generator leaves) set, scores of exactly 0 (predicted real), nothing
predicted replaced, and one class only (AUC undefined: NaN, where sklearn raises).

Writes tests/fixtures/electra/rtd_metrics.json. Run: python3 tests/reference/make_rtd_fixtures.py
"""
import json
import os

import numpy as np
import sklearn
from sklearn.metrics import precision_score, recall_score, roc_auc_score

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
OUT = os.path.join(ROOT, "tests", "fixtures", "electra", "rtd_metrics.json")


def case(name, s, y):
    s = [float(x) for x in s]
    y = [int(x) for x in y]
    p = [1 if x > 0 else 0 for x in s]
    auc = float(roc_auc_score(y, s)) if 0 < sum(y) < len(y) else None
    return {"name": name, "score": s, "label": y, "auc": auc,
            "precision": float(precision_score(y, p, zero_division=0)),
            "recall": float(recall_score(y, p, zero_division=0))}


def main():
    r = np.random.default_rng(31)
    cases = []
    y = r.random(300) < 0.5
    s = r.normal(0, 1, 300) + 1.2 * y - 0.3
    cases.append(case("balanced", s, y))
    cases.append(case("ties", np.round(s, 1), y))
    y = r.random(500) < 0.07
    s = r.normal(-2, 1, 500) + 2.5 * y
    cases.append(case("imbalanced", s, y))
    cases.append(case("zeros", [0, 0, 0.5, -1, 0, 2, 0], [1, 0, 1, 0, 0, 1, 1]))
    cases.append(case("none predicted", [-1, -2, -0.5, -3], [1, 0, 1, 0]))
    cases.append(case("one class", [0.3, -1, 2], [0, 0, 0]))
    doc = {"sklearn": sklearn.__version__, "cases": cases}
    with open(OUT + ".tmp", "w") as f:
        json.dump(doc, f, indent=0)
        f.write("\n")
    os.replace(OUT + ".tmp", OUT)
    print(OUT, [(c["name"], c["auc"], c["precision"], c["recall"]) for c in cases])


if __name__ == "__main__":
    main()
