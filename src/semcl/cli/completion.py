"""`semcl completion bash`: a bash completion script written from the CLI's own parser.

Commands, their options and the choices of each option come from `semcl.cli.main.build_parser`, so the script
never lists an option the CLI lacks; table ids are asked of `semcl list` when completed (the registry
may change), papers and cluster profiles are listed when the script is written. Install with
`source <(semcl completion bash)` (or save it under ~/.local/share/bash-completion/completions/semcl).
"""

from __future__ import annotations

import argparse
import shlex

# positional arguments the script completes, by their dest in the parser
_TABLES, _PAPERS = "table", "paper"
# options whose value is a folder or a file
_DIRS = {"--results", "--data-root", "--out"}
_FILES = {"--readme"}


def _subcommands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return dict(sub.choices)


def _words(items) -> str:
    return shlex.quote(" ".join(items))


def _value_cases(parser: argparse.ArgumentParser, extra: dict[str, list[str]], indent: str) -> list[str]:
    """`case "$prev"` arms: an option's choices, folders / files, or nothing for free values."""
    arms = []
    for action in parser._actions:
        if not action.option_strings or action.nargs == 0:
            continue
        opts = "|".join(action.option_strings)
        first = action.option_strings[-1]
        if action.choices:
            arms.append(f'{opts}) COMPREPLY=($(compgen -W {_words(map(str, action.choices))} -- "$cur")); return;;')
        elif first in extra:
            arms.append(f'{opts}) COMPREPLY=($(compgen -W {_words(extra[first])} -- "$cur")); return;;')
        elif first in _DIRS:
            arms.append(f'{opts}) COMPREPLY=($(compgen -d -- "$cur")); return;;')
        elif first in _FILES:
            arms.append(f'{opts}) COMPREPLY=($(compgen -f -- "$cur")); return;;')
        else:
            arms.append(f"{opts}) return;;")  # a free value (a number, a row label)
    return [indent + a for a in arms]


def bash_script(parser: argparse.ArgumentParser, papers: list[str], clusters: list[str]) -> str:
    commands = _subcommands(parser)
    extra = {"--cluster": clusters}
    top = [o for a in parser._actions for o in a.option_strings]
    lines = [
        "# bash completion for semcl, written by `semcl completion bash`",
        "_semcl_tables() {",
        "    \"$1\" list 2>/dev/null | awk 'NR > 1 && index($1, \"/\") { print $1 }'",
        "}",
        "_semcl() {",
        '    local cur="${COMP_WORDS[COMP_CWORD]}" prev="${COMP_WORDS[COMP_CWORD-1]}" cmd="" opts="" what="" words="" i',
        "    for ((i = 1; i < COMP_CWORD; i++)); do  # the command: the first word that is no global option",
        '        case "${COMP_WORDS[i]}" in',
        "            --results) ((i++));;",
        "            -*) ;;",
        '            *) cmd="${COMP_WORDS[i]}"; break;;',
        "        esac",
        "    done",
        '    if [[ -z "$cmd" ]]; then',
        '        case "$prev" in',
        *_value_cases(parser, extra, "            "),
        "        esac",
        f'        COMPREPLY=($(compgen -W {_words([*commands, *top])} -- "$cur")); return',
        "    fi",
        '    case "$cmd" in',
    ]
    for name, sp in commands.items():
        options = [o for a in sp._actions for o in a.option_strings]
        positional = [a for a in sp._actions if not a.option_strings]
        dests = {a.dest for a in positional}
        choices = [str(c) for a in positional for c in (a.choices or ())]
        what = "tables" if _TABLES in dests else "papers" if _PAPERS in dests else "choices" if choices else ""
        lines += [f"        {name})",
                  '            case "$prev" in',
                  *_value_cases(sp, extra, "                "),
                  "            esac",
                  f"            opts={_words(options)}; what={what}; words={_words(choices)};;"]
    lines += [
        "    esac",
        '    if [[ "$cur" == -* ]]; then COMPREPLY=($(compgen -W "$opts" -- "$cur")); return; fi',
        '    case "$what" in',
        '        tables) COMPREPLY=($(compgen -W "$(_semcl_tables "${COMP_WORDS[0]}")" -- "$cur"));;',
        f'        papers) COMPREPLY=($(compgen -W {_words(papers)} -- "$cur"));;',
        '        choices) COMPREPLY=($(compgen -W "$words" -- "$cur"));;',
        "    esac",
        "}",
        "complete -F _semcl semcl",
    ]
    return "\n".join(lines) + "\n"
