#!/usr/bin/env bash
# The shared CLI conventions, end to end through a program built on lib/cli.c:
# --help/--version on stdout with exit 0, usage errors with exit 2, "prog: file: place: message"
# errors with the documented exit codes, '-' for stdin/stdout, help and completion from one table.
. "$(dirname "$0")/lib.sh"
P=$TESTTOOL

run $P --help
check "program --help on stdout, exit 0" eval '[ $rc = 0 ] && has $T/out "Usage: tupe-testtool COMMAND" && is_empty $T/err'
run $P tok-write --help
check "command --help lists its options and the common ones" eval '\
    [ $rc = 0 ] && has $T/out "--output=PATH" && has $T/out "--threads=N" && has $T/out "Exit status: 0 success"'
run $P tok-write -o x --bogus-option -h
check "-h anywhere wins over other arguments" eval '[ $rc = 0 ] && has $T/out "Usage: tupe-testtool tok-write"'
run $P help tok-cat
check "'help COMMAND' is the command's --help" eval '[ $rc = 0 ] && has $T/out "Usage: tupe-testtool tok-cat"'
run $P --version
check "--version: first line 'program (package) version', exit 0" eval '\
    [ $rc = 0 ] && [ "$(head -1 $T/out)" = "tupe-testtool (tupe) $(cat $TUPE_SRC/VERSION)" ]'
run $P tok-write --bogus
check "unknown option: exit 2, message and hint on stderr" eval '\
    [ $rc = 2 ] && has $T/err "tupe-testtool: unrecognized option '\''--bogus'\''" && has $T/err "Try '\''tupe-testtool tok-write --help'\''" && is_empty $T/out'
run $P tok-write --vocab-size
check "missing option argument: exit 2" eval '[ $rc = 2 ] && has $T/err "option '\''--vocab-size'\'' requires an argument"'
run $P tok-write --vocab-size=12x
check "malformed number names the option: exit 2" eval '[ $rc = 2 ] && has $T/err "--vocab-size: expected an integer from 1 to"'
run $P tok-write --threads 0
check "--threads validated" eval '[ $rc = 2 ] && has $T/err "--threads: expected an integer from 1 to 4096"'
run $P progress --mode=lines
check "choice options list the choices" eval '[ $rc = 2 ] && has $T/err "--mode: expected one of bytes,items, got '\''lines'\''"'
run $P progress --memory 1.5G -q
check "size options accept suffixes" eval '[ $rc = 0 ] && has $T/out "memory 1610612736"'
run $P frobnicate
check "unknown command: exit 2" eval '[ $rc = 2 ] && has $T/err "unknown command '\''frobnicate'\''"'
run $P
check "no command: usage on stderr, exit 2" eval '[ $rc = 2 ] && has $T/err "Usage: tupe-testtool COMMAND"'

# Data round trip through stdin/stdout ('-' and the default).
printf '1 2 3\n\n4 5 6 7\n' >$T/ids.txt
run sh -c "$P tok-write <$T/ids.txt | $P tok-cat -"
check "'-' and pipes: ids survive a round trip" eval '[ $rc = 0 ] && [ "$(cat $T/out)" = "$(cat $T/ids.txt)" ]'
run $P tok-write -o $T/a.tok $T/ids.txt
check "-o writes a file" eval '[ $rc = 0 ] && [ -s $T/a.tok ] && [ -z "$(ls -A $T | grep '\''\.tmp\.'\'')" ]'

# Errors name the file and the place, with the documented exit codes.
run $P tok-cat $T/missing.tok
check "missing input: exit 66, named" eval '[ $rc = 66 ] && has $T/err "tupe-testtool: $T/missing.tok: No such file or directory"'
head -c 70 $T/a.tok >$T/cut.tok
run $P tok-cat $T/cut.tok
check "truncated stream: exit 65, file and byte offset" eval '[ $rc = 65 ] && has $T/err "tupe-testtool: $T/cut.tok: byte 64: "'
printf '1 2\n3 99999\n' >$T/bad.txt
run $P tok-write -o $T/b.tok $T/bad.txt
check "bad input line: exit 65, file:line, no output left behind" eval '\
    [ $rc = 65 ] && has $T/err "tupe-testtool: $T/bad.txt:2: expected an id below 30522" && [ ! -e $T/b.tok ] && [ -z "$(ls -A $T | grep '\''\.tmp\.'\'')" ]'
run $P tok-write -o $T/nodir/x.tok $T/ids.txt
check "uncreatable output: exit 73" eval '[ $rc = 73 ] && has $T/err "cannot create"'
if [ -w /dev/full ]; then
    run sh -c "$P tok-write $T/ids.txt >/dev/full"
    check "full disk: exit 74" eval '[ $rc = 74 ] && has $T/err "write failed: No space left on device"'
fi

# Progress: plain lines when stderr is not a terminal, nothing with -q.
run env TUPE_PROGRESS_INTERVAL=0 $P progress -n 3
check "progress as plain lines on a non-terminal" eval '[ $rc = 0 ] && has $T/err "steps: 33%" && lacks $T/err $'\''\r'\'''
run env TUPE_PROGRESS_INTERVAL=0 $P progress -n 3 -q
check "-q silences progress" eval '[ $rc = 0 ] && is_empty $T/err'

# Help and completion come from the same table.
run $P tok-write --completion-helper
check "completion data lists every option in --help" bash -c '
    for o in $(awk -F"\t" "\$1 == \"opt\" { print \$2 }" '"$T/out"'); do
        '"$P"' tok-write --help | grep -q -- "$o" || { echo "missing $o"; exit 1; }
    done'
exit $_failed
