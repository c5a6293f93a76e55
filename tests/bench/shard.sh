#!/usr/bin/env bash
# tupe-shard against zstd alone on the same bytes: wall time (and MB/s of token stream) at
# --memory 256M and 2G, and peak RSS against the budget.
#
# Input: TUPE_BENCH_SHARD_BYTES (default 1.1e9) bytes of token stream made by toksynth from
# the shared English corpus (../shared/data/corpus/debian-104m.txt.zst): every word becomes
# its id in the BERT uncased vocabulary when it is a whole word there, else a hashed id, so
# the ids follow real word frequencies and repetitions (not WordPiece pieces). The corpus is
# replayed with shifted ids until the size is reached. Cached in $TUPE_BUILD/bench-shard/.
#
# Rows: | what | ours | competitor | ours / competitor |   (details on stderr)
set -eu
: "${TUPE_BUILD:?run through make bench}" "${TUPE_BIN:?}" "${TUPE_DATA:?}"
bytes=${TUPE_BENCH_SHARD_BYTES:-1100000000}
threads=${TUPE_BENCH_SHARD_THREADS:-2}
W=$TUPE_BUILD/bench-shard
mkdir -p "$W"
in=$W/in-$bytes.tok
if [ ! -s "$in" ]; then
    echo "shard bench: making $bytes bytes of token stream (toksynth)" >&2
    zstd -dc "$TUPE_DATA/corpus/debian-104m.txt.zst" |
        "$TUPE_BUILD/bench/toksynth" "$TUPE_DATA/vocab/bert-base-uncased-vocab.txt" "$bytes" "$in"
fi
size=$(stat -c %s "$in")
have_time=0
[ -x /usr/bin/time ] && have_time=1

# timed NAME CMD...: wall seconds in $secs, peak RSS (kB) in $rss, user+system seconds in $cpu.
timed() {
    local name=$1; shift
    echo "shard bench: $*" >&2
    local t0 t1
    t0=$(date +%s.%N)
    if [ $have_time = 1 ]; then
        /usr/bin/time -f '%M %U %S' -o "$W/$name.rss" "$@" >&2
        read -r rss u s <"$W/$name.rss"
        cpu=$(echo "$u + $s" | bc -l)
    else
        "$@" >&2
        rss=0 cpu=0
    fi
    t1=$(date +%s.%N)
    secs=$(echo "$t1 - $t0" | bc -l)
}

mbs() { echo "$size / $1 / 1000000" | bc -l; }

for level in 3; do
    rm -f "$W/out.zst"
    timed zstd zstd -q -$level -T$threads -f "$in" -o "$W/out.zst"
    zsecs=$secs zcpu=$cpu zsize=$(stat -c %s "$W/out.zst")
    rm -f "$W/out.zst"
    for mem in 256M 2G; do
        rm -rf "$W/out"
        timed shard-$mem "$TUPE_BIN/tupe-shard" -q --threads $threads --level $level --memory $mem \
            --temp-dir "$W" -o "$W/out" "$in"
        ssize=$(du -sb "$W/out" | cut -f1)
        case $mem in *G) budget=$(( ${mem%G} * 1024 )) ;; *) budget=${mem%M} ;; esac
        echo "shard bench: --memory $mem: $secs s, peak RSS $((rss / 1024)) MiB, output $ssize bytes (zstd alone: $zsecs s, $zsize bytes)" >&2
        printf '| tupe-shard %s MB token stream, level %d, %d threads, --memory %s: time | %.1f s (%.0f MB/s) | zstd -%d -T%d: %.1f s (%.0f MB/s) | %.2f |\n' \
            $((size / 1000000)) $level $threads $mem "$secs" "$(mbs $secs)" $level $threads "$zsecs" "$(mbs $zsecs)" \
            "$(echo "$secs / $zsecs" | bc -l)"
        if [ $have_time = 1 ]; then
            printf '| tupe-shard --memory %s: CPU time (user + system) | %.1f s | zstd -%d -T%d: %.1f s | %.2f |\n' \
                $mem "$cpu" $level $threads "$zcpu" "$(echo "$cpu / $zcpu" | bc -l)"
            printf '| tupe-shard --memory %s: peak RSS | %d MiB | budget %d MiB | %.2f |\n' \
                $mem $((rss / 1024)) $budget "$(echo "$rss / 1024 / $budget" | bc -l)"
        fi
        printf '| tupe-shard --memory %s: output size | %.0f MB | zstd -%d: %.0f MB | %.2f |\n' \
            $mem "$(echo "$ssize / 1000000" | bc -l)" $level "$(echo "$zsize / 1000000" | bc -l)" \
            "$(echo "$ssize / $zsize" | bc -l)"
    done
done
rm -rf "$W/out"
