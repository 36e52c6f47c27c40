"""The Python examples in README.md and docs/python.md run as written (a page's blocks in order,
in one namespace)."""
import os
import re

import pytest

ROOT = os.path.join(os.path.dirname(__file__), "..", "..")


@pytest.mark.parametrize("doc,printed", [
    ("docs/python.md", ["rope(head_dim=64", "torch.Size([32])", "attention grads torch.Size([2, 300, 8, 64])", "torch.Size([2, 8, 300, 16]) torch.Size([8, 32]) torch.Size([2, 8, 300])", "positions 10^6: max |grape - transformers|",
                       "grape attention: max |grape - eager| on real tokens",
                       "grape-m grads torch.Size([4, 8]) torch.Size([4, 32])",
                       "generator grads torch.Size([16]) torch.Size([]) torch.Size([16, 16])",
                       "log_distance: passed", "python-bias grads torch.Size([4]) torch.Size([2, 300, 4, 32]) "
                       "torch.Size([2, 300, 2, 32])", "learned_rope: passed",
                       "python-rotation grads torch.Size([16]) torch.Size([2, 300, 4, 32])", "quadratic: m=(1) n=(0)",
                       "quaternion_rope: passed", "loaded-bias grads torch.Size([4]) torch.Size([2, 300, 4, 64])"]),
    ("README.md", ["True"]),
])
def test_the_python_examples_run(doc, printed, capsys, monkeypatch):
    text = open(os.path.join(ROOT, doc), encoding="utf-8").read()
    blocks = re.findall(r"```python\n(.*?)```", text, re.S)
    assert blocks and "grape.rotate_qk" in blocks[0]
    monkeypatch.chdir(ROOT)  # README's example reads a bundled config by a relative path
    namespace = {}
    for i, block in enumerate(blocks):
        exec(compile(block, "%s, python block %d" % (doc, i + 1), "exec"), namespace)
    out = capsys.readouterr().out
    for p in printed:
        assert p in out
    if doc == "docs/python.md":  # the text gives GRAPE-A's omega and gates in float32: so does the example
        assert namespace["omega"].dtype == namespace["torch"].float32
