# Sourced by the example scripts: the corpus they read when none is given, the shared
# debian-104m corpus beside the source tree when it is there, else the bundled sample.
default_corpus() { # SHARE (share/tupe): prints the path
    local c
    for c in "$1/../../../shared/data/corpus/debian-104m.txt.zst" "$1/sample/corpus.txt.zst"; do
        [ -r "$c" ] && { echo "$c"; return 0; }
    done
    return 1
}
