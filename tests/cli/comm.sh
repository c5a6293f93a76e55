#!/usr/bin/env bash
# Data-parallel collectives (lib/train/comm.c): alone, under `mpirun -np 2`, and the error for a
# world size that no launcher backs.
. "$(dirname "$0")/lib.sh"
P=$TUPE_BUILD/tests/tupe-commtest
run $P
[ $rc = 0 ] && has $T/out "rank 0 of 1 (single, none): ok"
verdict "a process without a launcher is a world of one"
# With MPI, MPI itself finds a world of one; without, the build says it has no MPI.
run env ASAN_OPTIONS="$MPI_ASAN_OPTIONS" WORLD_SIZE=2 RANK=0 $P
if built_with mpi; then
    why="but MPI sees 1; start the ranks with mpirun or srun, or give them a rendezvous (MASTER_ADDR and MASTER_PORT, or TUPE_RENDEZVOUS_FILE)"
else
    why="this build has no MPI: give the ranks a rendezvous instead (MASTER_ADDR and MASTER_PORT, or TUPE_RENDEZVOUS_FILE)"
fi
[ $rc = 2 ] && has $T/err "$why"
verdict "WORLD_SIZE without a launcher or a rendezvous: a clear usage error"
run env WORLD_SIZE=2 RANK=5 $P
[ $rc = 2 ] && has $T/err "inconsistent rank environment"
verdict "a rank outside the world is refused"
# Without MPI: a for loop of ranks meeting at MASTER_ADDR:MASTER_PORT or through a file.
port=$((20000 + ($$ * 11 + RANDOM) % 12000))
loop() { # N VAR=VALUE...: N ranks of tupe-commtest; rc: 0 when all succeeded
    local n=$1 r pids=()
    shift
    for ((r = 0; r < n; r++)); do
        env "$@" RANK=$r WORLD_SIZE=$n $P >$T/out.$r 2>$T/err.$r &
        pids+=($!)
    done
    rc=0
    for p in "${pids[@]}"; do wait $p || rc=1; done
    cat $T/out.* >$T/out; cat $T/err.* >$T/err; rm -f $T/out.* $T/err.*
}
# The large collectives pass no rank in the middle (the mesh): every rank's link carries a
# ring's 2(W-1)/W of the data, frames' headers included, within 1.1x, rank 0 no more than the
# others: for the all-reduce of 4 MB and for the gradients' path (reduce, then gather) on CPU
# ranks. Through rank 0 (TUPE_COMM_MESH=0, the star) rank 0 sends W-1 times the data.
volume() { # W: every rank's "bytes:" line within 1.1x of the ring's volume; rc 0 when so
    awk -v w=$1 '/ bytes: allreduce of /{
        ring = 2 * (w - 1) / w; n++
        a = ($8 > $10 + 0 ? $8 : $10 + 0) / $6; g = ($16 > $18 ? $16 : $18) / $14
        if (a <= 1.1 * ring && g <= 1.1 * ring) ok++ }
        END { exit !(n == w && ok == w) }' $T/out
}
loop 2 MASTER_ADDR=127.0.0.1 MASTER_PORT=$port
[ $rc = 0 ] && has $T/out "rank 0 of 2 (tcp, env): ok" && has $T/out "rank 1 of 2 (tcp, env): ok"
verdict "2 ranks at MASTER_ADDR:MASTER_PORT: allreduce, reduce-scatter, allgather, bcast, max"
loop 4 TUPE_RENDEZVOUS_FILE=$T/rdzv
[ $rc = 0 ] && [ "$(grep -c '(tcp, env): ok' $T/out)" = 4 ] && [ ! -e $T/rdzv ]
verdict "4 ranks through TUPE_RENDEZVOUS_FILE (removed at the end)"
volume 4
verdict "4 ranks: every rank sends and receives a ring's 2(W-1)/W of the data (the mesh), not rank 0 more"
for w in 2 3; do
    loop $w MASTER_ADDR=127.0.0.1 MASTER_PORT=$((port + 2))
    [ $rc = 0 ] && [ "$(grep -c '(tcp, env): ok' $T/out)" = $w ] && volume $w
    verdict "$w ranks: every rank sends and receives a ring's 2(W-1)/W of the data (the mesh), not rank 0 more"
done
loop 3 MASTER_ADDR=127.0.0.1 MASTER_PORT=$((port + 2)) TUPE_COMM_MESH=0
[ $rc = 0 ] && [ "$(grep -c '(tcp, env): ok' $T/out)" = 3 ] && ! volume 3 &&
    awk '/^rank 0 bytes: /{ exit !($16 >= 2 * $14) }' $T/out
verdict "3 ranks through rank 0 (TUPE_COMM_MESH=0): the same results, rank 0 sending W-1 times the gradients"
pids=()
for r in 0 1; do
    env MASTER_ADDR=127.0.0.1 MASTER_PORT=$((port + 2)) RANK=$r WORLD_SIZE=2 \
        TUPE_COMM_MESH=$r $P >$T/out.$r 2>$T/err.$r &
    pids+=($!)
done
rcs=""
for p in "${pids[@]}"; do wait $p; rcs+="$? "; done
[ "$rcs" = "2 2 " ] && has $T/err.0 "ranks disagree on TUPE_COMM_MESH: this rank has TUPE_COMM_MESH=0, another rank the mesh" &&
    has $T/err.1 "ranks disagree on TUPE_COMM_MESH: this rank has the mesh, another rank TUPE_COMM_MESH=0"
verdict "ranks that disagree on TUPE_COMM_MESH: both stop (2), saying so"
rm -f $T/out.* $T/err.*
# a rank killed while the ranks connect to each other: the others stop at once, naming it
pids=()
t0=$(date +%s)
for r in 0 1 2; do
    f=none; [ $r = 2 ] && f=rdzv.mesh
    env MASTER_ADDR=127.0.0.1 MASTER_PORT=$((port + 2)) RANK=$r WORLD_SIZE=3 TUPE_COMM_TIMEOUT=60 \
        TUPE_FAULT=$f $P >$T/out.$r 2>$T/err.$r &
    pids+=($!)
done
rcs=""
for p in "${pids[@]}"; do wait $p; rcs+="$? "; done
[ "$rcs" = "1 1 137 " ] && has $T/err.0 "rank 2 exited or was killed" && has $T/err.1 "rank 2 exited or was killed" &&
    [ $(($(date +%s) - t0)) -lt 20 ]
verdict "a rank killed while the mesh is made: the others stop (1) at once, naming it"
rm -f $T/out.* $T/err.*
# Rank 0's host name may not resolve where the ranks run (a container or chroot without
# /etc/hosts, names missing from DNS): the others then reach it at the addresses it publishes
# beside its name. Each rank gets a host name that resolves nowhere (a UTS namespace: root).
nohost() { printf '#!/bin/sh\nhostname tupe-no-such-host.invalid && exec "$@"\n' >$T/nohost.sh
           chmod +x $T/nohost.sh; NOHOST="unshare --uts $T/nohost.sh"; }
# ns KIND: whether this process may make a namespace of that kind; NO_NS says why not for skip.
ns() { NO_NS="unshare --$1 is refused here (root outside a chroot needed)"; unshare --$1 true 2>/dev/null; }
if ns uts; then
    nohost
    P0=$P P="$NOHOST $P"
    loop 2 TUPE_RENDEZVOUS_FILE=$T/rdzv TUPE_COMM_TIMEOUT=30
    P=$P0
    [ $rc = 0 ] && [ "$(grep -c '(tcp, env): ok' $T/out)" = 2 ]
    verdict "2 ranks through the file when rank 0's host name does not resolve"
    if have_mpi; then
        mpi_run -np 2 -x TUPE_COMM_TIMEOUT=30 $NOHOST $P
        [ $rc = 0 ] && [ "$(grep -c '(mpi, mpirun): ok' $T/out)" = 2 ]
        verdict "mpirun -np 2 when rank 0's host name does not resolve"
    else
        skip "mpirun -np 2 when rank 0's host name does not resolve" "$NO_MPI"
    fi
else
    skip "2 ranks through the file when rank 0's host name does not resolve" "$NO_NS"
    skip "mpirun -np 2 when rank 0's host name does not resolve" "$NO_NS"
fi
# MASTER_ADDR=localhost where nothing resolves it (an empty /etc/hosts, as in a fresh root):
# "localhost" is the loopback all the same (RFC 6761). Each rank in a mount namespace.
if ns mount; then
    : >$T/hosts
    printf '#!/bin/sh\n[ ! -e /etc/hosts ] || mount --bind %s /etc/hosts || exit 99\nexec "$@"\n' \
        $T/hosts >$T/nohosts.sh
    chmod +x $T/nohosts.sh
    P0=$P P="unshare --mount $T/nohosts.sh $P"
    loop 2 MASTER_ADDR=localhost MASTER_PORT=$((port + 1)) TUPE_COMM_TIMEOUT=30
    P=$P0
    [ $rc = 0 ] && [ "$(grep -c '(tcp, env): ok' $T/out)" = 2 ]
    verdict "MASTER_ADDR=localhost with an empty /etc/hosts"
else
    skip "MASTER_ADDR=localhost with an empty /etc/hosts" "$NO_NS (a fresh root without /etc/hosts tests it in ranks.sh)"
fi
run env MASTER_ADDR=tupe-no-such-host.invalid MASTER_PORT=$port RANK=1 WORLD_SIZE=2 TUPE_COMM_TIMEOUT=1 \
    TUPE_JOB_SECRET=0123456789abcdef $P
[ $rc = 1 ] && has $T/err "rank 1 could not reach rank 0 at tupe-no-such-host.invalid:$port within 1 s (TUPE_COMM_TIMEOUT): tupe-no-such-host.invalid: "
verdict "a MASTER_ADDR that resolves nowhere: the rank gives up after TUPE_COMM_TIMEOUT, saying why"
run env MASTER_ADDR=127.0.0.1 MASTER_PORT=99999 WORLD_SIZE=2 RANK=0 $P
[ $rc = 2 ] && has $T/err "MASTER_PORT=99999 is not a port number"
verdict "a MASTER_PORT that is no port: a usage error"
if have_mpi; then
    mpi_run -np 2 $P
    [ $rc = 0 ] && has $T/out "rank 0 of 2 (mpi, mpirun): ok" && has $T/out "rank 1 of 2 (mpi, mpirun): ok"
    verdict "mpirun -np 2: allreduce, reduce-scatter, allgather, bcast, max"
    mpi_run -np 3 $P
    [ $rc = 0 ] && [ "$(grep -c ': ok' $T/out)" = 3 ]
    verdict "mpirun -np 3 (more ranks than cores)"
    mpi_run -np 2 -x TUPE_COMM_WATCH=0 $P
    [ $rc = 0 ] && [ "$(grep -c ': ok' $T/out)" = 2 ]
    verdict "mpirun -np 2 with TUPE_COMM_WATCH=0 (no TCP watch)"
else
    skip "mpirun -np 2: allreduce, reduce-scatter, allgather, bcast, max" "$NO_MPI"
    skip "mpirun -np 3 (more ranks than cores)" "$NO_MPI"
    skip "mpirun -np 2 with TUPE_COMM_WATCH=0 (no TCP watch)" "$NO_MPI"
fi
exit $_failed
