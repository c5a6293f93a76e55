#!/usr/bin/env python3
"""Rebuild share/tupe/sample/corpus.txt.zst from the public-domain parts of the shared corpus
(../shared/data/corpus/debian-104m.txt.zst): the Devil's Dictionary, the Jargon File and the
first 1.3 MB of Matthew Henry's Concise Commentary. Offsets come from the part sizes listed in
../shared/data/corpus/debian-104m.SIZES and the part order of get-corpus.sh. Needs `zstd`."""
import os
import subprocess

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SRC = os.path.join(ROOT, "..", "shared", "data", "corpus", "debian-104m.txt.zst")
ORDER = ["bible-web", "bible-kjv", "spurgeon-treasury-of-david", "matthew-henry-concise", "scofield-notes",
         "naves-topical-bible", "gcide-webster1913", "devils-dictionary", "jargon-file"]


def main():
    sizes = {}
    for line in open(SRC.replace(".txt.zst", ".SIZES")):
        f = line.split()
        if len(f) == 4 and f[3].startswith("parts/"):
            sizes[f[3][6:-4]] = int(f[2])
    d = subprocess.run(["zstd", "-dc", SRC], check=True, capture_output=True).stdout
    off, parts = 0, {}
    for p in ORDER:
        parts[p] = d[off:off + sizes[p]]
        off += sizes[p]

    def clean(b):
        return [l for l in b.split(b"\n") if l and b"subType=" not in l
                and not l.startswith(b"abcdefghijklmnopqrstuvwxyz") and not l.startswith(b"!$&'()")]

    mh, n = [], 0
    for l in clean(parts["matthew-henry-concise"]):
        mh.append(l)
        n += len(l) + 1
        if n > 1300000:
            break
    docs = [clean(parts["devils-dictionary"]), clean(parts["jargon-file"])] + [mh[i:i + 40] for i in range(0, len(mh), 40)]
    text = b"\n\n".join(b"\n".join(x) for x in docs) + b"\n"
    out = os.path.join(ROOT, "share", "tupe", "sample", "corpus.txt.zst")
    subprocess.run(["zstd", "-19", "-q", "-f", "-o", out], input=text, check=True)
    print(out, len(text), "bytes,", len(docs), "documents")


if __name__ == "__main__":
    main()
