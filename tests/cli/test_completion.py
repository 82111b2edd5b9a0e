"""`semcl completion bash`: the script, sourced in a real bash, completes commands, options, their
choices, table ids (asked of `semcl list`) and papers."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

SEMCL = str(Path(sys.executable).parent / "semcl")


@pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")
def test_the_bash_script_completes_from_the_parser_and_the_registry(tmp_path):
    script = subprocess.run([SEMCL, "completion", "bash"], capture_output=True, text=True, check=True).stdout
    (tmp_path / "semcl.bash").write_text(script)
    cases = {  # the words typed so far (the last one is being completed) -> the completions
        "ru": "run", "--results /tmp ch": "check", "run --prof": "--profile", "run --profile m": "mini",
        "plan --executor s": "slurm", "table rince/tab1": "rince/tab1 rince/tab10 rince/tab11",
        "claims g": "gpaco", "check --cluster ex": "example-a100", "table x --format ''": "md tex csv json",
        "run --row ''": "", "completion ''": "bash",
    }
    probe = "\n".join(
        f"COMP_WORDS=({SEMCL} {words}); COMP_CWORD=$((${{#COMP_WORDS[@]}} - 1)); COMPREPLY=(); _semcl; "
        f'echo "${{COMPREPLY[*]}}"' for words in cases)
    out = subprocess.run(["bash", "-c", f"source {tmp_path / 'semcl.bash'}\n{probe}"], capture_output=True, text=True,
                         check=True).stdout.split("\n")[:-1]
    assert out == list(cases.values())
