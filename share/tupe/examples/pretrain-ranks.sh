#!/usr/bin/env bash
# N ranks of a command on this machine without mpirun, srun or torchrun: a plain loop of
# processes that meet at 127.0.0.1:MASTER_PORT (tupe-pretrain(1), Several processes). The
# GPU of each is its LOCAL_RANK.
#
#   pretrain-ranks.sh N tupe-pretrain train --data shards -o runs/x --batch 256 ...
#
# Ctrl-C reaches every rank (each finishes its step and saves); the exit status is the first
# non-zero one of the ranks. On several machines, start the same loop on each with RANK
# numbered across machines, MASTER_ADDR the first machine and the same TUPE_JOB_SECRET on
# every one (tupe-pretrain(1), SECURITY; or use srun: pretrain-slurm.sbatch).
set -u
[ $# -ge 2 ] && [ "$1" -ge 1 ] 2>/dev/null || { echo "usage: $0 N COMMAND [ARGS...]" >&2; exit 2; }
n=$1
shift
export MASTER_ADDR=${MASTER_ADDR:-127.0.0.1} MASTER_PORT=${MASTER_PORT:-29500} WORLD_SIZE=$n
pids=()
trap 'kill -INT "${pids[@]}" 2>/dev/null' INT TERM
for ((r = 0; r < n; r++)); do
    RANK=$r LOCAL_RANK=$r "$@" &
    pids+=($!)
done
rc=0
for p in "${pids[@]}"; do
    while :; do
        wait "$p"
        s=$?
        # a signal trapped above interrupts wait (status > 128): wait again for the rank
        kill -0 "$p" 2>/dev/null || break
    done
    [ $rc = 0 ] && rc=$s
done
exit $rc
