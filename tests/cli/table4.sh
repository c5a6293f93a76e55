#!/usr/bin/env bash
# share/tupe/examples/table4.sh (the TUPE paper's Table 4 in miniature) at a tiny budget: the
# three arms pre-train on the same shards, every discriminator is scored on its own fakes and on
# the ELECTRA arm's probe (which, for the ELECTRA arm itself, gives its own AUC), ELECTRA-TUPE
# also at 60% of the steps, the small GLUE task's median with its seed range, and a second call
# reads the finished runs instead of redoing them.
. "$(dirname "$0")/lib.sh"
sample_glue $T/glue
cat >$T/m.json <<'J'
{"position": "bert-a", "hidden_size": 16, "num_hidden_layers": 1, "num_attention_heads": 2,
 "intermediate_size": 32, "max_position_embeddings": 16}
J
t4=(MODEL=$T/m.json STEPS=5 BATCH=4 SEQ=16 VOCAB_SIZE=300 TASKS=RTE GLUE_SEEDS=2 GLUE=$T/glue
    GLUE_OPTS="--max-train 16 --max-dev 8 --epochs 1" THREADS=1)
run env "${t4[@]}" bash $TUPE_SRC/share/tupe/examples/table4.sh $TUPE_SRC/share/tupe/sample/corpus.txt.zst $T/t4
n='[0-9]+\.[0-9]+'
[ $rc = 0 ] && grep -qE "^\| ELECTRA \(BERT-A\) \| $n \| $n \| $n \| $n \(0?$n-$n\) \| $n \|$" $T/t4/table.md &&
    grep -qE "^\| ELECTRA-TUPE \(TUPE-R\), step 5 \| $n \| $n \| $n \| $n \($n-$n\) \| $n \|$" $T/t4/table.md &&
    grep -qE "^\| ELECTRA-TUPE \(TUPE-R\), step 3 \(60%\) \| $n \| $n \| $n \| $n \($n-$n\) \| $n \|$" $T/t4/table.md &&
    grep -qE "^\| MLM BERT-A \(sanity row\) \| $n \| n/a \| n/a \| $n \($n-$n\) \| $n \|$" $T/t4/table.md
verdict "table4.sh: a row per arm (and ELECTRA-TUPE at 60%), AUC on own fakes and on the fixed probe, RTE's median and seed range"
auc() { sed 's/.*"val_disc_auc":\([^,}]*\).*/\1/' "$1"; }
[ -s $T/t4/probe.bin ] && [ "$(auc $T/t4/electra/seed-1/eval-last.json)" = "$(auc $T/t4/electra/seed-1/probe-last.json)" ] &&
    has $T/t4/electra-tupe/seed-1/results.json '"mid":{"step":3,' && has $T/t4/mlm/seed-1/results.json '"probe":null' &&
    has $T/t4/electra-tupe/seed-1/results.json '"glue":{"RTE":{"median":'
verdict "the fixed probe is the ELECTRA arm's own corruption (its AUC there is its own); every run's results as JSON"
run env "${t4[@]}" bash $TUPE_SRC/share/tupe/examples/table4.sh $TUPE_SRC/share/tupe/sample/corpus.txt.zst $T/t4
[ $rc = 0 ] && has $T/err "electra-tupe seed 1: done before" && has $T/err "mlm seed 1: done before"
verdict "table4.sh again: the finished runs are read, not redone"
run env "${t4[@]}" ARMS="electra-tupe" bash $TUPE_SRC/share/tupe/examples/table4.sh $TUPE_SRC/share/tupe/sample/corpus.txt.zst $T/t4b
[ $rc = 1 ] && has $T/err "probe.bin is not written yet: run the electra arm" && [ -s $T/t4b/electra-tupe/seed-1/eval-last.json ]
verdict "ARMS=electra-tupe alone: trains, then stops at the probe that the ELECTRA arm writes, naming it"
run env "${t4[@]}" ARMS="electra bert" bash $TUPE_SRC/share/tupe/examples/table4.sh $TUPE_SRC/share/tupe/sample/corpus.txt.zst $T/t4c
[ $rc = 2 ] && has $T/err "ARMS: no arm 'bert'"
verdict "ARMS with an unknown arm: a usage error"
exit $_failed
