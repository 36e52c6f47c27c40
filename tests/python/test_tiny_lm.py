"""examples/python/tiny_lm.py --smoke: every encoding trains a few steps on both tasks through
grape's torch ops; the loss goes down on text and nothing is NaN (the full comparison is
docs/experiments.md)."""
import math
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "examples", "python"))

import tiny_lm  # noqa: E402


def test_smoke_run_trains_every_encoding(tmp_path):
    table, picture = tmp_path / "tables.md", tmp_path / "plot.png"
    results = tiny_lm.main(["--smoke", "--out", str(table), "--plot", str(picture)])
    assert set(results) == {"induction", "text"}
    for task, by_encoding in results.items():
        assert list(by_encoding) == tiny_lm.ENCODINGS
        for enc, r in by_encoding.items():
            losses = r["losses"]
            assert all(math.isfinite(x) for x in losses), (task, enc)
            for n in tiny_lm.EVAL_LENGTHS:
                loss, accuracy = r[n]
                assert math.isfinite(loss) and 0.0 <= accuracy <= 1.0, (task, enc, n)
            if task == "text":  # characters: the unigram alone takes the loss down within a few steps
                assert sum(losses[-2:]) < sum(losses[:2]), (enc, losses)
    text = table.read_text()
    assert "| grape_a |" in text and "wall time" in text
    assert picture.stat().st_size > 10_000
