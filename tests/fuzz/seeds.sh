#!/usr/bin/env bash
# Writes the seed corpora tests/fuzz/corpus/T/ from the test fixtures and small inputs made
# with the programs themselves (run from the source tree after `make`; the output is
# committed, so `make check` and `make fuzz` need nothing from here). Seeds stay small: the
# fuzzer's reach comes from mutating them, not from their size.
#
#   TUPE_BIN=build/cpu/bin TUPE_BUILD=build/cpu tests/fuzz/seeds.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
: "${TUPE_BUILD:=build/$(ls build | grep -v fuzz | head -1)}"
: "${TUPE_BIN:=$TUPE_BUILD/bin}"
TT=$TUPE_BUILD/tests/tupe-testtool
C=tests/fuzz/corpus
F=tests/fixtures
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
fresh() { rm -rf "$C/$1"; mkdir -p "$C/$1"; }

# ---- token streams ---------------------------------------------------------------------------
fresh tokstream
printf '5 6 7\n8 9\n\n10 11 12 13\n' >$T/ids.txt
$TT tok-write --vocab-size 100 -o $C/tokstream/small.tok $T/ids.txt
printf '69999 0 65536\n1\n' >$T/wide.txt
$TT tok-write --vocab-size 70000 --vocab-hash 0123456789abcdef -o $C/tokstream/wide.tok $T/wide.txt
: >$T/none.txt
$TT tok-write --vocab-size 100 -o $T/empty.tok $T/none.txt
cat $C/tokstream/small.tok $T/empty.tok >$C/tokstream/concat.tok

# ---- shard files -----------------------------------------------------------------------------
fresh shard
awk 'BEGIN { srand(3); for (d = 0; d < 12; d++) { n = 1 + int(rand() * 300); l = "";
     for (i = 0; i < n; i++) l = l (i ? " " : "") 5 + int(rand() * 90); print l } }' >$T/docs.txt
$TT tok-write --vocab-size 100 -o $T/docs.tok $T/docs.txt
$TT tok-write --vocab-size 70000 -o $T/docs4.tok $T/docs.txt
# 512 ids a sequence and 4 KiB frames: a few sequences in a few frames.
sp=(--pad 0 --unk 1 --cls 2 --sep 3 --mask 4 --shards 1 --seq-len 512 --frame-size 4K)
shard() { # NAME INPUT OPTIONS...
    local name=$1 in=$2; shift 2
    rm -rf $T/s
    $TUPE_BIN/tupe-shard write -q -o $T/s "${sp[@]}" "$@" $in
    cp $T/s/train-00000.shard $C/shard/$name.shard
}
shard zstd $T/docs.tok
shard raw $T/docs.tok --no-compress
shard doc $T/docs.tok --break doc --no-shuffle
shard wide $T/docs4.tok --no-compress

# ---- manifests -------------------------------------------------------------------------------
fresh manifest
rm -rf $T/s
$TUPE_BIN/tupe-shard write -q -o $T/s "${sp[@]}" --shards 2 --valid-fraction 0.2 $T/docs.tok
cp $T/s/manifest.json $C/manifest/zstd.json
rm -rf $T/s
$TUPE_BIN/tupe-shard write -q -o $T/s "${sp[@]}" --no-compress $T/docs4.tok
cp $T/s/manifest.json $C/manifest/raw.json
rm -rf $T/s
$TUPE_BIN/tupe-shard write -q -o $T/s "${sp[@]:0:12}" --export megatron --valid-fraction 0.2 $T/docs.tok
cp $T/s/manifest.json $C/manifest/megatron.json

# ---- safetensors -----------------------------------------------------------------------------
fresh safetensors
cp $F/safetensors/python.safetensors $F/safetensors/python-meta.safetensors $C/safetensors/
python3 - "$C/safetensors" <<'PY' 2>/dev/null || echo "seeds.sh: no Python safetensors; kept the fixtures only" >&2
import sys, numpy as np
from safetensors.numpy import save_file
d = sys.argv[1]
save_file({"a": np.arange(6, dtype=np.float16).reshape(2, 3), "b": np.zeros((0, 4), np.float32),
           "c": np.array([1.5], np.float64), "i": np.array([1, 2], np.int64),
           "m": np.ones((2, 2), np.uint8)}, d + "/mixed.safetensors", metadata={"k": "v"})
PY

# ---- vocabularies: vocab.txt, dict.txt, codes --------------------------------------------------
fresh vocab
head -120 $F/tokenize/hf-train.vocab >$C/vocab/hf-head.txt
printf '[PAD]\r\n[UNK]\r\n[CLS]\r\n[SEP]\r\n[MASK]\r\n##a\r\n\xc3\xa9t\xc3\xa9\r\n' >$C/vocab/crlf.txt
fresh dict
head -60 $F/tokenize/bpe/dict.txt >$C/dict/head.txt
printf 'a 5\nb@@ 3\n<mask> 1\nthe end 2\n' >$C/dict/mask.txt
fresh bpe
head -60 $F/tokenize/bpe/codes >$C/bpe/head.txt
printf 'l o 9\nlo w</w> 8\ne r</w> 7\nlow er</w> 6\nlower lower</w> 1\n' >$C/bpe/small.txt

# ---- GLUE --------------------------------------------------------------------------------------
# One byte names the file (its place in the task table, tupe_glue_tasks; +128: predictions).
fresh glue
G=${TUPE_DATA:-../shared/data}/glue
k=0
for f in CoLA/train CoLA/dev CoLA/test SST-2/train SST-2/dev SST-2/test MRPC/train MRPC/dev MRPC/test \
         STS-B/train STS-B/dev STS-B/test QQP/train QQP/dev QQP/test MNLI/train MNLI/dev_matched \
         MNLI/dev_mismatched MNLI/test_matched MNLI/test_mismatched QNLI/train QNLI/dev QNLI/test \
         RTE/train RTE/dev RTE/test WNLI/train WNLI/dev WNLI/test diagnostic/diagnostic; do
    src=$G/$f.tsv
    [ -f "$src" ] || src=$F/glue/data/$f.tsv
    if [ -f "$src" ]; then
        { printf "\\$(printf %o $k)"; head -6 "$src" | cut -c1-300; } >$C/glue/$(echo $f | tr / -).tsv
    fi
    k=$((k + 1))
done
{ printf '\202'; printf 'index\tprediction\n0\t1\n2\t0\n1\t1\n'; } >$C/glue/pred-cola.tsv
{ printf '\213'; printf 'index\tprediction\n0\t4.250\n1\t0.000\n'; } >$C/glue/pred-stsb.tsv
{ printf '\223'; printf '\xef\xbb\xbfindex\tprediction\r\n0\tneutral\r\n1\tentailment\r\n'; } >$C/glue/pred-mnli.tsv

# ---- model configurations ---------------------------------------------------------------------
fresh config
cp share/tupe/models/*.json $C/config/
printf '{"position": "bert-ad", "vocab_size": 100, "hidden_size": 32, "num_attention_heads": 4,\n "num_labels": 3, "type_vocab_size": 2, "layer_norm_eps": 1e-12}\n' >$C/config/small.json
printf '{"model_type": "tupe", "hidden_act": "gelu", "position": "tupe-a", "untie_cls": false}' >$C/config/tie.json

# ---- checkpoints -------------------------------------------------------------------------------
# byte 0: flags (1 heads optional, 2 load the optimizer); bytes 1-4: the model file's length.
# (The training state records the time a run took: these seeds differ from run to run.)
fresh checkpoint
awk 'BEGIN { srand(5); for (d = 0; d < 40; d++) { l = ""; for (i = 0; i < 6; i++) l = l (i ? " " : "") 5 + int(rand() * 15); print l } }' >$T/ck.txt
$TT tok-write --vocab-size 20 -o $T/ck.tok $T/ck.txt
$TUPE_BIN/tupe-shard write -q -o $T/cks --seq-len 8 --pad 0 --unk 1 --cls 2 --sep 3 --mask 4 --shards 1 $T/ck.tok
pack() { # OUT FLAGS MODEL [OPTIMIZER]
    local n; n=$(stat -c %s "$3")
    { printf "\\$(printf %o $2)"; printf "\\$(printf %o $((n & 255)))\\$(printf %o $((n >> 8 & 255)))\\$(printf %o $((n >> 16 & 255)))\\0";
      cat "$3"; [ $# -lt 4 ] || cat "$4"; } >"$1"
}
for pos in bert-a tupe-r bert-ad; do
    printf '{"position": "%s", "hidden_size": 8, "num_hidden_layers": 1, "num_attention_heads": 2,\n "intermediate_size": 16, "max_position_embeddings": 8, "rel_pos_buckets": 8, "max_rel_pos": 16}\n' $pos >$T/m.json
    rm -rf $T/run
    $TUPE_BIN/tupe-pretrain train -q --data $T/cks --model $T/m.json -o $T/run --steps 1 --batch 2 --threads 1 --eval-every 0
    ck=$T/run/checkpoints/step-00000001
    pack $C/checkpoint/$pos-opt.bin 2 $ck/model.safetensors $ck/optimizer.safetensors
    pack $C/checkpoint/$pos.bin 1 $ck/model.safetensors
done

# ---- corpus sources and framing ----------------------------------------------------------------
fresh input
fresh corpus
printf 'The first line of a document.\nIts second line.\n\nAnother document, caf\xc3\xa9 \xe4\xb8\xad.\n' >$T/plain.txt
printf '<doc id="1" url="u" title="T">\nT\n\nText &lt;b&gt; &amp; more.\n</doc>\n<doc id="2">\nU\nline\n</doc>\n' >$T/wiki.txt
printf '\xef\xbb\xbfBOM and CRLF\r\nline two\r\n\r\nnext\r\n' >$T/crlf.txt
printf 'bad \xff byte\nand \xc3 cut\n\ngood\n' >$T/bad.txt
cp $T/plain.txt $C/input/plain.txt
zstd -q -c $T/plain.txt >$C/input/plain.zst
gzip -n -c $T/wiki.txt >$C/input/wiki.gz
xz -c $T/crlf.txt >$C/input/crlf.xz
bzip2 -c $T/plain.txt >$C/input/plain.bz2
(cd $T && tar --format=ustar --mtime=@0 --owner=0 --group=0 -cf - plain.txt wiki.txt) >$C/input/two.tar
touch -d @0 $T/plain.txt $T/bad.txt
(cd $T && rm -f two.zip && TZ=UTC zip -q -X two.zip plain.txt bad.txt && cp two.zip "$OLDPWD/$C/input/two.zip")
# corpus: byte 0 = framing (0 blank, 1 line, 2 wiki) | invalid << 2 | keep title << 4 | chunk << 5
frame() { printf "\\$(printf %o $1)"; cat "$2"; }
frame 0 $T/plain.txt >$C/corpus/blank.txt
frame $((1 | 1 << 5)) $T/crlf.txt >$C/corpus/line-crlf.txt
frame $((2 | 1 << 4 | 2 << 5)) $T/wiki.txt >$C/corpus/wiki.txt
frame $((0 | 1 << 2)) $T/bad.txt >$C/corpus/bad-replace.txt
frame 0 $T/bad.txt >$C/corpus/bad-error.txt
frame $((0 | 3 << 5)) $C/input/plain.zst >$C/corpus/blank.zst
frame 2 $C/input/two.tar >$C/corpus/wiki.tar

# ---- Megatron exports: bytes 0-3 the .idx length, the .idx, the .bin ------------------------------
fresh megatron
for f in train-00000 valid-00000; do
    n=$(stat -c %s $F/shard/megatron/$f.idx)
    { printf "\\$(printf %o $((n & 255)))\\$(printf %o $((n >> 8 & 255)))\\0\\0"; cat $F/shard/megatron/$f.idx $F/shard/megatron/$f.bin; } >$C/megatron/$f
done

# ---- NumPy arrays ------------------------------------------------------------------------------
fresh npy
cp $F/convert/npy/word_embeddings.npy $C/npy/f4.npy
cp $F/attnviz/expected/bert-a/ids.npy $C/npy/ids.npy
python3 - "$C/npy" <<'PY' 2>/dev/null || echo "seeds.sh: no numpy; kept the fixtures only" >&2
import sys, numpy as np
d = sys.argv[1]
np.save(d + "/scalar.npy", np.float64(2.5))
np.save(d + "/bool.npy", np.array([[True, False]]))
np.save(d + "/empty.npy", np.zeros((0, 3), np.uint16))
np.lib.format.write_array(open(d + "/v2.npy", "wb"), np.arange(4, dtype=np.int8), version=(2, 0))
PY
