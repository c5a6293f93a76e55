#!/usr/bin/env bash
# Every manual page renders without warnings at 80 columns, and every program has a page,
# a completion entry and a section in tupe(7)'s pipeline.
. "$(dirname "$0")/lib.sh"
for m in "$TUPE_SRC"/man/*.[157]; do
    name=$(basename "$m")
    MANWIDTH=80 man --warnings -l "$m" >"$T/out" 2>"$T/err"; rc=$?
    check "man $name renders without warnings" eval '[ $rc = 0 ] && is_empty "$T/err" && [ -s "$T/out" ]'
    check "man $name has NAME and SEE ALSO" grep -q '^\.SH SEE ALSO' "$m"
done
for src in "$TUPE_SRC"/cmd/tupe-*.c; do
    [ -e "$src" ] || continue
    p=$(basename "$src" .c)
    check "$p has a manual page with EXIT STATUS, ENVIRONMENT, FILES, EXAMPLES" bash -c "
        f=$TUPE_SRC/man/$p.1; [ -f \$f ] && grep -q '^\.SH EXIT STATUS' \$f && grep -q '^\.SH ENVIRONMENT' \$f &&
        grep -q '^\.SH FILES' \$f && grep -q '^\.SH EXAMPLES' \$f"
    check "$p is completed by completions/tupe.bash and _tupe" \
        bash -c "grep -q -- '$p' $TUPE_SRC/completions/tupe.bash && grep -q -- '$p' $TUPE_SRC/completions/_tupe"
    run "$TUPE_BIN/$p" --help
    check "$p --help works and points to its manual" eval '[ $rc = 0 ] && has "$T/out" "man $p"'
done
exit $_failed
