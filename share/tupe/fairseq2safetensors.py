#!/usr/bin/env python3
"""Turn a fairseq checkpoint (.pt), such as the TUPE release, into the safetensors file that
`tupe-convert import --from fairseq` reads (man tupe-convert(1)).

tupe reads no pickle; this script does, with PyTorch, so run it only on files you trust:

    pip install torch safetensors
    python3 fairseq2safetensors.py checkpoint_best.pt tupe-r.safetensors
    tupe-convert import --from fairseq tupe-r.safetensors -o tupe-r-ckpt

It writes every tensor of the checkpoint's "model" state dict under its fairseq name, in its
stored precision (--fp32 to widen half-precision tensors), and the training arguments
(fairseq's argparse.Namespace: encoder_attention_heads, max_rel_pos, ...) as JSON in the
"args" metadata, where tupe-convert finds the number of heads of a TUPE-A model.
"""
import argparse
import json
import math
import os


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("checkpoint", help="the fairseq .pt file")
    ap.add_argument("output", help="the .safetensors file to write")
    ap.add_argument("--fp32", action="store_true", help="store F16/BF16 tensors as F32")
    a = ap.parse_args()

    import torch
    from safetensors.torch import save_file

    # weights_only=False: fairseq pickles its arguments as an argparse.Namespace.
    ck = torch.load(a.checkpoint, map_location="cpu", weights_only=False)
    state = ck["model"] if isinstance(ck, dict) and "model" in ck else ck
    tensors = {}
    for name, t in state.items():
        if not torch.is_tensor(t):
            continue
        # A copy of each: safetensors refuses tensors that share storage (the tied lm_head).
        t = t.detach().clone().contiguous()
        if a.fp32 and t.is_floating_point():
            t = t.float()
        tensors[name] = t
    meta = {"format": "pt", "source": os.path.basename(a.checkpoint)}
    args = ck.get("args") if isinstance(ck, dict) else None
    if args is not None:
        # JSON has no NaN or infinity: those few values go as strings.
        plain = {k: (str(v) if isinstance(v, float) and not math.isfinite(v) else v)
                 for k, v in vars(args).items()
                 if isinstance(v, (bool, int, float, str, list, type(None)))}
        meta["args"] = json.dumps(plain, sort_keys=True, default=str)
    save_file(tensors, a.output, metadata=meta)
    print("%s: %d tensors" % (a.output, len(tensors)))


if __name__ == "__main__":
    main()
