# bash completion for gpuslice: subcommands, their options, tenant IDs and
# names for `set`, and the program and its files for `run`/`exec`.
# Installed as share/bash-completion/completions/gpuslice; source it by hand
# to try it: `. completions/gpuslice.bash`.

_gpuslice_commands="run exec tenants set info reserve procs green-run mps top"

# Options per command (tests/integration/docs.sh checks them against --help);
# those that take a value are listed again in _gpuslice_valued.
_gpuslice_opts_run="-m --memory -c --compute -d --device -f --filled -n --nice --name --no-torch-priority --gpu-share --mps-priority --sms --sm-share --tenant --priority --weight -q --quiet -h --help"
_gpuslice_opts_exec=$_gpuslice_opts_run
_gpuslice_opts_tenants="--json --interval -q --quiet -h --help"
_gpuslice_opts_set="-c --compute -m --memory --priority --weight -q --quiet --json -h --help"
_gpuslice_opts_info="-d --device --json -q --quiet -h --help"
_gpuslice_opts_reserve="-d --device --json -q --quiet -h --help"
_gpuslice_opts_mps="-d --device --force --json -q --quiet -h --help"
_gpuslice_opts_procs="--shares --memory -d --device --dry-run --json --timeout -q --quiet -h --help"
_gpuslice_opts_green_run="--shares --task --task-kwargs -d --device --json -h --help"
_gpuslice_opts_top="-i --interval --once --json -q --quiet -h --help"
_gpuslice_mps_subcommands="start status stop"
_gpuslice_opts_global="-q --quiet -V --version -h --help"
_gpuslice_valued=" -m --memory -c --compute -d --device -f --filled -n --nice --name --tenant -i --interval --gpu-share --mps-priority --sms --sm-share --shares --timeout --priority --weight --task --task-kwargs "

# The commands the installed binary knows, from its --help (else the list above).
_gpuslice_list_commands()
{
    local out
    out=$("$1" --help 2>/dev/null | sed -n '/^commands:/,/^$/s/^  \([a-z][a-z-]*\) .*/\1/p')
    printf '%s\n' "${out:-$_gpuslice_commands}" help
}

# IDs and names of the tenants, from `tenants --json` without jq.
_gpuslice_list_tenants()
{
    "$1" tenants --json --interval 0 2>/dev/null |
        grep -o '"\(id\|name\)":"[^"]*"' | sed 's/^"[a-z]*":"\(.*\)"$/\1/' | sort -u
}

# CUDA indexes and UUIDs of the GPUs, when nvidia-smi is there.
_gpuslice_list_devices()
{
    command -v nvidia-smi >/dev/null 2>&1 || return 0
    nvidia-smi --query-gpu=index,uuid --format=csv,noheader 2>/dev/null | tr -d ' ' | tr ',' '\n'
}

_gpuslice()
{
    local cur prev words cword
    words=("${COMP_WORDS[@]}")
    cword=$COMP_CWORD
    cur=${words[cword]}
    prev=
    ((cword > 0)) && prev=${words[cword - 1]}
    # "--opt=value": bash splits at '=' (COMP_WORDBREAKS).
    if [[ $cur == = ]]; then
        cur=
    elif [[ $prev == = ]] && ((cword > 1)); then
        prev=${words[cword - 2]}
    fi
    COMPREPLY=()

    local gs=${words[0]} i cmd= cmdi=0
    [[ $gs == */* || -z $gs ]] || gs=$(type -P "$gs" 2>/dev/null || echo gpuslice)
    [[ -n $gs ]] || gs=gpuslice

    # The subcommand: the first word after the global options.
    for ((i = 1; i < cword; i++)); do
        if [[ ${words[i]} != -* ]]; then
            cmd=${words[i]}
            cmdi=$i
            break
        fi
    done
    if [[ -z $cmd ]]; then
        if [[ $cur == -* ]]; then
            COMPREPLY=($(compgen -W "$_gpuslice_opts_global" -- "$cur"))
        else
            COMPREPLY=($(compgen -W "$(_gpuslice_list_commands "$gs")" -- "$cur"))
        fi
        return 0
    fi

    # A value for the option before the cursor.
    if [[ $_gpuslice_valued == *" $prev "* ]]; then
        case $prev in
        -d | --device)
            COMPREPLY=($(compgen -W "$(_gpuslice_list_devices)" -- "$cur")) ;;
        -n | --nice)
            COMPREPLY=($(compgen -W "$(seq -20 19)" -- "$cur")) ;;
        --interval)
            COMPREPLY=($(compgen -W "0 0.2 0.5 1 2" -- "$cur")) ;;
        --priority)
            COMPREPLY=($(compgen -W "latency normal background" -- "$cur")) ;;
        --mps-priority)
            COMPREPLY=($(compgen -W "normal below-normal" -- "$cur")) ;;
        -c | --compute | -m | --memory)
            [[ $cmd == set ]] && COMPREPLY=($(compgen -W "none" -- "$cur")) ;;
        esac
        return 0
    fi

    case $cmd in
    run | exec)
        # The program: the first word after the options (or after --); files after it.
        local prog=0
        for ((i = cmdi + 1; i < cword; i++)); do
            local w=${words[i]}
            if [[ $w == -- ]]; then
                prog=$((i + 1))
                break
            elif [[ $w == = ]]; then
                ((i++))
            elif [[ $_gpuslice_valued == *" $w "* ]]; then
                [[ ${words[i + 1]} == = ]] && ((i++))
                ((i++))
            elif [[ $w != -* ]]; then
                prog=$i
                break
            fi
        done
        if ((prog == 0)) && [[ $cur == -* ]]; then
            COMPREPLY=($(compgen -W "$_gpuslice_opts_run" -- "$cur"))
        elif ((prog == 0 || prog == cword)); then
            if [[ $cur == */* ]]; then
                compopt -o filenames 2>/dev/null
                COMPREPLY=($(compgen -f -- "$cur"))
            else
                COMPREPLY=($(compgen -c -- "$cur"))
                # run starts a .py file with Python.
                [[ $cmd == run ]] && COMPREPLY+=($(compgen -f -X '!*.py' -- "$cur"))
            fi
        else
            compopt -o default 2>/dev/null
            COMPREPLY=()
        fi
        ;;
    set)
        if [[ $cur == -* ]]; then
            COMPREPLY=($(compgen -W "$_gpuslice_opts_set" -- "$cur"))
        else
            local have=0
            for ((i = cmdi + 1; i < cword; i++)); do
                [[ ${words[i]} == -* || ${words[i]} == = ]] && continue
                [[ $_gpuslice_valued == *" ${words[i - 1]} "* || ${words[i - 1]} == = ]] && continue
                have=1
            done
            ((have)) || COMPREPLY=($(compgen -W "$(_gpuslice_list_tenants "$gs")" -- "$cur"))
        fi
        ;;
    tenants)
        COMPREPLY=($(compgen -W "$_gpuslice_opts_tenants" -- "$cur")) ;;
    info)
        COMPREPLY=($(compgen -W "$_gpuslice_opts_info" -- "$cur")) ;;
    top)
        COMPREPLY=($(compgen -W "$_gpuslice_opts_top" -- "$cur")) ;;
    reserve)
        [[ $cur == -* ]] && COMPREPLY=($(compgen -W "$_gpuslice_opts_reserve" -- "$cur")) ;;
    procs)
        # Options, then programs separated by :::.
        if [[ $cur == -* ]]; then
            COMPREPLY=($(compgen -W "$_gpuslice_opts_procs" -- "$cur"))
        else
            COMPREPLY=($(compgen -c -- "$cur") ":::")
        fi
        ;;
    green-run)
        [[ $cur == -* ]] && COMPREPLY=($(compgen -W "$_gpuslice_opts_green_run" -- "$cur")) ;;
    mps)
        # The subcommand first (start, status, stop), options before or after it.
        local sub=
        for ((i = cmdi + 1; i < cword; i++)); do
            [[ ${words[i]} == -* || ${words[i]} == = ]] && continue
            [[ $_gpuslice_valued == *" ${words[i - 1]} "* || ${words[i - 1]} == = ]] && continue
            sub=${words[i]}
        done
        if [[ $cur == -* ]]; then
            COMPREPLY=($(compgen -W "$_gpuslice_opts_mps" -- "$cur"))
        elif [[ -z $sub ]]; then
            COMPREPLY=($(compgen -W "$_gpuslice_mps_subcommands" -- "$cur"))
        fi
        ;;
    help)
        ((cword == cmdi + 1)) && COMPREPLY=($(compgen -W "$(_gpuslice_list_commands "$gs")" -- "$cur")) ;;
    esac
    return 0
}

complete -F _gpuslice gpuslice
