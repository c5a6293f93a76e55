#!/usr/bin/env python3
"""Fixtures for tests/cli/shard.sh: a Megatron export read back by independent readers.

Produces, under tests/fixtures/shard/:
  small-docs.txt          the input: 120 documents as text ids (one per line, some empty)
  megatron/*.bin, *.idx   `tupe-shard --export megatron` of that input (the options below)
  megatron-train.txt      the sequences of the train files, read back by the readers here,
  megatron-valid.txt      one per line as decimal ids (what `tupe-shard cat --format text`
                          must print for the export)
  VERSIONS-shard.txt      the package versions used

Two readers, which must agree:
  * read_idx() below, written from Megatron-LM's documented .idx layout
    (megatron/core/datasets/indexed_dataset.py: magic MMIDIDX\\0\\0, u64 version 1, u8 dtype
    code, u64 sequence count, u64 document count, int32 lengths, int64 byte pointers, int64
    document indices), using numpy only;
  * megatron.core.datasets.indexed_dataset.IndexedDataset from the `megatron-core` package
    (PyPI; 0.16.1 was used: pip install --no-deps megatron-core==0.16.1, with torch and
    numpy installed), when it can be imported.
The script also checks that the sequences hold every input id once (and one [SEP] per
document), so the committed text is checked against the input as well as against the readers.

Run from the repository root after `make`:
    python3 tests/reference/make_shard_fixtures.py [path/to/tupe-shard] [path/to/tupe-testtool]
"""
import glob
import os
import random
import shutil
import subprocess
import sys
import tempfile

import numpy as np

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
OUT = os.path.join(ROOT, "tests", "fixtures", "shard")
OPTS = ["--cls", "101", "--sep", "102", "--pad", "0", "--unk", "100", "--mask", "103",
        "--seq-len", "32", "--shards", "2", "--valid-fraction", "0.2", "--export", "megatron"]
DTYPES = {1: np.uint8, 2: np.int8, 3: np.int16, 4: np.int32, 5: np.int64, 6: np.float64,
          7: np.float32, 8: np.uint16}


def read_idx(prefix):
    """Sequences of PREFIX.bin as lists of ints, following the documented .idx layout."""
    with open(prefix + ".idx", "rb") as f:
        idx = f.read()
    assert idx[:9] == b"MMIDIDX\x00\x00", "bad magic"
    version = int.from_bytes(idx[9:17], "little")
    assert version == 1
    dtype = DTYPES[idx[17]]
    n = int.from_bytes(idx[18:26], "little")
    ndoc = int.from_bytes(idx[26:34], "little")
    off = 34
    lengths = np.frombuffer(idx, dtype="<i4", count=n, offset=off)
    off += 4 * n
    pointers = np.frombuffer(idx, dtype="<i8", count=n, offset=off)
    off += 8 * n
    docs = np.frombuffer(idx, dtype="<i8", count=ndoc, offset=off)
    off += 8 * ndoc
    assert off == len(idx), "trailing bytes in .idx"
    assert docs[0] == 0 and docs[-1] == n
    data = np.fromfile(prefix + ".bin", dtype=np.dtype(dtype).newbyteorder("<"))
    size = np.dtype(dtype).itemsize
    seqs = []
    for length, ptr in zip(lengths, pointers):
        start = int(ptr) // size
        seqs.append([int(x) for x in data[start:start + int(length)]])
    return seqs, int(idx[17])


def read_megatron_core(prefix):
    try:
        from megatron.core.datasets.indexed_dataset import IndexedDataset
    except Exception as exc:  # not installed: the documented-layout reader stands alone
        print(f"megatron-core not available ({exc.__class__.__name__}); skipped", file=sys.stderr)
        return None
    ds = IndexedDataset(prefix, mmap=True)
    return [[int(x) for x in ds[i]] for i in range(len(ds))]


def main():
    shard = sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, "build", "cpu", "bin", "tupe-shard")
    testtool = sys.argv[2] if len(sys.argv) > 2 else os.path.join(ROOT, "build", "cpu", "tests", "tupe-testtool")
    os.makedirs(OUT, exist_ok=True)
    rng = random.Random(4)
    docs = []
    for _ in range(120):
        n = 0 if rng.random() < 0.1 else rng.randint(1, 70)
        docs.append([rng.randrange(200, 30000) for _ in range(n)])
    with open(os.path.join(OUT, "small-docs.txt"), "w") as f:
        for d in docs:
            f.write(" ".join(map(str, d)) + "\n")
    tmp = tempfile.mkdtemp()
    try:
        tok = os.path.join(tmp, "small.tok")
        subprocess.run([testtool, "tok-write", "-o", tok, os.path.join(OUT, "small-docs.txt")], check=True)
        exp = os.path.join(tmp, "m")
        subprocess.run([shard, "-q", "-o", exp] + OPTS + [tok], check=True)
        mdir = os.path.join(OUT, "megatron")
        shutil.rmtree(mdir, ignore_errors=True)
        os.makedirs(mdir)
        for p in sorted(glob.glob(os.path.join(exp, "*.bin")) + glob.glob(os.path.join(exp, "*.idx"))):
            shutil.copy(p, mdir)
    finally:
        shutil.rmtree(tmp)
    got_ids, seps = [], 0
    for split in ("train", "valid"):
        lines = []
        for prefix in sorted(p[:-4] for p in glob.glob(os.path.join(mdir, split + "-*.idx"))):
            seqs, code = read_idx(prefix)
            assert code == 8, "a 30522-id vocabulary is stored as uint16 (code 8)"
            other = read_megatron_core(prefix)
            if other is not None:
                assert other == seqs, f"megatron-core reads {prefix} differently"
            for s in seqs:
                assert s[0] == 101 and len(s) <= 32
                lines.append(" ".join(map(str, s)))
        with open(os.path.join(OUT, f"megatron-{split}.txt"), "w") as f:
            f.write("".join(line + "\n" for line in lines))
        for line in lines:
            ids = list(map(int, line.split()))
            got_ids.extend(t for t in ids[1:] if t != 102)
            seps += ids.count(102)
    # Shuffled sequences cross documents, so compare what survives any order: the multiset of
    # ids, and one separator per non-empty document.
    assert sorted(got_ids) == sorted(t for d in docs for t in d), "ids lost or added"
    assert seps == sum(1 for d in docs if d), "one [SEP] per document"
    versions = [f"python {sys.version.split()[0]}", f"numpy {np.__version__}"]
    try:
        import megatron.core
        versions.append(f"megatron-core {megatron.core.__version__}")
    except Exception:
        versions.append("megatron-core not installed")
    with open(os.path.join(OUT, "VERSIONS-shard.txt"), "w") as f:
        f.write("\n".join(versions) + "\n")
    print("fixtures written to", OUT)


if __name__ == "__main__":
    main()
