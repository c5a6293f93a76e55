# Shared helpers for the shell-level tests. Each test prints "ok - NAME" or "not ok - NAME"
# (with "#" lines of detail); tests/run counts them.
#
# Environment (set by `make check`): TUPE_BIN (programs), TUPE_BUILD (build dir),
# TUPE_SRC (source tree), TUPE_DATA (../shared/data).
set -u
: "${TUPE_BIN:?run through make check}"
: "${TUPE_BUILD:?run through make check}"
: "${TUPE_SRC:?run through make check}"
: "${TUPE_DATA:=$TUPE_SRC/../shared/data}"
TESTTOOL=$TUPE_BUILD/tests/tupe-testtool
export PATH="$TUPE_BIN:$PATH"
# For processes that start MPI: full stack unwinding, so that the suppressions of Open MPI's
# own leaks (tests/lsan.supp, in LSAN_OPTIONS from tests/run) can tell them from ours.
MPI_ASAN_OPTIONS="${ASAN_OPTIONS:-}:fast_unwind_on_malloc=0"
SUITE=$(basename "$0" .sh)
T=$(mktemp -d "${TMPDIR:-/tmp}/tupe-cli-$SUITE.XXXXXX")
trap 'rm -rf "$T"' EXIT
_failed=0

ok() { echo "ok - cli/$SUITE: $1"; }
not_ok() { echo "not ok - cli/$SUITE: $1"; shift; for l in "$@"; do printf '#   %s\n' "$l"; done; _failed=1; }

# run CMD...: captures stdout in $T/out, stderr in $T/err, the exit status in $rc.
run() { "$@" >"$T/out" 2>"$T/err"; rc=$?; }

# Write a test as a command list followed by `verdict NAME`: ok when the whole list just before
# it succeeded (every condition of a && list counts), otherwise not ok with the captures.
#     run prog args
#     [ $rc = 0 ] && has $T/out "text" && [ -s file ]
#     verdict "what this shows"
verdict() {
    local st=$? name=$1
    if [ $st = 0 ]; then ok "$name"; else
        not_ok "$name" "rc=${rc:-?}" "stdout: $(head -c 600 "$T/out" 2>/dev/null)" \
            "stderr: $(head -c 600 "$T/err" 2>/dev/null)"
    fi
}

# check NAME COMMAND...: the same for one simple command (its arguments are not a list).
check() {
    local name=$1; shift
    if "$@"; then ok "$name"; else
        not_ok "$name" "failed: $*" "rc=${rc:-?}" "stdout: $(head -c 600 "$T/out" 2>/dev/null)" \
            "stderr: $(head -c 600 "$T/err" 2>/dev/null)"
    fi
}

has() { grep -qF -- "$2" "$1"; }          # has FILE TEXT
lacks() { ! grep -qF -- "$2" "$1"; }
is_empty() { [ ! -s "$1" ]; }

# small_world SEED DOCS SHARDS POSITION: in the current directory, a small corpus of DOCS
# documents over the 100 tokens of tests/fixtures/attnviz/vocab.txt (text.txt), its token
# stream (ids.tok), shards of 32 ids a sequence (shards/), a random checkpoint of that
# vocabulary (ck/) and a tiny model configuration (m.json), for the tests of tupe(7)'s rules.
small_world() {
    local v=$TUPE_SRC/tests/fixtures/attnviz/vocab.txt
    awk -v seed="$1" -v docs="$2" 'BEGIN { srand(seed); for (d = 0; d < docs; d++) {
         n = 8 + int(rand() * 20); s = ""
         for (i = 0; i < n; i++) s = s (i ? " " : "") "w" (5 + int(rand() * 90)); print s; print "" } }' >text.txt
    tupe-tokenize encode -q --vocab $v -o ids.tok text.txt
    tupe-shard -q -o shards --seq-len 32 --shards "$3" --valid-fraction 0.1 ids.tok
    "$TUPE_BUILD/tests/tupe-modeltool" init --vocab-size 100 -o ck
    printf '{"position": "%s", "hidden_size": 16, "num_hidden_layers": 1, "num_attention_heads": 2,
 "intermediate_size": 32, "max_position_embeddings": 64}\n' "$4" >m.json
}
