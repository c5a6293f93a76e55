#!/usr/bin/env bash
# Every manual page renders without warnings at 80 columns, and every program has a page,
# a completion entry and a section in tupe(7)'s pipeline.
. "$(dirname "$0")/lib.sh"
for m in "$TUPE_SRC"/man/*.[157]; do
    name=$(basename "$m")
    MANWIDTH=80 man --warnings -l "$m" >"$T/out" 2>"$T/err"; rc=$?
    [ $rc = 0 ] && is_empty "$T/err" && [ -s "$T/out" ]
    verdict "man $name renders without warnings"
    grep -q '^\.SH SEE ALSO' "$m"
    verdict "man $name has NAME and SEE ALSO"
done
for src in "$TUPE_SRC"/cmd/tupe-*.c; do
    [ -e "$src" ] || continue
    p=$(basename "$src" .c)
    bash -c "
        f=$TUPE_SRC/man/$p.1; [ -f \$f ] && grep -q '^\.SH EXIT STATUS' \$f && grep -q '^\.SH ENVIRONMENT' \$f &&
        grep -q '^\.SH FILES' \$f && grep -q '^\.SH EXAMPLES' \$f"
    verdict "$p has a manual page with EXIT STATUS, ENVIRONMENT, FILES, EXAMPLES"
    bash -c "grep -q -- '$p' $TUPE_SRC/completions/tupe.bash && grep -q -- '$p' $TUPE_SRC/completions/_tupe"
    verdict "$p is completed by completions/tupe.bash and _tupe"
    run "$TUPE_BIN/$p" --help
    [ $rc = 0 ] && has "$T/out" "man $p"
    verdict "$p --help works and points to its manual"
done
exit $_failed
