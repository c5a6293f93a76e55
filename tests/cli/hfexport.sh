#!/usr/bin/env bash
# tupe-convert export --to hf of every variant, against what transformers computed from it
# (tests/reference/make_hf_fixtures.py, run under each transformers version in VERSIONS): the
# export is the directory transformers read (its files' hashes), tupe's logits equal the ones
# AutoModelForMaskedLM / AutoModelForSequenceClassification computed on a padded batch, and
# its attention maps their output_attentions; the export imports back bit for bit, and
# AutoTokenizer's ids on the tokenizer's hard cases are tupe-tokenize's.
. "$(dirname "$0")/lib.sh"
F=$TUPE_SRC/tests/fixtures/hf
CV=$TUPE_SRC/tests/fixtures/convert
MT=$TUPE_BUILD/tests/tupe-modeltool
C=tupe-convert

files() { export_files "$1"; }

versions=$(ls $F/*.logits.*.safetensors | sed 's/.*\.logits\.\(.*\)\.safetensors/\1/' | sort -u)
[ "$(echo "$versions" | wc -l)" -ge 2 ]
check "fixtures from two transformers versions ($(echo $versions))" [ $? = 0 ]

for f in $F/*.files; do
    case=$(basename $f .files)
    case $case in tokenizer.*) continue ;; esac
    run $C export --to hf $F/$case -o $T/$case-hf --vocab $CV/vocab.txt
    [ $rc = 0 ] && diff <(files $T/$case-hf) $f >$T/out
    verdict "$case: the export is the one transformers read"
    in=$F/input.safetensors
    [ $case = tupe-r-types ] && in=$F/input-types.safetensors
    for v in $versions; do
        run $MT logits -c $F/$case --input $in --expect $F/$case.logits.$v.safetensors --tol 1e-4
        d=$(sed -n 's/.*max abs difference \([^ ]*\).*/\1/p' $T/out); [ $rc = 0 ]
        verdict "$case: tupe's logits are transformers $v's ($d)"
    done
    tupe-attnviz attn -q -c $F/$case --vocab $CV/vocab.txt -t "w7 w12 w33 w5 w41 w59 w8" \
        -o $T/fig-$case --npy $T/attn-$case >/dev/null 2>&1
    for v in $versions; do
        run $TESTTOOL npy-diff $T/attn-$case/attn.npy $F/$case.attn.$v.npy
        d=$(cut -d' ' -f1,2 $T/out); [ $rc = 0 ] && awk '{ exit !($2 <= 1e-5) }' $T/out
        verdict "$case: tupe-attnviz's attention maps are transformers $v's output_attentions ($d)"
    done
    run $C import --from hf $T/$case-hf -o $T/$case-back
    run $MT diff $F/$case $T/$case-back
    [ $rc = 0 ]
    verdict "$case: imports back bit for bit"
done

has $T/tupe-r-hf/config.json '"AutoModelForMaskedLM": "modeling_tupe.TupeForMaskedLM"' &&
    has $T/tupe-r-hf/config.json '"architectures": [' && [ -s $T/tupe-r-hf/modeling_tupe.py ] &&
    cmp -s $T/tupe-r-hf/modeling_tupe.py $TUPE_SRC/share/tupe/hf/modeling_tupe.py &&
    [ ! -e $T/bert-a-hf/modeling_tupe.py ] && has $T/bert-a-hf/config.json '"model_type": "bert"'
verdict "the variants carry modeling_tupe.py and auto_map; BERT-A stays a plain BERT"
has $T/cls-tupe-r-hf/config.json '"TupeForSequenceClassification"' &&
    has $T/cls-tupe-r-hf/config.json '"1": "not_entailment"' &&
    has $T/reg-bert-r-hf/config.json '"problem_type": "regression"'
verdict "classification and regression heads: architectures, id2label, problem_type"

# ---- tokenizer.json ------------------------------------------------------------------------
V=$BERT_VOCAB
printf '{"hidden_size": 4, "num_hidden_layers": 1, "num_attention_heads": 1, "intermediate_size": 8, "max_position_embeddings": 512}\n' >$T/mini.json
$MT init --model $T/mini.json --position tupe-a --vocab-size 30522 -o $T/tokck >/dev/null 2>&1
zstd -dcq $TUPE_SRC/tests/fixtures/tokenize/edge.txt.zst >$T/edge.txt
for casing in uncased cased; do
    run $C export --to hf $T/tokck -o $T/tok-$casing --vocab $V --$casing
    [ $rc = 0 ] && diff <(files $T/tok-$casing) $F/tokenizer.$casing.files >$T/out
    verdict "tokenizer.json ($casing): the export AutoTokenizer read"
    lc=--lowercase; [ $casing = cased ] && lc=--cased
    run tupe-tokenize encode -q --vocab $V $lc --docs line --add-special --match-special --format text $T/edge.txt -o $T/ids.$casing
    n=$(wc -l <$T/edge.txt); [ $rc = 0 ] && zstd -dcq $F/tokenizer.$casing.ids.zst | cmp -s - $T/ids.$casing
    verdict "AutoTokenizer ($casing) gives tupe-tokenize's ids on $n hard lines"
done
B=$TUPE_SRC/tests/fixtures/tokenize/bpe
$MT init --model $T/mini.json --position tupe-r --vocab-size $(tupe-tokenize info --vocab $B | sed -n 's/^size  *//p') -o $T/bpeck >/dev/null 2>&1
run $C export --to hf $T/bpeck -o $T/bpe-hf --vocab $B
[ $rc = 0 ] && [ ! -e $T/bpe-hf/tokenizer.json ] && [ -s $T/bpe-hf/codes ] && [ -s $T/bpe-hf/modeling_tupe.py ]
verdict "a BPE vocabulary gets no tokenizer.json"
exit $_failed
