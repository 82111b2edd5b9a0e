"""A CPU run records the instruction set its arithmetic ran with, and a process pinned to a lower one reports
(and computes with) that one: what lets tests/e2e/test_readme_numbers.py retrain AVX2 values on an AVX-512 host."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from semcl.engine.provenance import ISA_LEVELS, cpu_isa, pin_isa_env

_REPORT = "from semcl.engine.provenance import cpu_isa; import torch; " \
          "print(cpu_isa(), torch.backends.cpu.get_cpu_capability())"


def _in_new_process(env: dict) -> list[str]:
    out = subprocess.run([sys.executable, "-c", _REPORT], env={**os.environ, **env}, capture_output=True,
                         text=True, check=True).stdout
    return out.split()


@pytest.mark.parametrize("isa", ISA_LEVELS)
def test_a_process_pinned_to_an_instruction_set_computes_with_it(isa):
    if ISA_LEVELS.index(isa) > ISA_LEVELS.index(cpu_isa()):
        pytest.skip(f"this CPU has {cpu_isa()}")
    assert _in_new_process(pin_isa_env(isa)) == [isa, isa]


def test_a_onednn_cap_alone_lowers_the_recorded_set():
    if cpu_isa() != "AVX512":
        pytest.skip("needs an AVX-512 host")
    assert _in_new_process({"ONEDNN_MAX_CPU_ISA": "AVX2"}) == ["AVX2", "AVX512"]


def test_pinned_kernels_change_the_last_digits_of_a_convolution():
    """Why the pin matters: one convolution's output differs between the two kernel sets (seen on AVX-512)."""
    if cpu_isa() != "AVX512":
        pytest.skip("needs an AVX-512 host")
    code = ("import torch; torch.manual_seed(0); x = torch.randn(8, 16, 28, 28); w = torch.randn(32, 16, 3, 3); "
            "print(torch.nn.functional.conv2d(x, w).sum(dtype=torch.float64).item())")
    runs = [subprocess.run([sys.executable, "-c", code], env={**os.environ, **env}, capture_output=True, text=True,
                           check=True).stdout for env in ({}, pin_isa_env("AVX2"), pin_isa_env("AVX2"))]
    assert runs[1] == runs[2] and runs[0] != runs[1]


def test_the_demo_computes_under_the_portable_pins():
    """`make demo` (whose runs the README's values come from) exports exactly pin_isa_env("AVX2")."""
    from pathlib import Path

    make = (Path(__file__).resolve().parents[2] / "Makefile").read_text()
    line = next(x for x in make.splitlines() if x.startswith("PORTABLE :="))
    assert dict(kv.split("=", 1) for kv in line.split(":=", 1)[1].split()) == pin_isa_env("AVX2")
    assert make.count("env $(PORTABLE) $(BIN)/semcl run") == 2  # demo and demo-full


def test_mkls_portable_mode_makes_a_matmul_independent_of_the_kernels_mkl_would_pick():
    """Why MKL is pinned: left to itself it picks kernels by CPU vendor and instructions (here imitated by capping
    its instructions, which moves a matmul's last digits on an Intel host); in its portable mode they do not move."""
    if cpu_isa() != "AVX512":
        pytest.skip("needs an AVX-512 host")
    code = ("import torch; torch.manual_seed(0); x = torch.randn(300, 333); y = torch.randn(333, 517); "
            "print((x @ y).sum(dtype=torch.float64).item())")
    base = {k: v for k, v in os.environ.items() if k != "MKL_CBWR"} | pin_isa_env("AVX2")
    free = {k: v for k, v in base.items() if k != "MKL_CBWR"}

    def matmul(env: dict) -> str:
        return subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                              check=True).stdout

    capped = {"MKL_ENABLE_INSTRUCTIONS": "AVX2"}
    assert matmul(base) == matmul(base | capped)
    if "GenuineIntel" in Path("/proc/cpuinfo").read_text():  # MKL's AVX-512 kernels are Intel's: an AMD host
        assert matmul(free) != matmul(free | capped)     # takes its AVX2 ones, capped or not (same digits)
