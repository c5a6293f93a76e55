# bash completion for the tupe programs.                                   -*- shell-script -*-
#
# Everything comes from the programs themselves: `PROG --completion-helper` lists the
# subcommands ("cmd<TAB>name<TAB>summary") and `PROG [SUB] --completion-helper` the options
# ("opt<TAB>--long<TAB>-s<TAB>arg|optarg|noarg<TAB>hint<TAB>help") and what the positional
# arguments are ("args<TAB>hint"). A hint is "file", "dir", "list:WORD WORD ...", or empty.
# The option tables in cmd/ are the single source: completion cannot drift from --help.
#
# Installed as share/bash-completion/completions/tupe with one symlink per program.

_tupe_complete_hint()
{
    local hint=$1 cur=$2
    case $hint in
    file)
        if declare -F _filedir >/dev/null; then _filedir; else
            local IFS=$'\n'; COMPREPLY=($(compgen -f -- "$cur")); compopt -o filenames 2>/dev/null; fi ;;
    dir)
        if declare -F _filedir >/dev/null; then _filedir -d; else
            local IFS=$'\n'; COMPREPLY=($(compgen -d -- "$cur")); compopt -o filenames 2>/dev/null; fi ;;
    list:*)
        COMPREPLY=($(compgen -W "${hint#list:}" -- "$cur")) ;;
    *)
        COMPREPLY=() ;;
    esac
}

_tupe_complete()
{
    local cur prev words cword split=false
    if declare -F _init_completion >/dev/null; then
        _init_completion -s || return
    else
        words=("${COMP_WORDS[@]}") cword=$COMP_CWORD
        cur=${COMP_WORDS[COMP_CWORD]} prev=${COMP_WORDS[COMP_CWORD-1]}
        if [[ $cur == --*=* ]]; then prev=${cur%%=*} cur=${cur#*=} split=true
        elif [[ $cur == = && $prev == --* ]]; then cur="" split=true
        elif [[ $prev == = && $cword -ge 2 ]]; then prev=${COMP_WORDS[COMP_CWORD-2]} split=true; fi
    fi
    local prog=${words[0]} top sub="" i w
    top=$("$prog" --completion-helper 2>/dev/null) || return
    local cmds default
    cmds=$(awk -F'\t' '$1 == "cmd" { print $2 }' <<<"$top")
    default=$(awk -F'\t' '$1 == "default" { print $2 }' <<<"$top")
    if [[ -n $cmds ]]; then
        for ((i = 1; i < cword; i++)); do
            w=${words[i]}
            if grep -qxF -- "$w" <<<"$cmds"; then sub=$w; break; fi
            [[ $w == -* ]] || break
        done
        if [[ -z $sub && $cword -eq 1 && $cur != -* ]]; then
            COMPREPLY=($(compgen -W "$cmds" -- "$cur"))
            [[ -n $default ]] && { local saved=("${COMPREPLY[@]}"); _tupe_complete_hint file "$cur"; COMPREPLY+=("${saved[@]}"); }
            return
        fi
        [[ -z $sub ]] && sub=$default
    fi
    local data
    data=$("$prog" $sub --completion-helper 2>/dev/null) || return
    # The value of an option: "--opt VALUE", "-o VALUE" or "--opt=VALUE".
    if [[ $prev == -* ]]; then
        local line
        line=$(awk -F'\t' -v p="$prev" '$1 == "opt" && ($2 == p || $3 == p) && $4 != "noarg" { print; exit }' <<<"$data")
        if [[ -n $line ]]; then
            if [[ $split == true || $(cut -f4 <<<"$line") == arg ]]; then
                _tupe_complete_hint "$(cut -f5 <<<"$line")" "$cur"
                return
            fi
        fi
    fi
    if [[ $cur == -* ]]; then
        local opts
        opts=$(awk -F'\t' '$1 == "opt" { if ($4 == "noarg") print $2; else print $2 "=" }' <<<"$data")
        COMPREPLY=($(compgen -W "$opts" -- "$cur"))
        [[ ${COMPREPLY[*]} == *= ]] && compopt -o nospace 2>/dev/null
        return
    fi
    _tupe_complete_hint "$(awk -F'\t' '$1 == "args" { print $2 }' <<<"$data")" "$cur"
}

complete -F _tupe_complete tupe-tokenize tupe-shard tupe-pretrain tupe-glue tupe-convert tupe-attnviz
