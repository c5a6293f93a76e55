#!/usr/bin/env bash
# The shell tests' own soundness: `check NAME [ A ] && B` runs only `[ A ]` inside check (the
# shell splits the line at &&), prints "ok", then runs B where its failure goes unnoticed. A
# compound condition must be a single command: check NAME eval '[ A ] && B'. This finds any
# check whose arguments hold an && or || outside quotes, $( ) and ( ).
. "$(dirname "$0")/lib.sh"

lint() {
    awk '
    function scan(s,    i, c, q, d, n) {
        q = ""; d = 0; n = length(s)
        for (i = 1; i <= n; i++) {
            c = substr(s, i, 1)
            if (q == "\047") { if (c == "\047") q = ""; continue }
            if (c == "\\") { i++; continue }
            if (q == "\"") { if (c == "\"") q = ""; continue }
            if (c == "\047" || c == "\"") { q = c; continue }
            if (c == "(") { d++; continue }
            if (c == ")") { d--; continue }
            if (d == 0 && (substr(s, i, 2) == "&&" || substr(s, i, 2) == "||")) return 1
        }
        return 0
    }
    {
        line = $0
        while (line ~ /(\\|&&|\|\|)[ \t]*$/ && (getline more) > 0) line = line "\n" more
        if (line ~ /^[ \t]*check [\047"]/ ) {
            rest = line; sub(/^[ \t]*check /, "", rest)
            q = substr(rest, 1, 1); rest = substr(rest, 2)
            # skip the quoted name
            while (length(rest) && substr(rest, 1, 1) != q) {
                if (substr(rest, 1, 1) == "\\") rest = substr(rest, 2)
                rest = substr(rest, 2)
            }
            if (scan(substr(rest, 2))) print FILENAME ": " line
        }
    }' "$@"
}

printf 'check "a" [ $rc = 0 ] && has out x\n' >$T/bad.sh
printf 'check "b" eval '\''[ $rc = 0 ] && has out x'\''\ncheck "c" bash -c "a && b"\n' >$T/good.sh
check "the lint finds a split condition" eval '[ -n "$(lint $T/bad.sh)" ] && [ -z "$(lint $T/good.sh)" ]'
found=$(lint "$TUPE_SRC"/tests/cli/*.sh)
check "every check condition is one command" [ -z "$found" ]
[ -z "$found" ] || printf '%s\n' "$found" | sed 's/^/#   /'
exit $_failed
