#!/usr/bin/env bash
# tupe-attnviz end to end on the tiny trained checkpoints of tests/fixtures/attnviz: the --npy
# matrices equal the independent numpy computation (tests/reference/make_attnviz_fixtures.py)
# for TUPE-A and TUPE-R (the [CLS] row and column included) and the decomposition of a BERT-A
# (the exact mode's five terms sum to the true layer-0 scores); figures, previews, meta.json
# and the errors a user meets.
. "$(dirname "$0")/lib.sh"
P=$TUPE_BIN/tupe-attnviz
F=$TUPE_SRC/tests/fixtures/attnviz
X=$F/expected

# close NAME A B [TOL]: the arrays agree to TOL relative to B's largest value (default 1e-5).
close() {
    local name=$1 a=$2 b=$3 tol=${4:-1e-5}
    run $TESTTOOL npy-diff "$a" "$b"
    check "$name ($(cat $T/out))" awk -v t="$tol" '{ exit !($4 <= t) }' $T/out
}

run $P pos $F/tupe-a --max-pos 48 -o $T/fa --npy $T/a
check "pos TUPE-A: exit 0, one figure per view, .npy and meta.json" eval '[ $rc = 0 ] &&
    [ -s $T/fa/pos-abs.png ] && [ -s $T/fa/pos-softmax.png ] && [ ! -e $T/fa/pos-rel.png ] &&
    [ -s $T/a/pos_abs.npy ] && [ -s $T/a/meta.json ] && has $T/err "wrote $T/fa/pos-abs.png"'
check "pos TUPE-A: the PNG is a PNG" [ "$(head -c 8 $T/fa/pos-abs.png | od -An -tx1 | tr -d ' \n')" = 89504e470d0a1a0a ]
close "pos TUPE-A: V_h equals numpy" $T/a/pos_abs.npy $X/tupe-a/pos_abs.npy
close "pos TUPE-A: softmax over keys equals numpy" $T/a/pos_softmax.npy $X/tupe-a/pos_softmax.npy

run $P pos --checkpoint $F/tupe-r -n 48 --npy $T/r -o $T/fr --format both
check "pos TUPE-R: abs, rel, bias and softmax, PNG and SVG" eval '[ $rc = 0 ] &&
    for v in abs rel bias softmax; do [ -s $T/fr/pos-$v.png ] && [ -s $T/fr/pos-$v.svg ] && [ -s $T/r/pos_$v.npy ] || false; done'
for v in abs rel bias softmax; do
    close "pos TUPE-R: pos_$v equals numpy ([CLS] row and column included)" $T/r/pos_$v.npy $X/tupe-r/pos_$v.npy
done
check "meta.json describes the figures and arrays" eval 'has $T/r/meta.json "\"colormap\": \"coolwarm\"" &&
    has $T/r/meta.json "\"file\": \"pos_rel.npy\"" && has $T/r/meta.json "\"position\": \"tupe-r\"" &&
    has $T/r/meta.json "\"limits\""'
check "SVG: a complete document with the matrices as images" bash -c "head -c 5 $T/fr/pos-abs.svg | grep -q '<?xml' && grep -q '<image' $T/fr/pos-abs.svg && tail -c 20 $T/fr/pos-abs.svg | grep -q '</svg>'"

run $P pos $F/tupe-r -n 48 --heads 1,3 --scale head --view softmax --npy $T/r2 -o $T/one.png
check "--heads, --scale head, --view, -o FILE" eval '[ $rc = 0 ] && [ -s $T/one.png ] &&
    [ "$(grep -c "\"H[13]\"" $T/r2/meta.json)" = 2 ] && head -c 128 $T/r2/pos_softmax.npy | grep -q "(2, 48, 48)" &&
    [ "$(grep -c "^        \[$" $T/r2/meta.json)" = 2 ]'
sed 's/"max_position_embeddings": 32/"max_position_embeddings": 520/; s/"num_attention_heads": 2/"num_attention_heads": 1/' \
    $TUPE_SRC/tests/fixtures/convert/tiny.json >$T/long.json
$TUPE_BUILD/tests/tupe-modeltool init --model $T/long.json --position tupe-a --vocab-size 60 -o $T/long-ck >/dev/null 2>&1
run $P pos $T/long-ck -n 512 --view abs --cell 64 -o $T/huge
check "a figure larger than a PNG holds: usage error naming the size and the --cell that fits" eval \
    '[ $rc = 2 ] && has $T/err "more than the 32767 a PNG holds a side" && has $T/err "give --cell " && [ ! -e $T/huge/pos-abs.png ]'
run $P pos $F/tupe-r -n 16 --view abs -o -
check "-o - writes the one figure to stdout" eval '[ $rc = 0 ] && [ "$(head -c 4 $T/out | tail -c 3)" = PNG ]'
run env TERM=xterm NO_COLOR= $P pos $F/tupe-r -n 8 --view abs,rel --term
check "--term previews with 24-bit colours on stdout, writes no figure" eval '[ $rc = 0 ] && has $T/out "$(printf "\033[48;2;")" &&
    has $T/out "H0  [" && [ ! -e pos-abs.png ]'
run $P pos $F/tupe-r -n 8 --view rel --term -v
check "-v reports the colour range of each figure" eval 'has $T/err "pos-rel: 4 panels of 8 x 8, colours from -"'
run env NO_COLOR=1 $P pos $F/tupe-r -n 8 --view softmax --term -q
check "--term with NO_COLOR: an ASCII ramp" eval '[ $rc = 0 ] && lacks $T/out "$(printf "\033")" && has $T/out "H3  [0," && is_empty $T/err'

# decomp: both modes against numpy; the five exact terms sum to the true scores.
for mode in paper exact; do
    run $P decomp $F/bert-a --vocab $F/vocab.txt --input $F/sentences.txt --decomp $mode --max-len 64 --npy $T/d$mode -o $T/fd$mode
    check "decomp --decomp $mode: exit 0, one figure, lengths reported" eval '[ $rc = 0 ] && [ -s $T/fd$mode/decomp.png ] &&
        has $T/err "lengths differ: cell (i, j) averages the inputs longer than max(i, j): 0-7: 6, 8: 5, 9-11: 4,"'
    terms="ww wp pw pp"; [ $mode = exact ] && terms="$terms rest"
    for t in $terms mean; do
        close "decomp $mode: decomp_$t equals numpy" $T/d$mode/decomp_$t.npy $X/bert-a/$mode/decomp_$t.npy
    done
    close "decomp $mode: counts per position" $T/d$mode/decomp_count.npy $X/bert-a/$mode/decomp_count.npy 0
done
sum=$(for t in ww wp pw pp rest; do printf '%s+' $T/dexact/decomp_$t.npy; done)
run $TESTTOOL npy-diff "${sum%+}" $X/bert-a/exact/logits.npy
check "decomp exact: ww + wp + pw + pp + rest = the true layer-0 scores within 1e-4 ($(cat $T/out))" \
    awk '{ exit !($2 <= 1e-4) }' $T/out
run $P decomp $F/bert-a --vocab $F/vocab.txt --text "w5 w6 w7" --text "W8 w9 w10" --per-head --heads 0-1 -o $T/fph --npy $T/ph
check "decomp --per-head: one figure per term, a panel per head" eval '[ $rc = 0 ] &&
    for t in ww wp pw pp; do [ -s $T/fph/decomp-$t.png ] || false; done && [ ! -e $T/fph/decomp-rest.png ] &&
    head -c 128 $T/ph/decomp_ww.npy | grep -q "(2, 5, 5)" && lacks $T/err "lengths differ"'

# decomp over a shard directory made with the same vocabulary.
printf 'w5 w5 w5 w6 w6 w6 w7 w7 w7\n\nw8 w9 w10 w11\n\nw12 w12 w13 w13 w14 w14 w15 w15\n' >$T/c.txt
tupe-tokenize encode -q --vocab $F/vocab.txt $T/c.txt | tupe-shard write -q -o $T/sh --seq-len 16 --shards 1
run $P decomp $F/bert-a --data $T/sh --max-inputs 2 --npy $T/ds --term
check "decomp --data reads a shard directory (--max-inputs)" eval '[ $rc = 0 ] && has $T/ds/meta.json "\"inputs\": 2"'
run $P decomp $F/bert-a --vocab $F/vocab.txt --text "w5 w6" --npy $T/d1 --term
check "decomp of one input: '... and 1 input' in the title, not '1 inputs'" eval '[ $rc = 0 ] && has $T/d1/meta.json "and 1 input (" && lacks $T/d1/meta.json "1 inputs"'

# attn: the maps of a full forward pass, per layer, labelled with the tokens.
for m in tupe-r bert-a; do
    run $P attn $F/$m --vocab $F/vocab.txt --input $F/sentences.txt --npy $T/at$m -o $T/fat$m
    check "attn $m: one figure per layer, attn.npy, ids.npy, tokens.txt" eval '[ $rc = 0 ] && [ -s $T/fat$m/attn-L0.png ] &&
        [ -s $T/fat$m/attn-L1.png ] && [ "$(head -1 $T/at$m/tokens.txt)" = "[CLS]" ] && [ "$(sed -n 2p $T/at$m/tokens.txt)" = w5 ]'
    close "attn $m: probabilities equal a numpy forward pass" $T/at$m/attn.npy $X/$m/attn.npy 1e-5
    close "attn $m: the token ids" $T/at$m/ids.npy $X/$m/ids.npy 0
done
run $P attn $F/tupe-r --vocab $F/vocab.txt --text "w5 zzz w6" --layers 1 --heads 2 -o $T/a1.svg --npy $T/a1
check "attn --layers --heads -o FILE.svg; unknown words are [UNK]" eval '[ $rc = 0 ] && [ -s $T/a1.svg ] &&
    [ "$(tr "\n" " " <$T/a1/tokens.txt)" = "[CLS] w5 [UNK] w6 [SEP] " ] && head -c 128 $T/a1/attn.npy | grep -q "(1, 1, 5, 5)"'

# attn's locality and symmetry measures (their arithmetic: tests/unit/test_attnstats.c), on a
# RoPE model, whose positional part pos cannot draw.
RO=$TUPE_SRC/tests/fixtures/roformer/rope
V60=$TUPE_SRC/tests/fixtures/convert/vocab.txt
run $P attn $RO --vocab $V60 --text "w5 w6 w7 w8 w9 w10" --measures $T/meas.json --npy $T/ma -o $T/fma
check "attn --measures on rope: JSON per layer and head, the same in measures.json, a note per layer" eval '[ $rc = 0 ] &&
    cmp -s $T/meas.json $T/ma/measures.json && has $T/meas.json "\"position\": \"rope\"" &&
    has $T/meas.json "\"tokens\": 8" && has $T/meas.json "\"uniform_distance\": 2.625" &&
    [ $(grep -c "\"head\":" $T/meas.json) = 4 ] && has $T/err "layer 1: mean distance" && has $T/err "symmetry"'
run $P attn $RO --vocab $V60 --text "w5 w6 w7 w8 w9 w10" --measures - --window 7 -q -o $T/fmb
check "--measures - --window 7 (all 8 tokens): every map's local share is 1, distances within [0, 7]" eval '[ $rc = 0 ] &&
    grep -o "\"local\": [-0-9.e]*" $T/out | awk "{ n++; if (\$2 < 0.999999 || \$2 > 1.000001) bad = 1 } END { exit bad || n != 6 }" &&
    grep -o "\"distance\": [-0-9.e]*" $T/out | awk "{ if (\$2 < 0 || \$2 > 7) bad = 1 } END { exit bad }" &&
    [ ! -s $T/err ]'
run $P attn $RO --vocab $V60 --text "w5" --measures - --term
check "--measures - with --term: usage error" eval '[ $rc = 2 ] && has $T/err "would both write to standard output"'

# Errors.
run $P pos $F/bert-a
check "pos on BERT-A: usage error pointing to decomp" eval '[ $rc = 2 ] && has $T/err "no content-free positional term" && has $T/err "decomp"'
run $P decomp $F/tupe-r --vocab $F/vocab.txt --text "w5"
check "decomp on TUPE: usage error pointing to pos" eval '[ $rc = 2 ] && has $T/err "tupe-attnviz pos"'
run $P pos $F/tupe-a --view rel
check "a view the variant lacks: usage error" eval '[ $rc = 2 ] && has $T/err "--view rel: a tupe-a model has no such term"'
run $P pos $F/tupe-a --view , -o $T/noview
check "an empty --view: usage error, nothing written" eval '[ $rc = 2 ] && has $T/err "--view: empty list" && [ ! -e $T/noview ]'
run $P pos $F/tupe-a --heads 2,7
check "a head out of range: usage error" eval '[ $rc = 2 ] && has $T/err "--heads: expected numbers from 0 to 3"'
run $P pos $F/tupe-a --max-pos 65
check "--max-pos beyond the model: usage error" eval '[ $rc = 2 ] && has $T/err "the model has 64 positions"'
run $P pos $F/tupe-r -o $T/x.png
check "-o FILE with several figures: usage error, nothing written" eval '[ $rc = 2 ] && has $T/err "holds one figure" && [ ! -e $T/x.png ]'
run $P pos $F/tupe-r --view abs -o $T/x.png --format svg
check "-o FILE.png with --format svg: usage error" eval '[ $rc = 2 ] && has $T/err "does not end in .svg"'
run $P pos $F/tupe-r --view abs --term -o -
check "--term with -o -: usage error" eval '[ $rc = 2 ] && has $T/err "both write to standard output"'
run $P pos $T/missing
check "missing checkpoint: exit 66" eval '[ $rc = 66 ] && has $T/err "$T/missing"'
head -99 $F/vocab.txt >$T/v99.txt
run $P attn $F/tupe-r --vocab $T/v99.txt --text "w5"
check "a vocabulary of another size: exit 65" eval '[ $rc = 65 ] && has $T/err "has 99"'
sed 's/^w99$/w100/' $F/vocab.txt >$T/v100.txt
run $P attn $F/tupe-r --vocab $T/v100.txt --text "w5"
check "another vocabulary of the same size: exit 65 (the training state's hash)" eval '[ $rc = 65 ] && has $T/err "another vocabulary"'
run $P attn $F/tupe-r --vocab $F/vocab.txt --text " " -o $T/blank
check "a blank --text: usage error, nothing written" eval '[ $rc = 2 ] && has $T/err "--text: the sentence is blank" && [ ! -e $T/blank ]'
run $P attn $F/tupe-r --vocab $F/vocab.txt --input - -o $T/empty </dev/null
check "empty standard input: exit 65 naming (stdin)" eval '[ $rc = 65 ] && has $T/err "(stdin): no input"'
run $P attn $F/tupe-r --text "w5"
check "--text without --vocab: usage error" eval '[ $rc = 2 ] && has $T/err "--vocab is required"'
run $P decomp $F/bert-a --data $T/sh --vocab $F/vocab.txt
check "--vocab with --data only: usage error" eval '[ $rc = 2 ] && has $T/err "already encoded"'
run $P pos $F/tupe-r -n 8 --npy /dev/null/x
check "uncreatable --npy directory: exit 73" [ $rc = 73 ]
exit $_failed
