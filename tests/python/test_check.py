"""grape.list and grape.check: the registry and the law checker through the package's CLI."""
import pytest

import grape


def test_list_names_every_builtin_with_its_claims():
    infos = {e.name: e for e in grape.list()}
    assert len(infos) == 19
    assert "relative" in infos["rope"].claims
    assert "relative" not in infos["sinusoidal"].claims  # an absolute encoding claims no relative law
    assert infos["alibi"].injection and infos["rope"].group == "translation<1>"


def test_check_reports_every_claimed_law_holding_for_rope():
    report = grape.check("rope", trials=20, seed=3)
    assert report.passed
    assert report.encoding == "rope" and report.trials == 20 and report.seed == 3
    claimed = [law.name for law in report.laws if law.claimed]
    assert "relative" in claimed and "norm_preservation" in claimed
    assert all(law.holds for law in report.laws if law.claimed)
    assert "relative" in str(report)


def test_an_absolute_encoding_gets_a_counterexample_for_the_relative_law():
    report = grape.check("learned_absolute", trials=30, seed=1)
    assert report.passed  # it claims no relative law
    failing = [law for law in report.laws if not law.holds]
    assert failing, "the checker must show that a learned table is not relative"
    example = failing[0].counterexample
    assert example is not None and example.error > example.tolerance


def test_same_seed_same_report():
    a = grape.check("alibi", trials=10, seed=7)
    b = grape.check("alibi", trials=10, seed=7)
    assert a == b


def test_unknown_name_is_a_one_line_error():
    with pytest.raises(grape.GrapeError, match="unknown name 'nope'"):
        grape.check("nope")
    assert issubclass(grape.GrapeError, ValueError)


def test_inspect_reports_a_configs_table_and_its_laws():
    import os
    path = os.path.join(os.path.dirname(__file__), "..", "..", "examples", "configs", "llama-3.1-8b", "config.json")
    info = grape.inspect(path, trials=10)
    assert info["kind"] == "rotary" and info["schedule"]["type"] == "llama3"
    assert info["inv_freq"] == list(grape.from_config(path).inv_freq)  # the same table, to the bit
    assert isinstance(info["laws"], grape.CheckReport) and info["laws"].passed
    bloom = grape.inspect({"model_type": "bloom", "n_head": 4, "hidden_size": 256})
    assert bloom["kind"] == "alibi" and bloom["laws"] is None
    with pytest.raises(grape.GrapeError, match="nope.json: cannot open the file"):
        grape.inspect("/nonexistent/nope.json")


def test_check_reports_the_gradient_laws_and_the_edge_case_draws():
    report = grape.check("alibi", trials=20, seed=2)
    assert report.passed
    assert report.law("bias_gradient").claimed and report.law("bias_gradient").holds
    assert report.law("attention_gradient").holds and report.law("attention_gradient").run
    assert "m = n" in report.position_draws
    rope = grape.check("rope", trials=10, seed=2)
    assert rope.law("frequency_gradient").holds and rope.law("attention_gradient").holds
