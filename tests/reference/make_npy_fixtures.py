#!/usr/bin/env python3
"""Fixtures for lib/formats/npy.c: arrays saved by numpy.save. tests/unit/test_npy.c reads them and
writes the same arrays itself, which must give the same bytes.

Writes tests/fixtures/npy/{f4_2x3x4,i8_5,f2_scalar,u2_7,f4_0,f8_3x2,u1_4}.npy with values
value(i) = (i * 7 % 23) - 11 + 0.25 * (i % 4) (floats) or (i * 7 % 23) (integers)."""
import os

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
OUT = os.path.join(ROOT, "tests", "fixtures", "npy")


def fv(n):
    i = np.arange(n)
    return (i * 7 % 23) - 11 + 0.25 * (i % 4)


def main():
    os.makedirs(OUT, exist_ok=True)
    np.save(os.path.join(OUT, "f4_2x3x4.npy"), fv(24).reshape(2, 3, 4).astype("<f4"))
    np.save(os.path.join(OUT, "i8_5.npy"), (np.arange(5) * 7 % 23).astype("<i8"))
    np.save(os.path.join(OUT, "f2_scalar.npy"), np.asarray(fv(1)[0], dtype="<f2"))
    np.save(os.path.join(OUT, "u2_7.npy"), (np.arange(7) * 7 % 23).astype("<u2"))
    np.save(os.path.join(OUT, "f4_0.npy"), np.zeros((0,), "<f4"))
    np.save(os.path.join(OUT, "f8_3x2.npy"), fv(6).reshape(3, 2).astype("<f8"))
    np.save(os.path.join(OUT, "u1_4.npy"), (np.arange(4) * 7 % 23).astype("|u1"))
    with open(os.path.join(OUT, "VERSION"), "w") as f:
        f.write("numpy %s\n" % np.__version__)


if __name__ == "__main__":
    main()
