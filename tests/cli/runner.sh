#!/usr/bin/env bash
# tests/run, the runner behind `make check`, on a made-up suite: it counts passes, failures and
# skips, counts a test binary that dies without reporting a failure as one, and ends with the
# one summary line "N passed, N failed, N skipped" that CI and the README rely on.
. "$(dirname "$0")/lib.sh"
mkdir -p $T/b/tests $T/s/tests/cli
printf '#!/bin/sh\necho "ok - test_a: one"\necho "ok - test_a: two # SKIP no data here"\n' >$T/b/tests/test_a
printf '#!/bin/sh\necho "ok - test_b: one"\nkill -SEGV $$\n' >$T/b/tests/test_b
printf '#!/bin/sh\necho "ok - cli/c: one"\necho "not ok - cli/c: two"\necho "ok - cli/c: three # SKIP mpirun is not on PATH"\n' >$T/s/tests/cli/c.sh
printf 'echo "not ok - lib.sh is a library, not a test"\n' >$T/s/tests/cli/lib.sh
chmod +x $T/b/tests/test_* $T/s/tests/cli/c.sh
suite() { run env TUPE_BUILD=$T/b TUPE_SRC=$T/s TUPE_TEST_FILTER="$1" "$TUPE_SRC/tests/run"; }

suite ""
[ $rc = 1 ] && [ "$(tail -1 $T/out)" = "3 passed, 2 failed, 2 skipped" ]
verdict "the summary line counts passes, failures and skips, and comes last"
has $T/out "not ok - test_b: exited with status 139 without reporting a failure"
verdict "a test binary that crashes counts as a failure"
has $T/out "ok - cli/c: three # SKIP mpirun is not on PATH" && lacks $T/out "lib.sh is a library"
verdict "skip lines are shown with their reason; lib.sh is not run"
suite test_a
[ $rc = 0 ] && [ "$(tail -1 $T/out)" = "1 passed, 0 failed, 1 skipped" ]
verdict "TUPE_TEST_FILTER runs a subset; skips alone do not fail the run"
exit $_failed
