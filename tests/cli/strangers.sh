#!/usr/bin/env bash
# Only its own ranks join a job (lib/train/rendezvous.c, jobauth.c, rdzvfile.c): strangers on
# the port (forged hellos, another version, idle connections, another secret) are dropped
# without harm to the job, rank 0 listens only at MASTER_ADDR and never spins; the rendezvous
# file is an output like any other (never over another file, a FIFO or a device; another job's
# refused, a dead job's replaced); the timeouts and the world size are checked as the port is.
# Loopback only; every wait bounded.
. "$(dirname "$0")/lib.sh"
P=$TUPE_BUILD/tests/tupe-commtest
port=$((20000 + ($$ * 13 + RANDOM) % 12000))
S1=0123456789abcdef-one S2=0123456789abcdef-two

# listening PORT: the local addresses (hex, as /proc/net/tcp writes them) listening on PORT.
listening() {
    awk -v p="$(printf ':%04X' "$1")" '$4 == "0A" && substr($2, length($2) - 4) == p { print $2 }' \
        /proc/net/tcp /proc/net/tcp6 2>/dev/null
}
wait_listen() { for i in $(seq 1 200); do [ -n "$(listening "$1")" ] && return 0; sleep 0.05; done; return 1; }
cpu_ticks() { awk '{ print $14 + $15 }' /proc/$1/stat; }
# rank R VAR=VALUE...: rank R of 2 in the background (pid in $!), output in $T/out.R, $T/err.R.
rank() { local r=$1; shift; env "$@" RANK=$r WORLD_SIZE=${WS:-2} $P >$T/out.$r 2>$T/err.$r & }
both_ok() { # PID0 PID1: both ranks exit 0 having checked every collective
    local a b; wait $1; a=$?; wait $2; b=$?; rc="$a $b"
    cat $T/out.0 $T/out.1 >$T/out; cat $T/err.0 $T/err.1 >$T/err
    [ "$rc" = "0 0" ] && has $T/out "rank 0 of 2 (tcp, env): ok" && has $T/out "rank 1 of 2 (tcp, env): ok"
}
# Bytes of a hello frame: header (type 1, rank, payload length) and payload (magic "TUPE",
# version, rank 1, world 2, kind, job 0, then NONCE bytes).
hello() { # VERSION PAYLOAD_LEN NONCE_BYTES
    printf '\x01\0\0\0\x01\0\0\0'"\\x$(printf %02x $2)"'\0\0\0\0\0\0\0TUPE'"\\x$(printf %02x $1)"'\0\0\0\x01\0\0\0\x02\0\0\0\0\0\0\0\0\0\0\0'
    head -c $3 /dev/zero
}

# A plain loop of ranks (the README's example): MASTER_ADDR=127.0.0.1 without a secret.
tcp=(MASTER_ADDR=127.0.0.1 MASTER_PORT=$port TUPE_COMM_TIMEOUT=60)
rank 0 "${tcp[@]}"; p0=$!
if wait_listen $port; then
    [ "$(listening $port)" = 0100007F:$(printf %04X $port) ]
    verdict "rank 0 listens at MASTER_ADDR=127.0.0.1 only, not on every interface"
    fds=()
    exec {f}<>/dev/tcp/127.0.0.1/$port && hello 1 24 0 >&$f; fds+=($f)       # the old 40-byte hello
    exec {f}<>/dev/tcp/127.0.0.1/$port && hello 2 40 16 >&$f; fds+=($f)      # a hello, no proof after it
    exec {f}<>/dev/tcp/127.0.0.1/$port && hello 9 40 16 >&$f; fds+=($f)      # magic, another version
    exec {f}<>/dev/tcp/127.0.0.1/$port && printf 'GET / HTTP/1.0\r\n\r\n' >&$f; fds+=($f)
    for i in $(seq 1 70); do exec {f}<>/dev/tcp/127.0.0.1/$port && fds+=($f); done   # silent ones
    sleep 1; c0=$(cpu_ticks $p0); sleep 2; c1=$(cpu_ticks $p0)
    # a stranger that knows the protocol but not the secret: it cannot take rank 1's place
    run env "${tcp[@]}" TUPE_COMM_TIMEOUT=3 TUPE_JOB_SECRET=$S2 RANK=1 WORLD_SIZE=2 $P
    [ $rc = 1 ] && has $T/err "did not prove it is this job's rank 0"
    verdict "a rank with another secret is not let in, and says why"
    rank 1 "${tcp[@]}"; p1=$!
    both_ok $p0 $p1
    verdict "forged hellos, another version, 70 silent connections: the job's own ranks meet all the same"
    rc="$((c1 - c0)) ticks"; [ $((c1 - c0)) -lt 50 ]
    verdict "rank 0 does not spin while strangers hold connections (CPU $rc in 2 s)"
    for f in "${fds[@]}"; do exec {f}>&-; done
else
    kill $p0; wait $p0
    not_ok "rank 0 listens at MASTER_ADDR=127.0.0.1" "$(cat $T/err.0)"
fi
dir=${XDG_RUNTIME_DIR:-/tmp/tupe-$(id -u)}
[ ! -e "$dir/tupe-rendezvous-127.0.0.1-$port" ] && { [ -n "${XDG_RUNTIME_DIR:-}" ] || [ "$(stat -c %a "$dir")" = 700 ]; }
verdict "the loopback secret lives in a private directory and is gone once the ranks have met"

# With TUPE_JOB_SECRET: the same on both ranks meets; another one does not.
port=$((port + 1)); tcp=(MASTER_ADDR=127.0.0.1 MASTER_PORT=$port TUPE_COMM_TIMEOUT=60)
rank 0 "${tcp[@]}" TUPE_JOB_SECRET=$S1; p0=$!
wait_listen $port
run env "${tcp[@]}" TUPE_COMM_TIMEOUT=2 TUPE_JOB_SECRET=$S2 RANK=1 WORLD_SIZE=2 $P
r2=$rc
rank 1 "${tcp[@]}" TUPE_JOB_SECRET=$S1; p1=$!
both_ok $p0 $p1 && [ $r2 = 1 ]
verdict "TUPE_JOB_SECRET: the ranks that share it meet, one with another is turned away"
run env MASTER_ADDR=192.0.2.1 MASTER_PORT=$port RANK=1 WORLD_SIZE=2 $P
[ $rc = 2 ] && has $T/err "MASTER_ADDR=192.0.2.1 is not the loopback" && has $T/err "TUPE_JOB_SECRET"
verdict "a MASTER_ADDR other machines reach, without a secret: refused, saying what to set"
run env "${tcp[@]}" TUPE_JOB_SECRET=short RANK=0 WORLD_SIZE=2 $P
[ $rc = 2 ] && has $T/err "TUPE_JOB_SECRET is 5 characters: at least 16"
verdict "a TUPE_JOB_SECRET too short to be a secret: a usage error"

# The rendezvous file: an output like any other.
printf '{"shards": 2}\n' >$T/manifest.json
run env TUPE_RENDEZVOUS_FILE=$T/manifest.json RANK=0 WORLD_SIZE=2 TUPE_COMM_TIMEOUT=5 $P
[ $rc = 73 ] && has $T/err "exists and is no rendezvous file" && [ "$(cat $T/manifest.json)" = '{"shards": 2}' ]
verdict "TUPE_RENDEZVOUS_FILE naming another file: refused (73), the file untouched"
mkfifo $T/fifo
run timeout 20 env TUPE_RENDEZVOUS_FILE=$T/fifo RANK=0 WORLD_SIZE=2 TUPE_COMM_TIMEOUT=5 $P
r0=$rc; cp $T/err $T/err.f0
run timeout 20 env TUPE_RENDEZVOUS_FILE=$T/fifo RANK=1 WORLD_SIZE=2 TUPE_COMM_TIMEOUT=5 $P
[ $r0 = 73 ] && has $T/err.f0 "is a FIFO" && [ $rc = 2 ] && has $T/err "is a FIFO" && [ -p $T/fifo ]
verdict "TUPE_RENDEZVOUS_FILE naming a FIFO: rank 0 refuses it (73), rank 1 does not wait on it (2)"
run env TUPE_RENDEZVOUS_FILE=/dev/null RANK=0 WORLD_SIZE=2 TUPE_COMM_TIMEOUT=5 $P
[ $rc = 73 ] && has $T/err "/dev/null is a device" && [ -c /dev/null ]
verdict "TUPE_RENDEZVOUS_FILE=/dev/null: refused (73), the device left alone"
# Two jobs on one file: the second's rank 0 is refused while the first's waits there.
rank 0 TUPE_RENDEZVOUS_FILE=$T/rdzv TUPE_COMM_TIMEOUT=60; p0=$!
for i in $(seq 1 200); do [ -s $T/rdzv ] && break; sleep 0.05; done
mode=$(stat -c %a $T/rdzv)
run env TUPE_RENDEZVOUS_FILE=$T/rdzv RANK=0 WORLD_SIZE=2 TUPE_COMM_TIMEOUT=5 $P
r2=$rc; cp $T/err $T/err.j2
rank 1 TUPE_RENDEZVOUS_FILE=$T/rdzv TUPE_COMM_TIMEOUT=60; p1=$!
both_ok $p0 $p1 && [ $r2 = 73 ] && has $T/err.j2 "is another job's" && [ "$mode" = 600 ] && [ ! -e $T/rdzv ]
verdict "a second job's rank 0 on a file in use is refused (73); the file was mode 0600, and is gone"
# A file that a killed rank 0 left is replaced.
rank 0 TUPE_RENDEZVOUS_FILE=$T/rdzv TUPE_COMM_TIMEOUT=60; p0=$!
for i in $(seq 1 200); do [ -s $T/rdzv ] && break; sleep 0.05; done
kill -KILL $p0; wait $p0 2>/dev/null
left=$([ -s $T/rdzv ] && echo yes)
rank 0 TUPE_RENDEZVOUS_FILE=$T/rdzv TUPE_COMM_TIMEOUT=60; p0=$!
rank 1 TUPE_RENDEZVOUS_FILE=$T/rdzv TUPE_COMM_TIMEOUT=60; p1=$!
both_ok $p0 $p1 && [ "$left" = yes ] && [ ! -e $T/rdzv ]
verdict "the file a killed rank 0 left is replaced by the next job's"

# Timeouts and counts, checked before anything waits or is allocated.
run env TUPE_COMM_TIMEOUT=soon MASTER_ADDR=127.0.0.1 RANK=0 WORLD_SIZE=2 $P
[ $rc = 2 ] && has $T/err "TUPE_COMM_TIMEOUT=soon is not a number of seconds"
verdict "a TUPE_COMM_TIMEOUT that is no number: a usage error, as for MASTER_PORT"
run env MASTER_ADDR=127.0.0.1 RANK=0 WORLD_SIZE=100000000 $P
[ $rc = 2 ] && has $T/err "the world has 100000000 ranks: at most 65536"
verdict "WORLD_SIZE=100000000: refused before anything is allocated for the ranks"
# A rank admitted and waiting for rank 0's welcome gives up after TUPE_COMM_TIMEOUT.
port=$((port + 1)); tcp=(MASTER_ADDR=127.0.0.1 MASTER_PORT=$port)
WS=3 rank 0 "${tcp[@]}" TUPE_COMM_TIMEOUT=60; p0=$!
wait_listen $port
start=$(date +%s)
WS=3 rank 1 "${tcp[@]}" TUPE_COMM_TIMEOUT=4; p1=$!
sleep 2.5; kill -STOP $p0
wait $p1; rc=$?; took=$(($(date +%s) - start))
kill -CONT $p0; kill $p0; wait $p0 2>/dev/null
cp $T/err.1 $T/err
# (admitted and waiting for the welcome: "no word from rank 0 for 4 s"; on a machine so loaded
# that rank 0 stopped before it answered: "could not reach rank 0 ... within 4 s")
[ $rc = 1 ] && has $T/err " 4 s (TUPE_COMM_TIMEOUT)" && [ $took -lt 15 ]
verdict "a rank waiting for rank 0's welcome gives up after TUPE_COMM_TIMEOUT=4 (${took} s)"
exit $_failed
