#!/usr/bin/env bash
# The bash completion script, driven the way bash drives it (COMP_WORDS/COMP_CWORD), against
# a program built on lib/cli.c; with the bash-completion package when it is installed.
. "$(dirname "$0")/lib.sh"
cp "$TESTTOOL" "$T/tupe-testtool"
export PATH="$T:$PATH"

complete_words() { # complete_words WORD... ; the last word is the one being completed
    MODE=$mode bash -c '
        [ "$MODE" = full ] && [ -r /usr/share/bash-completion/bash_completion ] && . /usr/share/bash-completion/bash_completion
        . "$1"; shift
        complete -F _tupe_complete tupe-testtool
        COMP_WORDS=("$@"); COMP_CWORD=$(( $# - 1 ))
        COMP_LINE="$*"; COMP_POINT=${#COMP_LINE}
        _tupe_complete
        printf "%s\n" "${COMPREPLY[@]}"' _ "$TUPE_SRC/completions/tupe.bash" "$@" 2>&1
}

for mode in full plain; do
    out=$(complete_words tupe-testtool tok)
    check "[$mode] subcommands complete" [ "$out" = $'tok-write\ntok-cat' ]
    out=$(complete_words tupe-testtool tok-write --vo)
    check "[$mode] long options complete with '='" bash -c "grep -qx -- '--vocab-size=' <<<'$out' && grep -qx -- '--vocab-hash=' <<<'$out'"
    out=$(complete_words tupe-testtool progress --mode '')
    check "[$mode] choice values complete" [ "$out" = $'bytes\nitems' ]
    out=$(complete_words tupe-testtool progress --mode=it)
    check "[$mode] --opt=value completes the value" [ "$out" = "items" ]
    mkdir -p "$T/dd" && touch "$T/dd/corpus.txt" "$T/dd/codes"
    out=$(cd "$T/dd" && complete_words tupe-testtool tok-cat co)
    check "[$mode] positional arguments complete as files" bash -c "grep -qx corpus.txt <<<'$out' && grep -qx codes <<<'$out'"
    out=$(cd "$T/dd" && complete_words tupe-testtool tok-write -o cor)
    check "[$mode] option values complete as files" [ "$out" = "corpus.txt" ]
    out=$(complete_words tupe-testtool tok-write -)
    check "[$mode] common options are offered" bash -c "grep -qx -- '--quiet' <<<'$out' && grep -qx -- '--threads=' <<<'$out' && ! grep -q completion-helper <<<'$out'"
done
if command -v zsh >/dev/null 2>&1; then
    check "zsh completion parses" zsh -n "$TUPE_SRC/completions/_tupe"
fi
exit $_failed
