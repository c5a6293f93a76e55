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
# A resumed run's file: the SessionLog START first, byte for byte the record TensorBoard's
# event_pb2 encodes, on which its EventAccumulator shows each step once (resumed-reader.txt).
run $TESTTOOL tfevents --restart 20 $F/resumed.jsonl -o $T/resumed.tfevents
[ $rc = 0 ] && cmp -s $T/resumed.tfevents $F/events.out.tfevents.1700000100.tupe
verdict "a resumed run's event file with its START marker, byte for byte what TensorBoard read"
# What that reader lists: the earlier file's events before step 20, then the resumed file's.
{ $TESTTOOL tfevents-cat $F/$EV; $TESTTOOL tfevents-cat $T/resumed.tfevents; } |
    awk '$2 == "session_log" { if ($3 == 1) for (k in v) { split(k, p, SUBSEP); if (p[1] + 0 >= $1) delete v[k] } next }
         { v[$1, $2] = $3 } END { for (k in v) { split(k, p, SUBSEP); print p[1], p[2], v[k] } }' |
    sort -k2,2 -k1,1n >$T/resumed.txt
diff $T/resumed.txt $F/resumed-reader.txt >/dev/null && [ "$(wc -l <$T/resumed.txt)" = 28 ]
verdict "... the START discards the earlier file's steps from 20 on: TensorBoard's listing, each step once"
exit $_failed
