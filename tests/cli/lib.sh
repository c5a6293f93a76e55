# Shared helpers for the shell-level tests. Each test prints "ok - NAME" or "not ok - NAME"
# (with "#" lines of detail), or "ok - NAME # SKIP REASON" when it cannot run here; tests/run
# counts them.
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
skip() { echo "ok - cli/$SUITE: $1 # SKIP $2"; }   # skip NAME REASON
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

# ---- test data ---------------------------------------------------------------------------------
# The BERT vocabulary the repository carries (tests/data/README.md).
BERT_VOCAB=$TUPE_SRC/tests/data/bert-base-uncased-vocab.txt
# need_data PATH: whether PATH is in the full test data ($TUPE_DATA, README: Tests); when it is
# not, NO_DATA says so for skip.
need_data() {
    NO_DATA="no $TUPE_DATA/$1 (the full test data: README.md, Tests)"
    [ -e "$TUPE_DATA/$1" ]
}
# sample_glue DIR: SST-2, RTE, MRPC and STS-B in GLUE's layouts, made from sentences of the
# bundled sample corpus (public domain), for what does not need the real tasks: a pair is a
# sentence and its own first half (entailment, 1, score 5) or another's (not_entailment, 0,
# score 0 to 2); SST-2 is a sentence as written (1) or its words shuffled (0). 400 training,
# 100 dev and 100 test rows each.
sample_glue() {
    mkdir -p "$1/SST-2" "$1/RTE" "$1/MRPC" "$1/STS-B"
    zstd -dc "$TUPE_SRC/share/tupe/sample/corpus.txt.zst" | tr -s '\n' ' ' |
        sed 's/\([.!?]\) \([A-Z]\)/\1\n\2/g' | awk -v d="$1" '
        function half(x,   w, n, i, h) { n = split(x, w, " "); h = w[1]
            for (i = 2; i <= n / 2; i++) h = h " " w[i]; return h }
        function shuffled(x,   w, n, i, j, t, r) { n = split(x, w, " ")
            for (i = n; i > 1; i--) { j = int(rand() * i) + 1; t = w[i]; w[i] = w[j]; w[j] = t }
            r = w[1]; for (i = 2; i <= n; i++) r = r " " w[i]; return r }
        NF >= 6 && NF <= 30 && !/\t/ { s[++n] = $0 }
        END {
            srand(17)
            for (p = 0; p < 3; p++) {
                part = p == 0 ? "train" : p == 1 ? "dev" : "test"; test = p == 2
                sst = d "/SST-2/" part ".tsv"; rte = d "/RTE/" part ".tsv"
                mrpc = d "/MRPC/" part ".tsv"; sts = d "/STS-B/" part ".tsv"
                print (test ? "index\tsentence" : "sentence\tlabel") > sst
                print "index\tsentence1\tsentence2" (test ? "" : "\tlabel") > rte
                print (test ? "index" : "Quality") "\t#1 ID\t#2 ID\t#1 String\t#2 String" > mrpc
                print "index\tgenre\tfilename\tyear\told_index\tsource1\tsource2\tsentence1\tsentence2" (test ? "" : "\tscore") > sts
                for (i = 0; i < (p == 0 ? 400 : 100); i++) {
                    k = p == 0 ? i + 1 : p == 1 ? i + 401 : i + 501; a = s[k]
                    same = rand() < 0.5; b = half(same ? a : s[k + 600])
                    x = same ? a : shuffled(a); y = x == a
                    print (test ? i "\t" x : x "\t" y) > sst
                    print i "\t" a "\t" b (test ? "" : same ? "\tentailment" : "\tnot_entailment") > rte
                    print (test ? i : same) "\t" 2 * k "\t" 2 * k + 1 "\t" a "\t" b > mrpc
                    printf "%d\tsample\tsample\t2026\t%d\tsample\tsample\t%s\t%s", i, k, a, b > sts
                    if (!test) printf "\t%.3f", same ? 5 : 2 * rand() > sts
                    print "" > sts
                }
            }
        }'
}

# ---- MPI ---------------------------------------------------------------------------------------
# built_with FEATURE: whether the programs were built with it (--version's "Built with:" line).
built_with() { "$TUPE_BIN/tupe-pretrain" --version | grep -qE "^Built with:.* $1( |$)"; }
# have_mpi: whether this build has MPI and mpirun is here; when not, NO_MPI says why for skip.
have_mpi() {
    if ! built_with mpi; then
        NO_MPI="this build has no MPI (MPI=0, or MPI=auto without Open MPI, which make deps installs)"
    elif ! command -v mpirun >/dev/null; then
        NO_MPI="mpirun is not on PATH"
    else
        return 0
    fi
    return 1
}
# mpi_run ARGS...: run "mpirun ARGS" (as root too, as CI runs; more ranks than cores allowed),
# with MPI's own allocations left to the suppressions under LeakSanitizer.
mpi_run() {
    run env OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1 \
        ASAN_OPTIONS="$MPI_ASAN_OPTIONS" mpirun "$@"
}

has() { grep -qF -- "$2" "$1"; }          # has FILE TEXT
lacks() { ! grep -qF -- "$2" "$1"; }
is_empty() { [ ! -s "$1" ]; }

# rules_setup: what the suites of tupe(7)'s rules (inputs, outputs, locks, reruns, stdout)
# share: MT (the model tool), V (the 100-token vocabulary of small_world), G (GLUE-layout tasks
# made from the bundled sample), and $T as the current directory.
rules_setup() {
    MT=$TUPE_BUILD/tests/tupe-modeltool
    V=$TUPE_SRC/tests/fixtures/attnviz/vocab.txt
    G=$T/sample-glue
    cd $T && sample_glue $G
}

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

# export_files DIR [SUB...]: "sha256  name" of every file of an export directory (of its
# subdirectories SUB, named SUB/file, when given), config.json without its tupe_version line
# (the one line that changes with every release)
export_files() {
    local dir=$1 d f name
    shift
    for d in "${@:-.}"; do
        for f in $(ls "$dir/$d"); do
            name=$f
            [ "$d" = . ] || name=$d/$f
            if [ "$f" = config.json ]; then
                echo "$(grep -v '"tupe_version"' "$dir/$d/$f" | sha256sum | cut -d' ' -f1)  $name"
            else
                echo "$(sha256sum <"$dir/$d/$f" | cut -d' ' -f1)  $name"
            fi
        done
    done
}
