#!/usr/bin/env bash
# One writer per run directory, and no temporary outlives its work (tupe(7), OUTPUTS): a run
# (tupe-pretrain, tupe-glue train and sweep) holds an flock on its directory's .tupe-lock for
# its whole life, and a second process is refused with 73 naming the holder's PID instead of
# mixing its checkpoints in; SIGINT, SIGTERM and SIGHUP remove the temporary files of outputs
# in progress (exit 130); what a SIGKILL leaves is removed by the next program that writes in
# that directory.
. "$(dirname "$0")/lib.sh"
rules_setup
tmps() { ls -A "$@" 2>/dev/null | grep -E '\.(tmp|old)\.[0-9]+\.[0-9a-f]{8}$'; }
# wait_for FILE TEXT: until FILE holds TEXT (at most 60 s)
wait_for() { for _ in $(seq 600); do grep -qF -- "$2" "$1" 2>/dev/null && return 0; sleep 0.1; done; return 1; }

small_world 5 400 2 tupe-r
pre=(--data shards --model m.json --batch 4 --warmup 1 --log-every 1 --eval-every 0 --save-every 50 --threads 1)

# ---- a run directory has one writer -------------------------------------------------------------
tupe-pretrain train "${pre[@]}" -o lrun --steps 100000 >first.out 2>first.err &
pid=$!
wait_for first.err "step 3/"
run tupe-pretrain train "${pre[@]}" -o lrun --steps 100000 --resume
[ $rc = 73 ] && has $T/err "lrun: in use: process $pid is writing it"
verdict "a second tupe-pretrain on a running run's directory: 73 naming the holder's PID"
run tupe-glue train --task RTE --data $G --checkpoint ck --vocab $V -o lrun --max-train 8 --max-dev 4
[ $rc = 73 ]
verdict "... and a tupe-glue train into it: 73"
kill -INT $pid; wait $pid; frc=$?
[ $frc = 0 ] && [ -n "$(ls lrun/checkpoints)" ] && [ -z "$(tmps lrun lrun/checkpoints)" ]
verdict "the first run stops at SIGINT with a checkpoint and no temporary"
run tupe-pretrain train "${pre[@]}" -o lrun --steps 100000 --resume --stop-after 1
[ $rc = 0 ] && has $T/err "resumed from"
verdict "once it has ended, the lock is free: --resume continues the run"

ft=(--task RTE --data $G --checkpoint ck --vocab $V --max-len 32 --threads 1)
tupe-glue train "${ft[@]}" -o gft --epochs 1000 --max-train 256 --max-dev 8 --evals-per-epoch 1 >first.out 2>first.err &
pid=$!
wait_for first.err "dev: RTE"
run tupe-glue train "${ft[@]}" -o gft --epochs 1 --max-train 8 --max-dev 4
[ $rc = 73 ] && has $T/err "gft: in use: process $pid is writing it"
verdict "a second tupe-glue train on the same -o: 73 naming the holder's PID"
kill -TERM $pid; wait $pid; frc=$?
[ $frc = 130 ] && [ -z "$(tmps gft)" ] && [ -z "$(tmps gft/best 2>/dev/null)" ]
verdict "SIGTERM ends a fine-tuning run with 130 and no temporary left (got $frc)"
tupe-glue sweep "${ft[@]}" -o gsw --epochs 1000 --max-train 256 --max-dev 8 --evals-per-epoch 1 --lr-grid 1e-3 --seeds 1 >first.out 2>first.err &
pid=$!
wait_for first.err "dev: RTE"
run tupe-glue sweep "${ft[@]}" -o gsw --epochs 1000 --max-train 256 --max-dev 8 --evals-per-epoch 1 --lr-grid 1e-3 --seeds 1
[ $rc = 73 ] && has $T/err "in use: process $pid is writing it"
verdict "a second tupe-glue sweep on the same -o: 73 naming the holder's PID"
kill -HUP $pid; wait $pid; frc=$?
[ $frc = 130 ] && [ -z "$(tmps gsw gsw/lr-0.001 gsw/lr-0.001/seed-1)" ]
verdict "SIGHUP ends a sweep with 130 and no temporary left (got $frc)"

# ---- a caught signal removes the temporaries of outputs in progress ---------------------------
for sig in INT TERM HUP; do
    rm -f fifo && mkfifo fifo
    # (a shell starts background commands with SIGINT ignored, which the programs respect)
    env --default-signal=INT tupe-tokenize encode -q --vocab $V -o enc.tok fifo 2>sig.err &
    pid=$!
    exec 3>fifo
    cat text.txt >&3
    for _ in $(seq 300); do [ -n "$(tmps .)" ] && break; sleep 0.05; done
    had=$(tmps .)
    kill -$sig $pid; wait $pid; src=$?
    exec 3>&-
    [ -n "$had" ] && [ $src = 130 ] && [ -z "$(tmps .)" ] && [ ! -e enc.tok ]
    verdict "SIG$sig while encoding: exit 130, its temporary file removed ($had; got $src)"
done

# ---- what a SIGKILL leaves is removed by the next writer --------------------------------------
mkdir -p k
run env TUPE_FAULT=out.flush tupe-tokenize encode -q --vocab $V -o k/a.tok text.txt
left=$(tmps k)
run tupe-tokenize encode -q --vocab $V -o k/b.tok text.txt
[ -n "$left" ] && [ $rc = 0 ] && [ -z "$(tmps k)" ] && [ -s k/b.tok ]
verdict "a temporary of a killed writer ($left) is removed by the next program writing there"
run env TUPE_FAULT=dirtx.commit tupe-convert export -q --to hf ck --vocab $V -o k/hf
left=$(tmps k)
run tupe-convert cast -q --dtype bf16 ck -o k/ck16
[ -n "$left" ] && [ $rc = 0 ] && [ -z "$(tmps k)" ]
verdict "... a temporary directory too ($left)"
exit $_failed
