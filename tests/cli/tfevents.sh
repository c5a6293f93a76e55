#!/usr/bin/env bash
# TensorBoard event files: lib/tfevents.c writes the bytes TensorBoard's own reader decoded
# (tests/reference/make_tfevents_fixtures.py: reader.txt), and every number of a metrics
# record becomes a scalar; a corrupt record is refused by the CRC-32C; tupe-pretrain and
# tupe-glue write the values of their metrics.jsonl.
. "$(dirname "$0")/lib.sh"
F=$TUPE_SRC/tests/fixtures/tfevents
EV=events.out.tfevents.1700000000.tupe

run $TESTTOOL tfevents $F/metrics.jsonl -o $T/$EV
[ $rc = 0 ] && cmp -s $T/$EV $F/$EV
verdict "the event file TensorBoard read, byte for byte"
run $TESTTOOL tfevents-cat $F/$EV
[ $rc = 0 ] && diff $T/out $F/reader.txt >/dev/null && [ $(wc -l <$T/out) = 39 ]
verdict "our decoder reads what TensorBoard's EventFileLoader read (39 scalars, nested tags)"
cp $F/$EV $T/bad && printf '\x55' | dd of=$T/bad bs=1 seek=20 conv=notrunc 2>/dev/null
run $TESTTOOL tfevents-cat $T/bad
[ $rc = 65 ] && has $T/err "bad record data"
verdict "a flipped byte breaks the record's masked CRC-32C"
printf '%s\n' '{"step":3,"loss":nan,"loss_bits":-nan,"lr":0.5,"grad_norm":inf,"note":"nan inf \" nan","x":-inf}' >$T/nan.jsonl
$TESTTOOL tfevents $T/nan.jsonl -o $T/nan.tfevents
run $TESTTOOL tfevents-cat $T/nan.tfevents
[ $rc = 0 ] && [ "$(cat $T/out)" = "3 lr 0.5" ]
verdict "printf's nan and inf (a diverged loss in metrics.jsonl) are left out, the rest kept"
exit $_failed
