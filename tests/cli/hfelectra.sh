#!/usr/bin/env bash
# tupe-convert export --to hf of ELECTRA pairs, against what transformers computed from it
# (tests/reference/make_hfelectra_fixtures.py): the export is the directory pair transformers
# read (its files' hashes), tupe's logits of each network equal ElectraForPreTraining's and
# ElectraForMaskedLM's (TUPE-R: the remote-code model's) on a padded batch, the pair imports
# back bit for bit, and directories that are not a tupe pair are refused naming the field or
# the tensor.
. "$(dirname "$0")/lib.sh"
F=$TUPE_SRC/tests/fixtures/electra/hf
CV=$TUPE_SRC/tests/fixtures/convert
MT=$TUPE_BUILD/tests/tupe-modeltool
C=tupe-convert

files() { export_files "$1" discriminator generator; }

for case in pair pair-types pair-tupe-r; do
    run $C export --to hf $F/$case -o $T/$case-hf --vocab $CV/vocab.txt
    arch=Electra
    [ $case = pair-tupe-r ] && arch=TupeElectra
    [ $rc = 0 ] && diff <(files $T/$case-hf) $F/$case.files >$T/out && has $T/$case-hf/discriminator/config.json "\"${arch}ForPreTraining\"" &&
        has $T/$case-hf/generator/config.json "\"${arch}ForMaskedLM\""
    verdict "$case: the export is the pair of directories transformers read"
    in=$CV/input.safetensors
    [ $case = pair-types ] && in=$TUPE_SRC/tests/fixtures/roformer/input-types.safetensors
    for net in discriminator generator; do
        short=gen
        [ $net = discriminator ] && short=disc
        run $MT logits -c $F/$case --input $in --network $net --expect $F/$case.$short.safetensors --tol 1e-4
        d=$(cat $T/out) # before the condition: a substitution in verdict's argument sets its $?
        [ $rc = 0 ]
        verdict "$case: the $net's logits are transformers' on a padded batch ($d)"
    done
    run $C import --from hf $T/$case-hf -o $T/$case-back
    [ $rc = 0 ] && run $MT diff $F/$case $T/$case-back && [ $rc = 0 ]
    verdict "$case: imported back bit for bit, configuration included"
done

cp -r $T/pair-hf $T/heads && sed -i 's/"num_attention_heads": 1/"num_attention_heads": 2/' $T/heads/generator/config.json
run $C import --from hf $T/heads -o $T/heads-ck
[ $rc = 65 ] && has $T/err 'generator/config.json: "num_attention_heads" 2, but a tupe pair' && [ ! -e $T/heads-ck ]
verdict "a generator that is not the one tupe derives from the discriminator: exit 65 naming the field"
sed 's/"num_labels": 0/"num_labels": 0, "embedding_size": 24, "generator_hidden_size": 0.5/' $CV/tiny.json >$T/p.json
run $MT init --model $T/p.json --vocab-size 60 --seed 23 --types 0 -o $T/other
run $C export --to hf $T/other -o $T/other-hf --vocab $CV/vocab.txt
cp -r $T/pair-hf $T/mixed && rm -r $T/mixed/generator && cp -r $T/other-hf/generator $T/mixed/
run $C import --from hf $T/mixed -o $T/mixed-ck
[ $rc = 65 ] && has $T/err "generator/model.safetensors: tensor 'electra.embeddings." && has $T/err "differs from the discriminator's"
verdict "a generator whose copy of the shared tables is not the discriminator's: exit 65 naming the tensor"
rm -r $T/mixed/generator
run $C import --from hf $T/mixed -o $T/mixed-ck
[ $rc = 66 ] && has $T/err "mixed/generator/config.json"
verdict "a discriminator without its generator: exit 66 naming what is missing"
sed -i 's/"position": "bert-a"/"position": "alibi"/' $T/p.json
run $MT init --model $T/p.json --vocab-size 60 --seed 23 --types 0 -o $T/al
run $C export --to hf $T/al -o $T/al-hf --vocab $CV/vocab.txt
[ $rc = 2 ] && has $T/err "an ELECTRA pair with alibi positions" && [ ! -e $T/al-hf ]
verdict "an ALiBi pair: refused, saying why (no transformers class computes it)"
exit $_failed
