"""Sweep files: every experiments/*.toml is valid; a bad one is a one-line error naming the field."""

from pathlib import Path

import pytest

from flexsched.cli import main
from flexsched.sweep_spec import load_spec

EXPERIMENTS = Path(__file__).resolve().parents[2] / "experiments"
GOOD = """
trials = 4
contenders = ["q", "library"]
[[cases]]
name = "G"
op = "GMM"
args = [8, 8, 8]
"""


@pytest.mark.parametrize("path", sorted(EXPERIMENTS.glob("*.toml")), ids=lambda p: p.name)
def test_every_sweep_file_parses(path):
    spec = load_spec(path)
    assert spec.cases and spec.contenders and spec.trials >= 1


@pytest.mark.parametrize("text, field", [
    (GOOD.replace('"GMM"', '"NOPE"'), "cases[1].op"),
    (GOOD.replace('"library"', '"magic"'), "contenders"),
    (GOOD.replace("trials = 4", "trials = 0"), "trials"),
    (GOOD.replace("trials = 4", ""), "trials"),
    (GOOD.replace("[8, 8, 8]", "[8, 8]"), "cases[1].args"),
    ("bogus = 1\n" + GOOD, "bogus"),
    ('seeds = "x"\n' + GOOD, "seeds"),
    ('targets = ["nowhere"]\n' + GOOD, "targets"),
    (GOOD.replace("[[cases]]", "[[cases]]\nshape = 1"), "cases[1].shape"),
])
def test_bad_spec_is_one_line_naming_the_field(tmp_path, capsys, text, field):
    path = tmp_path / "bad.toml"
    path.write_text(text)
    assert main(["sweep", str(path)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("flexsched: error:") and f"'{field}'" in err
    assert "Traceback" not in err


def test_bad_toml_and_missing_file(tmp_path, capsys):
    path = tmp_path / "bad.toml"
    path.write_text("trials = = 3\n")
    assert main(["sweep", str(path)]) == 2
    assert "not valid TOML" in capsys.readouterr().err
    assert main(["sweep", str(tmp_path / "missing.toml")]) == 2
    assert "no sweep file" in capsys.readouterr().err
