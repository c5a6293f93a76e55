#!/usr/bin/env bash
# make install / uninstall honour PREFIX and DESTDIR; the installed library links through
# pkg-config; the man pages and completions land where man and bash-completion look.
. "$(dirname "$0")/lib.sh"
mk() { make --no-print-directory -C "$TUPE_SRC" B="$TUPE_BUILD" SANITIZE="${TUPE_SANITIZE:-}" "$@"; }

P=$T/prefix
run mk install PREFIX=$P
[ $rc = 0 ]
verdict "make install PREFIX=... succeeds"
[ -f $P/lib/libtupe.a ] && [ -f $P/include/tupe/formats/safetensors.h ] && [ -f $P/lib/pkgconfig/tupe.pc ]
verdict "library, headers, pkg-config file installed"
[ -f $P/include/tupe/model/model.h ] && [ -f $P/include/tupe/base/error.h ] && [ ! -e $P/include/tupe/data/framepool.h ] && \
    [ -z "$(find $P/include/tupe -maxdepth 1 -type f)" ]
verdict "public headers in their layer folders, the library's own left out"
[ -f $P/share/man/man7/tupe.7 ] && [ -f $P/share/man/man5/tupe-formats.5 ]
verdict "man pages installed by section"
[ -f $P/share/bash-completion/completions/tupe ] && [ -f $P/share/zsh/site-functions/_tupe ]
verdict "completions installed"
run env MANPATH=$P/share/man man -w tupe-formats
[ $rc = 0 ] && has $T/out "$P/share/man/man5/tupe-formats.5"
verdict "man finds the installed pages"
for p in "$TUPE_BIN"/tupe-*; do
    [ -e "$p" ] || continue
    n=$(basename $p)
    [ -x $P/bin/$n ] && [ -L $P/share/bash-completion/completions/$n ]
    verdict "$n installed with its completion link"
done
# The installed tupe-convert finds the transformers code in PREFIX/share/tupe/hf.
MT=$TUPE_BUILD/tests/tupe-modeltool
CV=$TUPE_SRC/tests/fixtures/convert
$MT init --model $CV/tiny.json --position tupe-r --vocab-size 60 -o $T/ck >/dev/null 2>&1
run $P/bin/tupe-convert export --to hf $T/ck -o $T/ck-hf --vocab $CV/vocab.txt
[ $rc = 0 ] && cmp -s $T/ck-hf/modeling_tupe.py $P/share/tupe/hf/modeling_tupe.py &&
    [ -s $T/ck-hf/configuration_tupe.py ]
verdict "an installed export carries share/tupe/hf/modeling_tupe.py"

cat >$T/hello.c <<'C'
#include <stdio.h>
#include <tupe/base/checksum.h>
#include <tupe/base/error.h>
#include <tupe/model/model.h>
int main(void)
{
    tupe_err e;
    tupe_fail_line(&e, TUPE_EDATA, "x.txt", 3, "bad");
    printf("%s %016llx\n", e.msg, (unsigned long long)tupe_hash64("", 0));
    return 0;
}
C
if [ -z "${TUPE_SANITIZE:-}" ]; then
    run sh -c "cc $T/hello.c -o $T/hello \$(PKG_CONFIG_PATH=$P/lib/pkgconfig pkg-config --cflags --libs tupe) && $T/hello"
    [ $rc = 0 ] && has $T/out "x.txt:3: bad 2d06800538d394c2"
    verdict "a C program links against libtupe via pkg-config"
fi
run mk uninstall PREFIX=$P
[ $rc = 0 ] && [ -z "$(find $P -type f -o -type l)" ]
verdict "make uninstall removes everything it installed"

run mk install PREFIX=/usr/local DESTDIR=$T/stage
[ $rc = 0 ] && [ -f $T/stage/usr/local/lib/libtupe.a ] && \
    grep -q '^prefix=/usr/local$' $T/stage/usr/local/lib/pkgconfig/tupe.pc
verdict "DESTDIR stages under the prefix"
# make demo installs only what is missing, like every other target: it must not run apt-get
# when nothing is (nor refuse to start for a user who cannot).
run mk -n demo
[ $rc = 0 ] && lacks $T/out "apt-get"
verdict "make demo needs no apt-get when the packages are installed"
exit $_failed
