#!/usr/bin/env bash
# tupe-convert against the same conversions written in Python with the `safetensors`, `torch`
# and `numpy` packages (PyPI), on a bert-base-size BERT-A checkpoint (110M parameters,
# vocabulary bert-base-uncased): wall time and peak RSS of
#   export --to hf      vs  load_file, rename, zero token-type row, save_file, config.json
#   import --from hf    vs  load_file, rename, drop the token-type row, save_file
#   cast --dtype bf16   vs  load_file, .to(torch.bfloat16), save_file
#   npy (every tensor)  vs  safetensors.numpy.load_file, numpy.save per tensor
# Ours also verifies every tensor's hash on reading, checks shapes against the configuration,
# and (cast) measures the rounding error of every value; the Python side does none of that.
#
# The checkpoint (tupe-modeltool init --model bert-base --position bert-a) is cached in
# $TUPE_BUILD/bench-convert/. Rows: | what | ours | competitor | ours / competitor |
set -eu
: "${TUPE_BUILD:?run through make bench}" "${TUPE_BIN:?}" "${TUPE_DATA:?}"
W=$TUPE_BUILD/bench-convert
V=$TUPE_DATA/vocab/bert-base-uncased-vocab.txt
threads=${TUPE_BENCH_CONVERT_THREADS:-2}
mkdir -p "$W"
if ! python3 -c 'import safetensors, torch, numpy' 2>/dev/null; then
    echo "| tupe-convert | skipped: python3 with safetensors, torch, numpy not found | | |"
    exit 0
fi
if [ ! -s "$W/ckpt/model.safetensors" ]; then
    echo "convert bench: making a bert-base BERT-A checkpoint" >&2
    "$TUPE_BUILD/tests/tupe-modeltool" init --model bert-base --position bert-a --vocab-size 30522 \
        -o "$W/ckpt" >&2
fi

# timed NAME CMD...: wall seconds in $secs, peak RSS (MiB) in $mib.
timed() {
    local name=$1; shift
    echo "convert bench: $*" >&2
    sync
    local t0 t1 rss u s
    t0=$(date +%s.%N)
    /usr/bin/time -f '%M %U %S' -o "$W/$name.time" "$@" >&2
    t1=$(date +%s.%N)
    read -r rss u s <"$W/$name.time"
    secs=$(echo "$t1 - $t0" | bc -l)
    mib=$((rss / 1024))
}

row() { # row WHAT OURS-SECS OURS-MIB PY-SECS PY-MIB PY-WHAT
    printf '| %s: time | %.2f s | %s: %.2f s | %.2f |\n' "$1" "$2" "$6" "$4" "$(echo "$2 / $4" | bc -l)"
    printf '| %s: peak RSS | %d MiB | %d MiB | %.2f |\n' "$1" "$3" "$5" "$(echo "$3 / $5" | bc -l)"
}

PY=$W/convert_py.py
cat >"$PY" <<'EOF'
import json, os, sys
import numpy as np
import torch
from safetensors.torch import load_file, save_file
import safetensors.numpy

def hf_name(k):
    if k.startswith(("embeddings.", "encoder.")):
        return "bert." + k
    if k.startswith("classifier.dense."):
        return "bert.pooler.dense." + k[len("classifier.dense."):]
    if k.startswith("classifier.out_proj."):
        return "classifier." + k[len("classifier.out_proj."):]
    return k

what, src, dst = sys.argv[1:4]
if what == "export":
    sd = load_file(os.path.join(src, "model.safetensors"))
    out = {hf_name(k): v for k, v in sd.items()}
    d = out["bert.embeddings.word_embeddings.weight"].shape[1]
    out["bert.embeddings.token_type_embeddings.weight"] = torch.zeros(1, d)
    os.makedirs(dst, exist_ok=True)
    save_file(out, os.path.join(dst, "model.safetensors"), metadata={"format": "pt"})
    with open(os.path.join(dst, "config.json"), "w") as f:
        json.dump({"model_type": "bert", "hidden_size": d, "type_vocab_size": 1}, f)
elif what == "import":
    sd = load_file(os.path.join(src, "model.safetensors"))
    out = {k[5:] if k.startswith("bert.") else k: v for k, v in sd.items()
           if k != "bert.embeddings.token_type_embeddings.weight"}
    os.makedirs(dst, exist_ok=True)
    save_file(out, os.path.join(dst, "model.safetensors"), metadata={"format": "pt"})
elif what == "cast":
    sd = load_file(src)
    save_file({k: v.to(torch.bfloat16) for k, v in sd.items()}, dst, metadata={"format": "pt"})
elif what == "npy":
    os.makedirs(dst, exist_ok=True)
    for k, v in safetensors.numpy.load_file(src).items():
        np.save(os.path.join(dst, k + ".npy"), v)
EOF

C=$TUPE_BIN/tupe-convert
Q="-q --threads $threads"
export OMP_NUM_THREADS=$threads
params=$($C info $Q --format json "$W/ckpt" | python3 -c 'import json,sys; print(json.load(sys.stdin)["parameters"])')
echo "convert bench: checkpoint of $params parameters" >&2

rm -rf "$W/ours-hf" "$W/py-hf"
timed ours-export $C export $Q --to hf "$W/ckpt" --vocab "$V" -o "$W/ours-hf"
o_s=$secs o_m=$mib
timed py-export python3 "$PY" export "$W/ckpt" "$W/py-hf"
row "tupe-convert export --to hf, bert-base ($params params)" $o_s $o_m $secs $mib "Python safetensors"

rm -rf "$W/ours-back" "$W/py-back"
timed ours-import $C import $Q --from hf "$W/ours-hf" -o "$W/ours-back"
o_s=$secs o_m=$mib
timed py-import python3 "$PY" import "$W/ours-hf" "$W/py-back"
row "tupe-convert import --from hf, bert-base" $o_s $o_m $secs $mib "Python safetensors"

rm -rf "$W/ours-bf16" "$W/py-bf16.safetensors"
timed ours-cast $C cast $Q --dtype bf16 "$W/ckpt/model.safetensors" -o "$W/ours-bf16.safetensors"
o_s=$secs o_m=$mib
timed py-cast python3 "$PY" cast "$W/ckpt/model.safetensors" "$W/py-bf16.safetensors"
python3 -c 'import sys, torch; from safetensors.torch import load_file as l
a, b = l(sys.argv[1]), l(sys.argv[2])
print("convert bench: bf16 tensors equal to torch'"'"'s:", all(torch.equal(a[k], b[k]) for k in b))' \
    "$W/ours-bf16.safetensors" "$W/py-bf16.safetensors" >&2
row "tupe-convert cast --dtype bf16, bert-base" $o_s $o_m $secs $mib "Python torch + safetensors"

rm -rf "$W/ours-npy" "$W/py-npy"
timed ours-npy $C npy $Q "$W/ckpt" -o "$W/ours-npy"
o_s=$secs o_m=$mib
timed py-npy python3 "$PY" npy "$W/ckpt/model.safetensors" "$W/py-npy"
same=$(cd "$W/ours-npy" && for f in *.npy; do cmp -s "$f" "$W/py-npy/$f" || echo "$f"; done | wc -l)
echo "convert bench: npy files differing from numpy's: $same" >&2
row "tupe-convert npy (every tensor), bert-base" $o_s $o_m $secs $mib "Python numpy"
rm -rf "$W/ours-hf" "$W/py-hf" "$W/ours-back" "$W/py-back" "$W/ours-bf16.safetensors" \
    "$W/py-bf16.safetensors" "$W/ours-npy" "$W/py-npy"
