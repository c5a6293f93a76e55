#!/usr/bin/env bash
# tupe-convert end to end, against fixtures made by transformers and the PyTorch reference
# (tests/reference/make_convert_fixtures.py): our BERT-A export is what transformers reads and
# computes the same logits from; BERTs saved by transformers (plain, legacy names, sharded,
# classification) and the authors' fairseq TUPE names import to the same function; every
# variant survives tupe -> hf -> tupe bit for bit; casts stay within their rounding error;
# .npy files are numpy's bytes; malformed inputs are refused with the place and exit 65/66.
. "$(dirname "$0")/lib.sh"
F=$TUPE_SRC/tests/fixtures/convert
MT=$TUPE_BUILD/tests/tupe-modeltool
C=tupe-convert

# ---- info ------------------------------------------------------------------------------------
run $C info $F/bert-a
[ $rc = 0 ] && has $T/out "tensors     41" &&
    has $T/out "parameters  21276 (F32 21276 elements)" && has $T/out '"position":"bert-a"' &&
    has $T/out "hashes      verified" && grep -Eq '^embeddings.word_embeddings.weight +F32 +\[60, 32\]$' $T/out
verdict "info: tensors, parameters, configuration, verified hashes"
run $C info --format json $F/hf-sharded
[ $rc = 0 ] && has $T/out '"files": 3' && has $T/out '"hf_config"' &&
    has $T/out '"name": "bert.encoder.layer.1.output.LayerNorm.weight"'
verdict "info --format json over a sharded model"

# ---- tupe -> transformers -----------------------------------------------------------------------
run $C export --to hf $F/bert-a -o $T/bert-a-hf --vocab $F/vocab.txt
[ $rc = 0 ] &&
    cmp -s $T/bert-a-hf/model.safetensors $F/bert-a-hf/model.safetensors &&
    cmp -s $T/bert-a-hf/vocab.txt $F/bert-a-hf/vocab.txt && cmp -s $T/bert-a-hf/tokenizer_config.json $F/bert-a-hf/tokenizer_config.json &&
    diff <(grep -v tupe_version $T/bert-a-hf/config.json) <(grep -v tupe_version $F/bert-a-hf/config.json) >/dev/null
verdict "export: the committed directory, byte for byte (config.json but its tupe_version)"
run $MT logits -c $F/bert-a --input $F/input.safetensors --expect $F/bert-a-hf.logits.safetensors --tol 1e-4
[ $rc = 0 ]
verdict "our BERT-A logits equal transformers' BertForMaskedLM on our export"

# ---- transformers -> tupe -----------------------------------------------------------------------
run $C import --from hf $F/hf-bert -o $T/hb -v
[ $rc = 0 ] && has $T/err "bert-a, 21340 parameters"
verdict "import a BertForMaskedLM saved by transformers"
run $MT logits -c $T/hb --input $F/input.safetensors --expect $F/hf-bert.logits.safetensors
[ $rc = 0 ]
verdict "its logits equal transformers' (eps 1e-12, token types)"
run $C import --from hf $F/hf-legacy -o $T/hl -v
[ $rc = 0 ] &&
    has $T/err "legacy LayerNorm.gamma/beta" && has $T/err "'bert.embeddings.position_ids' dropped"
verdict "legacy gamma/beta names, position_ids buffer, tied decoder present: noted"
run $MT diff $T/hb $T/hl
[ $rc = 0 ]
verdict "legacy names import to the same tensors"
run $C import --from hf $F/hf-sharded -o $T/hs
run $MT diff $T/hb $T/hs
[ $rc = 0 ]
verdict "a sharded model (index.json) imports to the same tensors"
run $C import --from hf $F/hf-cls -o $T/hc
[ $rc = 0 ]
verdict "BertForSequenceClassification: pooler + classifier become the head"
run $MT logits -c $T/hc --input $F/input.safetensors --expect $F/hf-cls.logits.safetensors
[ $rc = 0 ]
verdict "its logits equal transformers'"
run $C info $T/hc
has $T/out '"labels":["contradiction","entailment","neutral"]' &&
    has $T/out '"task":"MNLI"'
verdict "labels and task carried into the training state"
run $C export --to hf $T/hc -o $T/hc-hf --vocab $F/vocab.txt
[ $rc = 0 ] &&
    has $T/hc-hf/config.json '"BertForSequenceClassification"' && has $T/hc-hf/config.json '"2": "neutral"' &&
    has $T/hc-hf/config.json '"finetuning_task": "MNLI"' && has $T/hc-hf/config.json '"type_vocab_size": 2'
verdict "and back: BertForSequenceClassification with id2label"
run $C import --from hf $T/hc-hf -o $T/hc2
run $MT diff $T/hc $T/hc2
[ $rc = 0 ]
verdict "classification round trip is bit-identical"
run $C import --from hf $F/hf-bare -o $T/hbare --seed 3 -v
[ $rc = 0 ] &&
    has $T/err "'pooler.dense.weight' dropped" && has $T/err "no masked-LM head (cls.predictions.*): initialized from seed 3"
verdict "a bare BertModel: names without bert., pooler dropped, masked-LM head from the seed"
$C npy $T/hb -t encoder.layer.1.output.dense.weight -o $T/a.npy && $C npy $T/hbare -t encoder.layer.1.output.dense.weight -o $T/b.npy
cmp -s $T/a.npy $T/b.npy
verdict "its encoder is the one it was saved from"
run $C import --from hf $F/hf-cls -o $T/x --heads 2
[ $rc = 2 ] && has $T/err "apply to --from fairseq"
verdict "--heads is refused with --from hf (exit 2)"

# ---- fairseq -> tupe ----------------------------------------------------------------------------
run $C import --from fairseq $F/fairseq/tupe-r.safetensors -o $T/fr -v
[ $rc = 0 ] &&
    has $T/err "tupe-r, 2 layers, 2 heads, vocabulary 60" && has $T/err "'decoder.sentence_encoder.version' ignored"
verdict "fairseq TUPE-R: sizes and heads from the tensors, version buffer ignored"
run $MT logits -c $T/fr --input $F/input.safetensors --expect $F/fairseq/tupe-r.logits.safetensors
[ $rc = 0 ]
verdict "its logits equal the PyTorch reference's (fused in_proj split, pos rows kept)"
run $C import --from fairseq $F/fairseq/tupe-a-cls.safetensors -o $T/fa
[ $rc = 65 ] && has $T/err "give the model's number of heads with --heads"
verdict "TUPE-A without args: the head count is asked for"
run $C import --from fairseq $F/fairseq/tupe-a-cls.safetensors -o $T/fa --heads 2 -v
[ $rc = 0 ] &&
    has $T/err "'decoder.lm_head.dense.weight' dropped"
verdict "--heads 2: the classification head taken, the masked-LM head dropped"
run $MT logits -c $T/fa --input $F/input.safetensors --expect $F/fairseq/tupe-a-cls.logits.safetensors
[ $rc = 0 ]
verdict "its logits equal the PyTorch reference's"
run $C import --from fairseq $F/fairseq/tupe-a-cls.safetensors -o $T/fa2 --heads 2 --head nope
[ $rc = 65 ] && has $T/err "no classification head 'nope' (the file has: sentence_classification_head)"
verdict "--head names a head that is not there: refused"

# ---- round trips: every variant, both heads ------------------------------------------------------
for v in bert-a bert-r bert-ad tupe-a tupe-a-tie tupe-r; do
    p=${v%-tie}; tie=; [ $v = tupe-a-tie ] && tie=--tie-cls
    $MT init --model $F/tiny.json --position $p $tie --vocab-size 60 --seed 4 -o $T/rt-$v >/dev/null 2>&1
    run $C export --to hf $T/rt-$v -o $T/rt-$v-hf --vocab $F/vocab.txt
    ok1=$rc
    run $C import --from hf $T/rt-$v-hf -o $T/rt-$v-back
    run $MT diff $T/rt-$v $T/rt-$v-back
    [ $ok1 = 0 ] && [ $rc = 0 ]
    verdict "tupe -> hf -> tupe, $v: bit-identical tensors and configuration"
done
has $T/rt-bert-a-hf/config.json '"model_type": "bert"' && has $T/rt-bert-a-hf/config.json '"type_vocab_size": 1' &&
    has $T/rt-tupe-r-hf/config.json '"model_type": "tupe"' && has $T/rt-tupe-r-hf/config.json '"position_embedding_type": "tupe-r"' &&
    has $T/rt-tupe-a-tie-hf/config.json '"untie_cls": false' && has $T/rt-bert-ad-hf/config.json '"attn_scale_factor": 4'
verdict "bert-a exports as model_type bert with a zero token-type row; the others as tupe"
run $C info $T/rt-tupe-r-hf
has $T/out "bert.tupe.pos.weight" && has $T/out "bert.tupe.pos_q.bias" &&
    grep -Eq '^bert.tupe.rel_bias.weight +F32 +\[33, 2\]$' $T/out && has $T/out "bert.tupe.pos_ln.weight"
verdict "the TUPE parts under bert.tupe.*"
$MT init --model $F/tiny.json --position tupe-r --vocab-size 60 --labels 1 \
    --train-state '{"task":"STS-B","labels":[],"regression":true}' -o $T/reg >/dev/null 2>&1
run $C export --to hf $T/reg -o $T/reg-hf --vocab $F/vocab.txt
[ $rc = 0 ] &&
    has $T/reg-hf/config.json '"problem_type": "regression"' && has $T/reg-hf/config.json '"TupeForSequenceClassification"'
verdict "a regression head: problem_type regression, one label"
run $C import --from hf $T/reg-hf -o $T/reg-back
run $MT diff $T/reg $T/reg-back
[ $rc = 0 ]
verdict "regression round trip is bit-identical"
run $C export --to hf $T/rt-tupe-r -o $T/rt-bf16 --vocab $F/vocab.txt --dtype bf16
run $C import --from hf $T/rt-bf16 -o $T/rt-bf16-back
run $MT diff --rtol 0.00390625 $T/rt-tupe-r $T/rt-bf16-back
[ $rc = 0 ] && has $T/rt-bf16/config.json '"dtype": "bfloat16"'
verdict "export --dtype bf16 imports back within bf16 rounding"

# ---- cast ------------------------------------------------------------------------------------
run $C cast --dtype bf16 $F/bert-a -o $T/c16
[ $rc = 0 ] && has $T/out "41 of 41 tensors cast to BF16" &&
    has $T/out "embeddings.word_embeddings.weight                  F32   BF16"
verdict "cast to bf16: a report per tensor"
run $C cast --dtype fp32 $T/c16 -o $T/c32 -q
run $MT diff --rtol 0.00390625 $F/bert-a $T/c32
[ $rc = 0 ]
verdict "fp32 -> bf16 -> fp32 within bf16 error (2^-8 relative)"
run $C info $T/c16
[ $rc = 0 ] && has $T/out "hashes      verified" &&
    has $T/out "(BF16 21276 elements)"
verdict "the cast checkpoint's hashes are recomputed and verify"
run $C export --to hf $T/c16 -o $T/c16-hf --vocab $F/vocab.txt
[ $rc = 0 ]
verdict "a bf16 checkpoint exports"
run $C cast --dtype fp16 --format json $F/hf-bert/model.safetensors -o $T/h16.safetensors
[ $rc = 0 ] && has $T/out '"dtype": "F16"' && has $T/out '"overflow": 0'
verdict "cast a file, report as JSON"
sh -c "$C cast --dtype bf16 $F/hf-bert/model.safetensors -o - >$T/stdout.safetensors 2>$T/err"
run $C info $T/stdout.safetensors
[ $rc = 0 ] && has $T/out "(BF16 21340 elements)"
verdict "cast -o - writes the file to stdout (the report to stderr)"
run $C cast --dtype bf16 $F/bert-a -o -
[ $rc = 2 ]
verdict "a directory cannot be cast to stdout (exit 2)"

# ---- npy -------------------------------------------------------------------------------------
run $C npy $F/bert-a -t embeddings.word_embeddings.weight -o $T/w.npy
[ $rc = 0 ] && cmp -s $T/w.npy $F/npy/word_embeddings.npy
verdict "npy: numpy.save's bytes exactly"
# A FIFO (or /dev/null) as -o is written in place, not replaced by a file renamed over it.
mkfifo $T/fifo
cat $T/fifo >$T/fifo.out &
catpid=$!
run $C npy $F/bert-a -t embeddings.word_embeddings.weight -o $T/fifo
for i in $(seq 1 50); do kill -0 $catpid 2>/dev/null || break; sleep 0.1; done
kill $catpid 2>/dev/null; wait $catpid 2>/dev/null
[ $rc = 0 ] && [ -p $T/fifo ] && cmp -s $T/fifo.out $T/w.npy
verdict "-o a FIFO: written through it, the FIFO left in place"
run $C npy $T/c16 --raw-bf16 -t embeddings.word_embeddings.weight -o $T/w16.npy
[ $rc = 0 ] && cmp -s $T/w16.npy $F/npy/word_embeddings.bf16.npy
verdict "npy --raw-bf16: the bf16 bits as uint16, numpy's bytes"
run $C npy $F/hf-legacy -o $T/npyall -v
[ $rc = 0 ] && [ "$(ls $T/npyall | wc -l)" = 45 ] &&
    [ -s "$T/npyall/bert.embeddings.position_ids.npy" ] && has $T/err "45 .npy files written"
verdict "npy of every tensor into a directory (an int64 buffer too)"
run $C npy $F/bert-a -t nope -o $T/nope.npy
[ $rc = 65 ] && has $T/err "tensor 'nope': not in this file" && [ ! -e $T/nope.npy ]
verdict "npy of a tensor that is not there: exit 65, named"

# files_of DIR: sha256 of every file of an export, config.json without its tupe_version line
files_of() {
    (cd "$1" && for f in *; do
        if [ $f = config.json ]; then grep -v '"tupe_version"' $f | sha256sum | sed "s/ .*/  $f/"
        else sha256sum $f; fi; done)
}

# ---- RoFormer (tests/reference/make_roformer_fixtures.py) ----------------------------------------
R=$TUPE_SRC/tests/fixtures/roformer
run $C import --from hf $R/hf-roformer -o $T/ro -v
[ $rc = 0 ] && has $T/err "rope, 20316 parameters" && $C info $T/ro >$T/info 2>&1 &&
    has $T/info '"rope_layout":"interleaved"' && has $T/info '"type_vocab_size":2'
verdict "import a RoFormerForMaskedLM saved by transformers: rope, interleaved, token types"
run $MT logits -c $T/ro --input $F/input.safetensors --expect $R/hf-roformer.logits.safetensors --tol 1e-5
d=$(sed -n 's/.*max abs difference \([^ ]*\).*/\1/p' $T/out); [ $rc = 0 ]
verdict "its logits equal transformers' RoFormerForMaskedLM ($d)"
run $MT logits -c $T/ro --input $R/input-types.safetensors --expect $R/hf-roformer-types.logits.safetensors --tol 1e-5
[ $rc = 0 ]
verdict "... with token types too"
run $C import --from hf $R/hf-roformer-bare -o $T/robare --seed 3 -v
[ $rc = 0 ] && has $T/err "no masked-LM head (cls.predictions.*): initialized from seed 3" &&
    $C npy $T/ro -t encoder.layer.1.attention.self.key.weight -o $T/ra.npy &&
    $C npy $T/robare -t encoder.layer.1.attention.self.key.weight -o $T/rb.npy && cmp -s $T/ra.npy $T/rb.npy
verdict "a bare RoFormerModel: names without roformer., its encoder, the head from the seed"
run $C export --to hf $T/ro -o $T/ro-hf --vocab $F/vocab.txt
[ $rc = 0 ] && has $T/ro-hf/config.json '"RoFormerForMaskedLM"' && has $T/ro-hf/config.json '"rotary_value": false'
verdict "and back: RoFormerForMaskedLM"
run $C import --from hf $T/ro-hf -o $T/ro2
run $MT diff $T/ro $T/ro2
[ $rc = 0 ]
verdict "RoFormer round trip is bit-identical"
run $C import --from hf $R/hf-roformer-cls -o $T/rocls
[ $rc = 65 ] && has $T/err "hf-roformer-cls: a RoFormer classification head (classifier.*)" && [ ! -e $T/rocls ]
verdict "RoFormerForSequenceClassification: refused (GELU in its head, tanh in tupe's), saying what to do"
run $C import --from hf $R/bad/sinusoid -o $T/rosin
[ $rc = 65 ] && has $T/err "'roformer.encoder.embed_positions.weight': row 3 column 1" && [ ! -e $T/rosin ]
verdict "a sinusoidal table that is not RoFormer's: refused, naming the place"
cp -r $R/hf-roformer $T/rov && sed -i 's/"rotary_value": false/"rotary_value": true/' $T/rov/config.json
run $C import --from hf $T/rov -o $T/rov-ck
[ $rc = 65 ] && has $T/err '"rotary_value" must be false'
verdict "rotary_value true: refused, naming the field"
cp -r $R/hf-roformer $T/roe && sed -i 's/"embedding_size": 32/"embedding_size": 16/' $T/roe/config.json
run $C import --from hf $T/roe -o $T/roe-ck
[ $rc = 65 ] && has $T/err '"embedding_size" 16 differs from hidden_size 32'
verdict "embedding_size other than hidden_size: refused, naming the field"
for case in rope rope-half; do
    in=$F/input.safetensors; [ $case = rope ] && in=$R/input-types.safetensors
    run $C export --to hf $R/$case -o $T/$case-hf --vocab $F/vocab.txt
    [ $rc = 0 ] && files_of $T/$case-hf | diff - $R/$case.files >$T/out
    verdict "$case: the export is the RoFormerForMaskedLM transformers read"
    run $MT logits -c $R/$case --input $in --expect $R/$case.logits.safetensors --tol 1e-4
    d=$(sed -n 's/.*max abs difference \([^ ]*\).*/\1/p' $T/out); [ $rc = 0 ]
    verdict "$case: tupe's logits are transformers' RoFormerForMaskedLM's on its export ($d)"
done
sed 's/"position": "bert-a"/"position": "rope", "rope_layout": "half"/' $F/tiny.json >$T/ropehalf.json
$MT init --model $T/ropehalf.json --vocab-size 60 --seed 4 -o $T/ropehalf >/dev/null 2>&1
$MT logits -c $T/ropehalf --input $F/input.safetensors -o $T/ropehalf.logits >/dev/null 2>&1
run $C export --to hf $T/ropehalf -o $T/ropehalf-hf --vocab $F/vocab.txt
[ $rc = 0 ] && run $C import --from hf $T/ropehalf-hf -o $T/ropehalf-back && $C info $T/ropehalf-back >$T/info 2>&1 &&
    has $T/info '"rope_layout":"interleaved"' &&
    run $MT logits -c $T/ropehalf-back --input $F/input.safetensors --expect $T/ropehalf.logits --tol 1e-5
[ $rc = 0 ]
verdict "the half-split layout exports as RoFormer's interleaved one (rows permuted), the same function"
# export_refused NAME SED TEXT VERDICT [init options]: tiny.json changed by SED, initialized (with
# the options) and exported to HF: refused (exit 2) saying TEXT, nothing written
export_refused() {
    local n=$1 e=$2 text=$3 what=$4
    shift 4
    sed "$e" $F/tiny.json >$T/$n.json
    $MT init --model $T/$n.json --vocab-size 60 "$@" -o $T/$n >/dev/null 2>&1
    run $C export --to hf $T/$n -o $T/$n-hf --vocab $F/vocab.txt
    [ $rc = 2 ] && has $T/err "$text" && [ ! -e $T/$n-hf ]
    verdict "$what"
}
export_refused rope100 's/"position": "bert-a"/"position": "rope", "rope_base": 100/' \
    "rope_base 100, but RoFormer" "export of a rope model with another base: refused"
export_refused ropecls 's/"position": "bert-a"/"position": "rope"/' "RoFormerForSequenceClassification applies hidden_act" \
    "export of a rope classifier: refused, saying why" --labels 2

# ---- DeBERTa v2/v3 (tests/reference/make_deberta_fixtures.py) -------------------------------------
DB=$TUPE_SRC/tests/fixtures/deberta
RI=$TUPE_SRC/tests/fixtures/roformer/input-types.safetensors
run $C import --from hf $DB/hf-deberta -o $T/db -v
[ $rc = 0 ] && has $T/err "deberta, " && $C info $T/db >$T/info 2>&1 &&
    has $T/info '"position":"deberta"' && has $T/info '"rel_pos_buckets":8' && has $T/info '"max_rel_pos":10' &&
    has $T/info '"type_vocab_size":2' && has $T/info '"layer_norm_eps":1e-7'
verdict "import a DebertaV2ForMaskedLM saved by transformers: deberta, its buckets, token types"
run $MT logits -c $T/db --input $F/input.safetensors --expect $DB/hf-deberta.logits.safetensors --tol 1e-5
d=$(sed -n 's/.*max abs difference \([^ ]*\).*/\1/p' $T/out)
[ $rc = 0 ]
verdict "its logits equal transformers' DebertaV2ForMaskedLM ($d)"
run $MT logits -c $T/db --input $RI --expect $DB/hf-deberta-types.logits.safetensors --tol 1e-5
[ $rc = 0 ]
verdict "... with token types too"
run $C import --from hf $DB/hf-deberta-v3head -o $T/db3
run $MT logits -c $T/db3 --input $F/input.safetensors --expect $DB/hf-deberta.logits.safetensors --tol 1e-5
[ $rc = 0 ]
verdict "the newer head (legacy false, lm_predictions.lm_head.*) reads as the same model"
run $C import --from hf $DB/hf-deberta-bare -o $T/dbbare --seed 3 -v
[ $rc = 0 ] && has $T/err "no masked-LM head (cls.predictions.*): initialized from seed 3" &&
    $C npy $T/db -t position.rel_embeddings.weight -o $T/da.npy &&
    $C npy $T/dbbare -t position.rel_embeddings.weight -o $T/dbb.npy && cmp -s $T/da.npy $T/dbb.npy
verdict "a bare DebertaV2Model: names without deberta., its encoder and relative table, the head from the seed"
run $C export --to hf $T/db -o $T/db-hf --vocab $F/vocab.txt
[ $rc = 0 ] && has $T/db-hf/config.json '"DebertaV2ForMaskedLM"' && has $T/db-hf/config.json '"share_att_key": true' &&
    run $C import --from hf $T/db-hf -o $T/db2 && run $MT diff $T/db $T/db2
[ $rc = 0 ]
verdict "and back: DebertaV2ForMaskedLM, bit-identical"
run $C export --to hf $DB/deberta -o $T/deberta-hf --vocab $F/vocab.txt
[ $rc = 0 ] && files_of $T/deberta-hf | diff - $DB/deberta.files >$T/out
verdict "deberta: the export is the DebertaV2ForMaskedLM transformers read"
run $MT logits -c $DB/deberta --input $F/input.safetensors --expect $DB/deberta.logits.safetensors --tol 1e-4
d=$(sed -n 's/.*max abs difference \([^ ]*\).*/\1/p' $T/out)
[ $rc = 0 ]
verdict "deberta: tupe's logits are transformers' DebertaV2ForMaskedLM's on its export, padded batch ($d)"
run $C import --from hf $DB/hf-deberta-cls -o $T/dbcls
[ $rc = 65 ] && has $T/err "hf-deberta-cls: a DeBERTa classification head" && [ ! -e $T/dbcls ]
verdict "DebertaV2ForSequenceClassification: refused (its ContextPooler), saying what to do"
for f in 'share_att_key/"share_att_key": true/"share_att_key": false' \
         'position_biased_input/"position_biased_input": false/"position_biased_input": true' \
         'relative_attention/"relative_attention": true/"relative_attention": false' \
         'pos_att_type/"p2c",/"p2c", "p2p",' 'norm_rel_ebd/"norm_rel_ebd": "layer_norm"/"norm_rel_ebd": "none"' \
         'position_buckets/"position_buckets": 8/"position_buckets": -1'; do
    key=${f%%/*}
    rm -rf $T/dbf $T/dbf-ck && cp -r $DB/hf-deberta $T/dbf && sed -i "s/${f#*/}/" $T/dbf/config.json
    run $C import --from hf $T/dbf -o $T/dbf-ck
    [ $rc = 65 ] && has $T/err "\"$key\" must be" && [ ! -e $T/dbf-ck ]
    verdict "DeBERTa with another $key: refused, naming the field"
done
rm -rf $T/dbs && cp -r $DB/hf-deberta $T/dbs && rm $T/dbs/vocab.txt && echo x >$T/dbs/spm.model
run $C import --from hf $T/dbs -o $T/dbs-ck
[ $rc = 65 ] && has $T/err "spm.model: a SentencePiece vocabulary" && has $T/err "WordPiece" && [ ! -e $T/dbs-ck ]
verdict "a DeBERTa with a SentencePiece vocabulary only: refused, saying so"
export_refused dbclsck 's/"position": "bert-a"/"position": "deberta"/' "a deberta model with a classification head" \
    "export of a deberta classifier: refused, saying why" --labels 2

# ---- malformed inputs: refused with the place and what was expected -------------------------------
bad() { # bad NAME EXPECTED-RC TEXT [import arguments...]
    local name=$1 want=$2 text=$3; shift 3
    run $C import "$@" -o $T/bad-out
    [ $rc = $want ] && has $T/err "$text" && [ ! -e $T/bad-out ]
    verdict "refused: $name (exit $want)"
}
cd $T; run $C export --to hf $F/bert-a -o - --vocab $F/vocab.txt; cd - >/dev/null
[ $rc = 2 ] && has $T/err "export writes a directory, not '-'" && [ ! -e $T/- ]
verdict "export -o -: usage error, no directory named '-'"
cd $T; run $C import --from hf $F/hf-bert -o -; cd - >/dev/null
[ $rc = 2 ] && has $T/err "import writes a directory, not '-'" && [ ! -e $T/- ]
verdict "import -o -: usage error, no directory named '-'"
B=$F/bad
bad "missing tensor" 65 "tensor 'bert.encoder.layer.0.output.dense.bias': missing: expected a tensor of shape [4]" --from hf $B/missing-tensor
bad "wrong shape" 65 "tensor 'bert.encoder.layer.0.attention.self.query.weight': shape [4, 5], expected [4, 4]" --from hf $B/wrong-shape
bad "wrong dtype" 65 "'bert.encoder.layer.0.intermediate.dense.weight': dtype I32, expected a floating-point type" --from hf $B/wrong-dtype
bad "config and tensors disagree" 65 "shape [10, 4], expected [12, 4] (from $B/config-mismatch/config.json)" --from hf $B/config-mismatch
bad "gamma and weight both" 65 "both spellings of one LayerNorm parameter" --from hf $B/gamma-and-weight
bad "unknown model_type" 65 'model_type "gpt2" is not supported' --from hf $B/unknown-type
bad "missing config.json" 66 "$B/no-config/config.json: No such file or directory" --from hf $B/no-config
bad "only pytorch_model.bin" 66 "convert it with: python3 -c" --from hf $B/bin-only
bad "decoder not tied" 65 "tensor 'cls.predictions.decoder.weight': differs from 'bert.embeddings.word_embeddings.weight'" --from hf $B/untied-decoder
bad "a tensor with no place" 65 "tensor 'bert.encoder.layer.1.output.dense.bias': no place for it" --from hf $B/extra-tensor
bad "another activation" 65 '"hidden_act" must be "gelu"' --from hf $B/relu
bad "a shard that is not there" 66 "model-00002-of-00002.safetensors: No such file or directory" --from hf $B/shard-missing
bad "fairseq lm_head not tied" 65 "tensor 'decoder.lm_head.weight': differs from decoder.sentence_encoder.embed_tokens.weight" \
    --from fairseq $B/fairseq-untied.safetensors --heads 2
bad "an HF directory given as fairseq" 65 "not a TUPE fairseq model state" --from fairseq $F/hf-bert/model.safetensors
bad "a directory given as fairseq" 66 "hf-bert: a directory (expected the .safetensors file" --from fairseq $F/hf-bert
cp -r $F/hf-bert $T/trunc && head -c 5000 $F/hf-bert/model.safetensors >$T/trunc/model.safetensors
bad "truncated file" 65 "$T/trunc/model.safetensors" --from hf $T/trunc
cp -r $F/bert-a $T/corrupt && printf '\x55' | dd of=$T/corrupt/model.safetensors bs=1 seek=20000 conv=notrunc 2>/dev/null
run $C export --to hf $T/corrupt -o $T/bad-out --vocab $F/vocab.txt
[ $rc = 65 ] &&
    has $T/err "checksum mismatch" && [ ! -e $T/bad-out ]
verdict "refused: a corrupt checkpoint, named by tensor (exit 65), nothing written"
run $C info $T/corrupt
[ $rc = 65 ] && has $T/err "checksum mismatch"
verdict "info verifies the hashes too"
head -n 50 $F/vocab.txt >$T/short.txt
run $C export --to hf $F/bert-a -o $T/bad-out --vocab $T/short.txt
[ $rc = 65 ] && has $T/err "50 tokens, but the checkpoint" && [ ! -e $T/bad-out ]
verdict "refused: a vocabulary of another size"
run $C export $F/bert-a -o $T/bad-out --vocab $F/vocab.txt
[ $rc = 2 ] && has $T/err "--to is required"
verdict "export without --to: usage (exit 2)"
run $C info $T/missing-dir
[ $rc = 66 ]
verdict "a missing input: exit 66"

mkdir -p $T/precious && echo keep >$T/precious/notes.txt
run $C export --to hf $F/bert-a -o $T/precious --vocab $F/vocab.txt
[ $rc = 73 ] && has $T/err "precious: exists and is not a Hugging Face model (it has no .tupe-kind" && [ "$(cat $T/precious/notes.txt)" = keep ]
verdict "a directory of something else is never replaced (exit 73)"
run $C import --from hf $F/hf-bert -o $T/precious
[ $rc = 73 ] && [ "$(ls $T/precious)" = notes.txt ]
verdict "nor by an import"
run $C npy $F/bert-a -o $T/precious
[ $rc = 73 ] && [ "$(ls $T/precious)" = notes.txt ]
verdict "nor by npy"

# A failed export leaves the previous directory as it was.
run $C export --to hf $F/bert-a -o $T/bert-a-hf --vocab $T/short.txt
[ $rc = 65 ] && cmp -s $T/bert-a-hf/model.safetensors $F/bert-a-hf/model.safetensors &&
    [ -z "$(ls -A $T | grep '\.tmp\.')" ]
verdict "a failed export leaves the old directory untouched"
# ---- outputs and sizes (issue 26) ---------------------------------------------------------------
run script -qec "$TUPE_BIN/$C npy $F/bert-a -t embeddings.word_embeddings.weight -o -" /dev/null
[ $rc = 2 ] && has $T/out "not written to a terminal" && ! has $T/out NUMPY
verdict "npy -o - to a terminal: refused like tokenize and shard (2)"
# Re-exporting over an export keeps what the export did not write: the user's README, a folder.
run $C export --to hf $F/bert-a -o $T/keep-hf --vocab $F/vocab.txt
echo "my model card" >$T/keep-hf/README.md && mkdir -p $T/keep-hf/eval && echo 1 >$T/keep-hf/eval/scores
run $C export --to hf $F/bert-a -o $T/keep-hf --vocab $F/vocab.txt
[ $rc = 0 ] && [ "$(cat $T/keep-hf/README.md)" = "my model card" ] && [ -f $T/keep-hf/eval/scores ] &&
    cmp -s $T/keep-hf/model.safetensors $F/bert-a-hf/model.safetensors
verdict "export over an export keeps the user's README and folders, replaces its own files"

# Sizes in config.json are held to the weights before memory is reserved for them.
cp -r $F/hf-bert $T/deep && sed -i 's/"num_hidden_layers": *[0-9]*/"num_hidden_layers": 100000/' $T/deep/config.json
run timeout 20 $TUPE_BIN/$C import --from hf $T/deep -o $T/deep-ck
[ $rc = 65 ] && has $T/err "deep/config.json: num_hidden_layers 100000, but the weights" && [ ! -e $T/deep-ck ]
verdict "num_hidden_layers beyond the weights: refused naming config.json, before the model is built"
cp -r $F/hf-bert $T/wide && sed -i 's/"vocab_size": *[0-9]*/"vocab_size": 20000000/' $T/wide/config.json
run timeout 20 $TUPE_BIN/$C import --from hf $T/wide -o $T/wide-ck
[ $rc = 65 ] && has $T/err "expected [20000000, 32] (from $T/wide/config.json)" && ! has $T/err "out of memory"
verdict "vocab_size beyond the embeddings: refused naming config.json, not out of memory"
# A FIFO where config.json or tokenizer_config.json belongs never blocks forever.
cp -r $F/hf-bert $T/fifocfg && rm $T/fifocfg/config.json && mkfifo $T/fifocfg/config.json
run timeout 20 $TUPE_BIN/$C import --from hf $T/fifocfg -o $T/fifo-ck
[ $rc = 66 ] && has $T/err "config.json: a FIFO that no process writes"
verdict "a FIFO as config.json without a writer: refused within seconds (66)"
# The weights too: a FIFO as model.safetensors is refused like a configuration (the same 2 s),
# and one that a process writes is read as a stream.
cp -r $F/hf-bert $T/fifost && rm $T/fifost/model.safetensors && mkfifo $T/fifost/model.safetensors
run timeout 20 $TUPE_BIN/$C import --from hf $T/fifost -o $T/fifost-ck
[ $rc = 66 ] && has $T/err "fifost/model.safetensors: a FIFO that no process writes" && [ ! -e $T/fifost-ck ]
verdict "a FIFO as model.safetensors without a writer: refused within seconds naming it (66)"
cat $F/hf-bert/model.safetensors >$T/fifost/model.safetensors &
run timeout 20 $TUPE_BIN/$C import --from hf $T/fifost -o $T/fifost-ck
wait
[ $rc = 0 ] && [ -e $T/fifost-ck ]
verdict "a FIFO as model.safetensors with a writer: read as a stream"
cp -r $F/hf-bert $T/tcfg && echo '{"do_lower_case": tru' >$T/tcfg/tokenizer_config.json
run $C import --from hf $T/tcfg -o $T/tcfg-ck
[ $rc = 65 ] && has $T/err "tcfg/tokenizer_config.json:1:" && [ ! -e $T/tcfg-ck ]
verdict "a malformed tokenizer_config.json: refused naming it, not its casing silently dropped"
rm -f $T/tcfg/tokenizer_config.json && mkfifo $T/tcfg/tokenizer_config.json
run timeout 20 $TUPE_BIN/$C import --from hf $T/tcfg -o $T/tcfg-ck
[ $rc = 66 ] && has $T/err "tokenizer_config.json: a FIFO that no process writes"
verdict "a FIFO as tokenizer_config.json without a writer: refused within seconds (66)"

exit $_failed
