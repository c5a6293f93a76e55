#!/usr/bin/env python3
"""Fixtures for the foundation: safetensors written by the reference library, and fp16/bf16
conversions computed by numpy and torch.

Writes:
  tests/fixtures/safetensors/python.safetensors  tensors of every common dtype, {"format": "pt"}
  tests/fixtures/safetensors/python-meta.safetensors  extra metadata keys and an empty tensor
  tests/fixtures/dtype/halfconv.bin   records of (f32 bits u32, f16 bits u16, bf16 bits u16), LE
  tests/fixtures/VERSIONS-base.txt    package versions used

The tensor values follow formulas that tests/unit/test_safetensors.c recomputes:
  value(i) = (i * 7 % 23) - 11 + 0.25 * (i % 4)  for float types (exact in every float dtype)
  value(i) = (i * 7 % 23) - 11                    for signed ints, i * 7 % 23 for unsigned
"""
import os, struct, sys
import numpy as np
import torch
import safetensors
from safetensors.torch import save

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
FIX = os.path.join(ROOT, "tests", "fixtures")


def fval(n):
    i = np.arange(n)
    return (i * 7 % 23) - 11 + 0.25 * (i % 4)


def ival(n, signed=True):
    i = np.arange(n)
    return (i * 7 % 23) - 11 if signed else i * 7 % 23


def tensors():
    t = {}
    t["emb.weight"] = torch.tensor(fval(24).reshape(4, 6), dtype=torch.float32)
    t["ln.bias"] = torch.tensor(fval(6), dtype=torch.float16)
    t["ln.weight"] = torch.tensor(fval(6), dtype=torch.bfloat16)
    t["scalar"] = torch.tensor(fval(1)[0], dtype=torch.float64)
    t["ids"] = torch.tensor(ival(5), dtype=torch.int64)
    t["count"] = torch.tensor(ival(3), dtype=torch.int32)
    t["bytes"] = torch.tensor(ival(7, False), dtype=torch.uint8)
    t["flags"] = torch.tensor([True, False, True])
    t["cube"] = torch.tensor(fval(2 * 3 * 4).reshape(2, 3, 4), dtype=torch.float32)
    return t


def main():
    os.makedirs(os.path.join(FIX, "safetensors"), exist_ok=True)
    os.makedirs(os.path.join(FIX, "dtype"), exist_ok=True)
    with open(os.path.join(FIX, "safetensors", "python.safetensors"), "wb") as f:
        f.write(save(tensors(), metadata={"format": "pt"}))
    t2 = {"empty": torch.zeros(0, 3, dtype=torch.float32), "x": torch.tensor(fval(2), dtype=torch.float32)}
    with open(os.path.join(FIX, "safetensors", "python-meta.safetensors"), "wb") as f:
        f.write(save(t2, metadata={"format": "pt", "note": "héllo \"quoted\" \\ tab\t"}))

    # fp16 / bf16 rounding, from numpy (fp16) and torch (bf16).
    rng = np.random.default_rng(1234)
    special = [0.0, -0.0, 1.0, -1.0, 65504.0, 65519.99, 65520.0, 65536.0, 1e9, -1e9,
               float("inf"), float("-inf"), 6.1035156e-05, 6.09e-05, 5.96e-08, 2.98e-08,
               2.9802322387695312e-08, 2.9802326e-08, 1e-10, 3.0, 1.0009765625, 1.00048828125,
               1.000732421875, 1.0 + 2 ** -9, 1.0 + 2 ** -8 + 2 ** -16, 3.4e38, 1.17549435e-38,
               1e-45, 0.1, 0.2, 0.3, 2049.0, 2051.0, 4097.0, 1.00390625, 1.005859375]
    vals = np.array(special, dtype=np.float32)
    bits = np.concatenate([
        vals.view(np.uint32),
        rng.integers(0, 2 ** 32, size=4000, dtype=np.uint64).astype(np.uint32),
        (rng.normal(size=2000) * 10.0 ** rng.integers(-9, 6, size=2000)).astype(np.float32).view(np.uint32),
        np.arange(0x33000000, 0x38800000, 0x00080001, dtype=np.uint32),   # half subnormal range
    ])
    f = bits.view(np.float32)
    keep = ~np.isnan(f)          # NaN payload handling differs by design; tested separately
    bits, f = bits[keep], f[keep]
    h = f.astype(np.float16).view(np.uint16)
    b = torch.from_numpy(f.copy()).to(torch.bfloat16).view(torch.int16).numpy().view(np.uint16)
    with open(os.path.join(FIX, "dtype", "halfconv.bin"), "wb") as out:
        for x, y, z in zip(bits, h, b):
            out.write(struct.pack("<IHH", int(x), int(y), int(z)))

    with open(os.path.join(FIX, "VERSIONS-base.txt"), "w") as out:
        out.write(f"python {sys.version.split()[0]}\nnumpy {np.__version__}\ntorch {torch.__version__}\n"
                  f"safetensors {safetensors.__version__}\n")
    print("fixtures written under", FIX)


if __name__ == "__main__":
    main()
