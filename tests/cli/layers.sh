#!/usr/bin/env bash
# The layers of lib/ (lib/README.md): every #include of a library module names its folder
# ("base/error.h") and reaches only its own folder or one the map lists for it, so nothing
# includes upward and nothing below cli/ includes the command line's header; kernels/ reaches
# only backend/ and base/; the map itself only looks downward (no folder lists one after it);
# only backend/ and train/comm reach CUDA, NCCL or MPI; nothing below cli/ prints or exits;
# and the map names every module.
. "$(dirname "$0")/lib.sh"

# layers ROOT: the table between the markers of ROOT/lib/README.md, one "folder: allowed..." a line.
layers() { sed -n '/<!-- layers: begin -->/,/<!-- layers: end -->/p' "$1/lib/README.md" | grep -E '^[a-z]+:'; }

# violations ROOT: one line per include of ROOT/lib or ROOT/kernels that breaks the map.
violations() {
    local root=$1
    {
        layers "$root" | sed 's/^/map /'
        (cd "$root" && ls -d lib/*/ | sed 's/^/dir /')
        (cd "$root" && find lib -maxdepth 1 -type f \( -name '*.[ch]' -o -name '*.inc' \) | sed 's/^/loose /')
        (cd "$root" && find lib -mindepth 2 -type f | sed 's/^/file /')
        (cd "$root" && grep -HnE '^[[:space:]]*#[[:space:]]*include[[:space:]]*"' \
            lib/*/*.[ch] lib/*/*.inc kernels/*.cu kernels/*.cuh 2>/dev/null | sed 's/^/inc /')
    } | awk '
    $1 == "map" {
        f = $2; sub(/:$/, "", f); known[f] = 1; order[f] = ++n
        for (i = 3; i <= NF; i++) {
            allow[f, $i] = 1
            if (!($i in order)) print "lib/README.md: " f " lists " $i ", which is not below it in the map"
        }
        next
    }
    $1 == "dir" { d = $2; sub(/^lib\//, "", d); sub(/\/$/, "", d); dirs[d] = 1; next }
    $1 == "loose" { print $2 ": a module outside the layer folders"; next }
    $1 == "file" { exists[$2] = 1; next }
    $1 == "inc" {
        split($2, p, ":"); src = p[1]; line = p[2]
        target = $0; sub(/^[^"]*"/, "", target); sub(/".*$/, "", target)
        where = src ":" line ": \"" target "\""
        if (src ~ /^kernels\//) {
            if (target !~ /\//) next                  # kernels/ own headers
            tl = target; sub(/\/.*/, "", tl)
            if (tl != "backend" && tl != "base") print where ": kernels/ reaches only backend/ and base/"
            next
        }
        sl = src; sub(/^lib\//, "", sl); sub(/\/.*/, "", sl)
        if (target ~ /(^|\/)cmd\// || target ~ /^\.\./) { print where ": lib/ never includes outside lib/"; next }
        if (target !~ /^[a-z]+\/[A-Za-z0-9_]+\.(h|c|inc)$/) { print where ": not by its layer folder (\"layer/name.h\")"; inc_bad++; next }
        if (!(("lib/" target) in exists)) { print where ": no such file under lib/"; next }
        tl = target; sub(/\/.*/, "", tl)
        if (tl == sl) next
        if (!((sl, tl) in allow)) print where ": " sl "/ may not include " tl "/ (lib/README.md)"
    }
    END {
        for (d in dirs) if (!(d in known)) print "lib/" d "/: a folder the map does not list"
        for (f in known) if (!(f in dirs)) print "lib/README.md: " f " is not a folder of lib/"
    }'
}

# The checker finds what it should, on a small tree that breaks each rule once.
mk() { mkdir -p "$(dirname "$T/fake/$1")"; printf '%s\n' "$2" >"$T/fake/$1"; }
mk lib/README.md '<!-- layers: begin -->
base:
text:     base
cli:      text base data
<!-- layers: end -->'
mk lib/base/a.h '#include "base/b.h"'
mk lib/base/b.h '#include "text/t.h"'
mk lib/text/t.c '#include "text/t.h"
#include "cli/cli.h"
#include "t.h"'
mk lib/text/t.h '#include "base/a.h"'
mk lib/cli/cli.h '#include "text/t.h"'
mk lib/loose.c ''
mk lib/extra/x.h ''
mk kernels/k.cu '#include "text/t.h"'
found=$(violations "$T/fake")
exp=("lib/base/b.h:1: \"text/t.h\": base/ may not include text/"
     "lib/text/t.c:2: \"cli/cli.h\": text/ may not include cli/"
     "lib/text/t.c:3: \"t.h\": not by its layer folder"
     "lib/loose.c: a module outside the layer folders"
     "lib/extra/: a folder the map does not list"
     "kernels/k.cu:1: \"text/t.h\": kernels/ reaches only backend/ and base/"
     "lib/README.md: cli lists data, which is not below it in the map")
miss=()
for x in "${exp[@]}"; do grep -qF -- "$x" <<<"$found" || miss+=("$x"); done
check "the include check finds each kind of break, and only those" eval '[ ${#miss[@]} = 0 ] && [ "$(wc -l <<<"$found")" = ${#exp[@]} ]'
[ ${#miss[@]} = 0 ] || printf '#   missed: %s\n' "${miss[@]}"

found=$(violations "$TUPE_SRC")
check "every include of lib/ and kernels/ follows the map of lib/README.md" [ -z "$found" ]
# Only the backend and the collectives know that CUDA, NCCL and MPI exist (DESIGN.md).
knows=$(cd "$TUPE_SRC" && grep -lE '#[[:space:]]*include[[:space:]]*[<"]((backend/backend_cuda|mpi|nccl|cuda[a-z_]*|cublas[A-Za-z_]*)\.h)[>"]|ncclComm|MPI_Init' \
    lib/*/*.[ch] | grep -vE '^lib/backend/|^lib/train/comm\.c$')
check "only backend/ and train/comm know CUDA, NCCL and MPI" [ -z "$knows" ]
# The library never prints or exits: messages go through the caller's note function
# (base/note.h); only cli/ writes to the terminal, and base/progress draws progress there.
prints=$(cd "$TUPE_SRC" && grep -nE '\b(stderr|stdout)\b|(^|[^a-z_])(printf|puts|putchar|perror|exit|_exit|abort)\(' \
    lib/*/*.c | grep -vE '^lib/cli/|^lib/base/progress\.c:' | grep -vE '^[^:]+:[0-9]+:[[:space:]]*(/?\*)' | grep -v '"(stdout)"')
check "nothing in lib/ below cli/ prints or exits" [ -z "$prints" ]
# The map names every module, so that it says where each one lives.
unnamed=$(cd "$TUPE_SRC" && for f in lib/*/*.[ch]; do s=$(basename "${f%.*}"); grep -q "\`$s\`" lib/README.md || echo "$f"; done)
check "lib/README.md names every module" [ -z "$unnamed" ]
check "lib/README.md holds the map" [ "$(layers "$TUPE_SRC" | wc -l)" -ge 8 ]
exit $_failed
