#!/usr/bin/env bash
# The shared CLI conventions, end to end through a program built on lib/cli/cli.c:
# --help/--version on stdout with exit 0, usage errors with exit 2, "prog: file: place: message"
# errors with the documented exit codes, '-' for stdin/stdout, help and completion from one table.
. "$(dirname "$0")/lib.sh"
P=$TESTTOOL

run $P --help
[ $rc = 0 ] && has $T/out "Usage: tupe-testtool COMMAND" && is_empty $T/err
verdict "program --help on stdout, exit 0"
run $P tok-write --help
[ $rc = 0 ] && has $T/out "--output=PATH" && has $T/out "--threads=N" && has $T/out "Exit status: 0 success"
verdict "command --help lists its options and the common ones"
run $P tok-write -o x --bogus-option -h
[ $rc = 0 ] && has $T/out "Usage: tupe-testtool tok-write"
verdict "-h anywhere wins over other arguments"
run $P help tok-cat
[ $rc = 0 ] && has $T/out "Usage: tupe-testtool tok-cat"
verdict "'help COMMAND' is the command's --help"
run $P --version
[ $rc = 0 ] && [ "$(head -1 $T/out)" = "tupe-testtool (tupe) $(cat $TUPE_SRC/VERSION)" ]
verdict "--version: first line 'program (package) version', exit 0"
run $P tok-write --bogus
[ $rc = 2 ] && has $T/err "tupe-testtool: unrecognized option '--bogus'" && has $T/err "Try 'tupe-testtool tok-write --help'" && is_empty $T/out
verdict "unknown option: exit 2, message and hint on stderr"
run $P tok-write --vocab-size
[ $rc = 2 ] && has $T/err "option '--vocab-size' requires an argument"
verdict "missing option argument: exit 2"
run $P tok-write --vocab-size=12x
[ $rc = 2 ] && has $T/err "--vocab-size: expected an integer from 1 to"
verdict "malformed number names the option: exit 2"
run $P tok-write --threads 0
[ $rc = 2 ] && has $T/err "--threads: expected an integer from 1 to 4096"
verdict "--threads validated"
run $P progress --mode=lines
[ $rc = 2 ] && has $T/err "--mode: expected one of bytes,items, got 'lines'"
verdict "choice options list the choices"
run $P progress --memory 1.5G -q
[ $rc = 0 ] && has $T/out "memory 1610612736"
verdict "size options accept suffixes"
run $P frobnicate
[ $rc = 2 ] && has $T/err "unknown command 'frobnicate'"
verdict "unknown command: exit 2"
run $P
[ $rc = 2 ] && has $T/err "Usage: tupe-testtool COMMAND"
verdict "no command: usage on stderr, exit 2"

# Data round trip through stdin/stdout ('-' and the default).
printf '1 2 3\n\n4 5 6 7\n' >$T/ids.txt
run sh -c "$P tok-write <$T/ids.txt | $P tok-cat -"
[ $rc = 0 ] && [ "$(cat $T/out)" = "$(cat $T/ids.txt)" ]
verdict "'-' and pipes: ids survive a round trip"
run $P tok-write -o $T/a.tok $T/ids.txt
[ $rc = 0 ] && [ -s $T/a.tok ] && [ -z "$(ls -A $T | grep '\.tmp\.')" ]
verdict "-o writes a file"

# Errors name the file and the place, with the documented exit codes.
run $P tok-cat $T/missing.tok
[ $rc = 66 ] && has $T/err "tupe-testtool: $T/missing.tok: No such file or directory"
verdict "missing input: exit 66, named"
head -c 70 $T/a.tok >$T/cut.tok
run $P tok-cat $T/cut.tok
[ $rc = 65 ] && has $T/err "tupe-testtool: $T/cut.tok: byte 64: "
verdict "truncated stream: exit 65, file and byte offset"
printf '1 2\n3 99999\n' >$T/bad.txt
run $P tok-write -o $T/b.tok $T/bad.txt
[ $rc = 65 ] && has $T/err "tupe-testtool: $T/bad.txt:2: expected an id below 30522" && [ ! -e $T/b.tok ] && [ -z "$(ls -A $T | grep '\.tmp\.')" ]
verdict "bad input line: exit 65, file:line, no output left behind"
run $P tok-write -o $T/nodir/x.tok $T/ids.txt
[ $rc = 73 ] && has $T/err "cannot create"
verdict "uncreatable output: exit 73"
if [ -w /dev/full ]; then
    run sh -c "$P tok-write $T/ids.txt >/dev/full"
    [ $rc = 74 ] && has $T/err "write failed: No space left on device"
    verdict "full disk: exit 74"
fi

# Progress: plain lines when stderr is not a terminal, nothing with -q.
run env TUPE_PROGRESS_INTERVAL=0 $P progress -n 3
[ $rc = 0 ] && has $T/err "steps: 33%" && lacks $T/err $'\r'
verdict "progress as plain lines on a non-terminal"
run env TUPE_PROGRESS_INTERVAL=0 $P progress -n 3 -q
[ $rc = 0 ] && is_empty $T/err
verdict "-q silences progress"

# Help and completion come from the same table.
run $P tok-write --completion-helper
bash -c '
    for o in $(awk -F"\t" "\$1 == \"opt\" { print \$2 }" '"$T/out"'); do
        '"$P"' tok-write --help | grep -q -- "$o" || { echo "missing $o"; exit 1; }
    done'
verdict "completion data lists every option in --help"
exit $_failed
