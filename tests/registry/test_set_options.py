"""`--set` texts read as settings: the top-level commas of a value split a sweep (none inside brackets, braces
or quotes), the same key repeated adds values, two swept keys make their grid, and a single variant's folder
name is what it was before sweeps existed."""

from __future__ import annotations

import hashlib
import json

import pytest

from semcl.errors import ConfigError
from semcl.registry.set_options import MAX_VARIANTS, parse_grid, parse_sets, slug, split_values, sweep_text


@pytest.mark.parametrize("raw, pieces", [
    ("0.1", ["0.1"]),
    ("0.1,0.2, 0.3", ["0.1", "0.2", "0.3"]),
    ("[1,2]", ["[1,2]"]),
    ("[1,2],[3, 4]", ["[1,2]", "[3, 4]"]),
    ('"a,b"', ['"a,b"']),
    ("'a,b',c", ["'a,b'", "c"]),
    ("{a: 1, b: 2}", ["{a: 1, b: 2}"]),
    ("[[1,2],[3]],5", ["[[1,2],[3]]", "5"]),
])
def test_only_top_level_commas_split(raw, pieces):
    assert split_values(raw) == pieces


def test_a_sweep_and_its_grid():
    grid = parse_grid(["schedule.epochs=2,3", "optim.lr=0.1", "optim.lr=0.2"])
    # keys sorted, each key's values in the order given, the last key varying fastest
    assert grid == [{"optim.lr": 0.1, "schedule.epochs": 2}, {"optim.lr": 0.1, "schedule.epochs": 3},
                    {"optim.lr": 0.2, "schedule.epochs": 2}, {"optim.lr": 0.2, "schedule.epochs": 3}]
    assert parse_grid(["probe.milestones=[1,2]"]) == [{"probe.milestones": [1, 2]}]
    assert parse_grid(["probe.milestones=[1,2],[2,3]"]) == [{"probe.milestones": [1, 2]}, {"probe.milestones": [2, 3]}]
    assert parse_grid(['data.augment="crop,flip"']) == [{"data.augment": "crop,flip"}]
    assert parse_grid(["optim.lr=1e-3,2e-3"]) == [{"optim.lr": 0.001}, {"optim.lr": 0.002}]
    assert sweep_text(["schedule.epochs=2,3", "optim.lr=0.1"]) == "optim.lr=0.1, schedule.epochs=2,3"


@pytest.mark.parametrize("texts, message", [
    (["optim.lr=0.1", "optim.lr=0.1"], "--set 'optim.lr=0.1': key 'optim.lr' is given the value 0.1 twice"),
    (["optim.lr=0.1,0.2,0.1"], "--set 'optim.lr=0.1,0.2,0.1': key 'optim.lr' is given the value 0.1 twice"),
    (["optim.lr=0.1,,0.2"], "--set 'optim.lr=0.1,,0.2': key 'optim.lr' has an empty value in its list of values"),
    (["optim.lr=0.1,"], "--set 'optim.lr=0.1,': key 'optim.lr' has an empty value in its list of values"),
    (["optim.lrr=0.1,0.2"], "--set 'optim.lrr=0.1,0.2': unknown key 'optim.lrr' (known in optim: "),
    (["probe.milestones=[1,2"], "--set 'probe.milestones=[1,2': the value is not YAML ("),
    (["optim.lr=0.1,{a: 1}"], "--set 'optim.lr=0.1,{a: 1}': the value must be a scalar or a list, not a mapping"),
])
def test_bad_sweeps_are_one_line_naming_the_key(texts, message):
    with pytest.raises(ConfigError) as err:
        parse_grid(texts)
    assert str(err.value).startswith(message) and "\n" not in str(err.value)


def test_a_single_variant_keeps_its_folder_name_and_a_sweep_gets_its_own():
    sets = {"optim.lr": 0.1, "schedule.epochs": 2}
    # the name `slug` gave before sweeps (commas become _): check and table --set folders stay where they were
    before = "optim.lr=0.1_schedule.epochs=2-" + hashlib.sha256(json.dumps(sets, sort_keys=True).encode()).hexdigest()[:8]
    assert slug(["schedule.epochs=2", "optim.lr=0.1"]) == before
    grid = [{"optim.lr": 0.1}, {"optim.lr": 0.2}]
    assert slug(["optim.lr=0.1,0.2"]) == "optim.lr=0.1_0.2-" + hashlib.sha256(
        json.dumps(grid, sort_keys=True).encode()).hexdigest()[:8]
    assert parse_sets(["optim.lr=0.1"]) == {"optim.lr": 0.1}
    with pytest.raises(ConfigError, match="^--set: key 'optim.lr' is given 2 values; one is expected here$"):
        parse_sets(["optim.lr=0.1,0.2"])


def test_a_grid_past_the_cap_is_refused_before_it_is_built():
    forty = ",".join(str(i) for i in range(1, 41))
    with pytest.raises(ConfigError) as err:
        parse_grid([f"schedule.epochs={forty}", f"optim.lr={forty}"])
    assert str(err.value) == ("--set: 40 (optim.lr) x 40 (schedule.epochs) values make 1600 variants, more than "
                              f"{MAX_VARIANTS} (the most one command takes; split the sweep)")
    assert MAX_VARIANTS == 1000
    grid = parse_grid(["schedule.epochs=" + ",".join(str(i) for i in range(1, 11)),
                       "optim.lr=" + ",".join(str(i) for i in range(1, 101))])
    assert len(grid) == MAX_VARIANTS  # the cap itself is allowed


@pytest.mark.parametrize("raw, kind", [
    ("!!binary aGk=", "bytes"), ("!!set {a, b}", "set"), ("!!omap [a: 1]", "tuple"), ("[1, !!binary aGk=]", "bytes"),
])
def test_a_value_that_is_not_json_data_is_one_line_naming_the_key(raw, kind):
    with pytest.raises(ConfigError) as err:
        parse_grid([f"model.pretrained={raw}"])
    assert str(err.value) == (f"--set 'model.pretrained={raw}': key 'model.pretrained' has a value of YAML type "
                              f"{kind}; only numbers, strings, true/false, null and [lists] of them")


@pytest.mark.parametrize("raw, code", [
    ('"a\\nb"', "000A"), ('"a\\tb"', "0009"), ('"a\\rb"', "000D"), ('"a\\u200bb"', "200B"), ('"a\\u2028b"', "2028"),
    ('["ok", "a\\nb"]', "000A"),
])
def test_a_control_character_in_a_string_value_is_refused(raw, code):
    # refused, not escaped: the folder name and run id of every variant that can be typed stay as they were
    with pytest.raises(ConfigError) as err:
        parse_grid([f"model.pretrained={raw}"])
    assert str(err.value) == (f"--set {'model.pretrained=' + raw!r}: key 'model.pretrained' holds the control "
                              f"character U+{code}; one line of text only")
