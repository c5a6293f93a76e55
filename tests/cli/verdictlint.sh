#!/usr/bin/env bash
# The shell tests' own soundness: `verdict NAME` reads $? at entry, so the command just before it
# must be the condition. Bash sets $? anew while it builds verdict's arguments when they hold a
# command substitution ($(...) or `...`, also inside $(( ))), and an assignment (x=...; verdict)
# sets it too: either way verdict sees 0 and passes whatever the condition. Compute such text
# into a variable before the condition instead. This finds every verdict that breaks the rule.
. "$(dirname "$0")/lib.sh"

lint() {
    awk '
    # the index in s of a command substitution outside single quotes, or 0
    function subst(s,    i, c, q, n) {
        q = 0; n = length(s)
        for (i = 1; i <= n; i++) {
            c = substr(s, i, 1)
            if (q) { if (c == "\047") q = 0; continue }
            if (c == "\\") { i++; continue }
            if (c == "\047" && !dq) { q = 1; continue }
            if (c == "\"") { dq = !dq; continue }
            # $(( )) alone is arithmetic, which leaves $? as it is
            if (c == "`" || substr(s, i, 2) == "$(" && substr(s, i, 3) != "$((") return i
        }
        return 0
    }
    # the last command of a list: what follows its last ; outside quotes and $( )
    function last(s,    i, c, q, d, n, k) {
        q = ""; d = 0; k = 1; n = length(s)
        for (i = 1; i <= n; i++) {
            c = substr(s, i, 1)
            if (q == "\047") { if (c == "\047") q = ""; continue }
            if (c == "\\") { i++; continue }
            if (q == "\"") { if (c == "\"") q = ""; else if (c == "(") d++; else if (c == ")") d--; continue }
            if (c == "\047" || c == "\"") { q = c; continue }
            if (c == "(") d++
            else if (c == ")") d--
            else if (c == ";" && d == 0) k = i + 1
        }
        return substr(s, k)
    }
    # whether a command is only assignments (their status: 0, or that of a substitution)
    function assignment(s) {
        sub(/^[ \t]*((local|export|declare|readonly|typeset)[ \t]+)?/, "", s)
        return s ~ /^[A-Za-z_][A-Za-z0-9_]*(\[[^]]*\])?\+?=/
    }
    {
        line = $0
        # a verdict whose quoted name goes on to the next line
        while (line ~ /(^|[;{]|then|do|else|&&|\|\|)[ \t]*verdict / && gsub(/"/, "\"", line) % 2 &&
               (getline more) > 0) line = line "\n" more
        if (match(line, /(^|[;{]|then|do|else|&&|\|\|)[ \t]*verdict[ \t]/)) {
            v = RSTART + index(substr(line, RSTART, RLENGTH), "verdict") - 1
            before = substr(line, 1, v - 1); args = substr(line, v + 7)
            sub(/[ \t]+$/, "", before)
            dq = 0; shown = line; gsub(/\n/, " ", shown)
            if (subst(args)) print FILENAME ":" FNR ": verdict NAME holds a command substitution: " shown
            else if (before ~ /;$/ && assignment(last(substr(before, 1, length(before) - 1))) ||
                     before == "" && assignment(last(prev)) && prev !~ /(\\|&&|\|\||\|)[ \t]*$/)
                print FILENAME ":" FNR ": an assignment just before verdict: " shown
        }
        if (line ~ /[^ \t]/ && line !~ /^[ \t]*#/) prev = line
    }' "$@"
}

# what the lint must find, and what it must let pass
cat >$T/bad.sh <<'BAD'
[ $rc = 0 ]
verdict "x ($(cat out))"
f() { [ $rc = 0 ]; verdict "$(echo "$*") y"; }
verdict "took $(($(date +%s) - t0)) s"
verdict "backquoted `wc -l <out` lines"
rc="detail"; verdict "an assignment on the same line"
x=1
verdict "an assignment on the line before"
verdict "a name
on two lines $(cat out)"
BAD
cat >$T/good.sh <<'GOOD'
name="x ($(cat out))"
[ $rc = 0 ]
verdict "$name"
verdict 'a literal $( in single quotes'" then ${rc} and \$( and \`, and $((1 + 2))"
[ $rc = 0 ] && check_something; verdict "after a condition"
check "check runs its own command" [ "$(cat out)" = x ]
GOOD
lint $T/bad.sh >$T/out; lint $T/good.sh >$T/err
[ "$(grep -c . $T/out)" = 7 ] && is_empty $T/err
verdict "the lint finds each verdict that cannot fail, and only those"
found=$(lint $(ls "$TUPE_SRC"/tests/cli/*.sh | grep -v /verdictlint.sh))
[ -z "$found" ]
verdict "every verdict sees its condition's status"
[ -z "$found" ] || printf '%s\n' "$found" | sed 's/^/#   /'
exit $_failed
