#!/usr/bin/env bash
# The bash completion script, driven the way bash drives it (COMP_WORDS/COMP_CWORD), against
# a program built on lib/cli/cli.c; with the bash-completion package when it is installed.
. "$(dirname "$0")/lib.sh"
cp "$TESTTOOL" "$T/tupe-testtool"
export PATH="$T:$PATH"

complete_words() { # complete_words WORD... ; the last word is the one being completed
    MODE=$mode bash -c '
        [ "$MODE" = full ] && [ -r /usr/share/bash-completion/bash_completion ] && . /usr/share/bash-completion/bash_completion
        . "$1"; shift
        complete -F _tupe_complete tupe-testtool tupe-pretrain
        COMP_WORDS=("$@"); COMP_CWORD=$(( $# - 1 ))
        COMP_LINE="$*"; COMP_POINT=${#COMP_LINE}
        _tupe_complete
        printf "%s\n" "${COMPREPLY[@]}"' _ "$TUPE_SRC/completions/tupe.bash" "$@" 2>&1
}

for mode in full plain; do
    out=$(complete_words tupe-testtool tok)
    [ "$out" = $'tok-write\ntok-cat' ]
    verdict "[$mode] subcommands complete"
    out=$(complete_words tupe-testtool tok-write --vo)
    bash -c "grep -qx -- '--vocab-size=' <<<'$out' && grep -qx -- '--vocab-hash=' <<<'$out'"
    verdict "[$mode] long options complete with '='"
    out=$(complete_words tupe-testtool progress --mode '')
    [ "$out" = $'bytes\nitems' ]
    verdict "[$mode] choice values complete"
    out=$(complete_words tupe-testtool progress --mode=it)
    [ "$out" = "items" ]
    verdict "[$mode] --opt=value completes the value"
    mkdir -p "$T/dd" && touch "$T/dd/corpus.txt" "$T/dd/codes"
    out=$(cd "$T/dd" && complete_words tupe-testtool tok-cat co)
    bash -c "grep -qx corpus.txt <<<'$out' && grep -qx codes <<<'$out'"
    verdict "[$mode] positional arguments complete as files"
    out=$(cd "$T/dd" && complete_words tupe-testtool tok-write -o cor)
    [ "$out" = "corpus.txt" ]
    verdict "[$mode] option values complete as files"
    out=$(complete_words tupe-testtool tok-write -)
    bash -c "grep -qx -- '--quiet' <<<'$out' && grep -qx -- '--threads=' <<<'$out' && ! grep -q completion-helper <<<'$out'"
    verdict "[$mode] common options are offered"
    out=$(complete_words tupe-pretrain train --zero '')
    [ "$out" = $'0\n1' ] && complete_words tupe-pretrain train --buck | grep -qx -- '--bucket-mb='
    verdict "[$mode] tupe-pretrain's data-parallel options (--zero 0|1, --bucket-mb=)"
done
if command -v zsh >/dev/null 2>&1; then
    zsh -n "$TUPE_SRC/completions/_tupe"
    verdict "zsh completion parses"
    # zsh_complete LINE: what an interactive zsh shows after LINE and a TAB, then the line as zle
    # holds it (BUF<...>, printed by a widget bound to ^T). The line is then
    # cleared and a marker echoed, so that reading up to the marker sees all of the output.
    cat >$T/complete.zsh <<'Z'
zmodload zsh/zpty
zpty z zsh -f -i
zpty -w z "PS1='RDY> '; fpath=($1 \$fpath); autoload -U compinit; compinit -u -D; compdef _tupe tupe-testtool; zstyle ':completion:*' menu no; LISTMAX=1000; showbuf() { print -rn -- \"BUF<\$BUFFER>\" }; zle -N showbuf; bindkey '^T' showbuf; echo GO\$((6*6))"
zpty -r -m z out '*GO36*' || print "no marker"
# Type only once the line editor has the terminal (its prompt is out): keys that come earlier
# meet the tty's line discipline, where ^U erases them.
zpty -r -m z out '*RDY> *' || print "no prompt"
zpty -w -n z "$2"$'\t\C-t'
zpty -w z $'\C-u'"echo END\$((6*7))"
zpty -r -m z out '*END42*' || print "no marker"
zpty -d z
print -r -- "$out"
Z
    zsh_complete() { (cd "$T/dd" && timeout 30 zsh -f $T/complete.zsh "$TUPE_SRC/completions" "$1" 2>&1 | tr -d '\r'); }
    out=$(zsh_complete 'tupe-testtool progress --mode ')
    grep -q "bytes  *items" <<<"$out" && ! grep -q 'unmatched\|not found' <<<"$out" || \
        { printf '#   %s\n' "$out"; false; }
    verdict "[zsh] choice values complete"
    # The line after the TAB, as zle holds it (^T prints it): not the terminal's redraw of it.
    out=$(zsh_complete 'tupe-testtool tok-write -o cor')
    grep -qF 'BUF<tupe-testtool tok-write -o corpus.txt' <<<"$out" && ! grep -q 'unmatched\|not found' <<<"$out" || { printf '#   %s\n' "$out"; false; }
    verdict "[zsh] option values complete as files"
fi
exit $_failed
