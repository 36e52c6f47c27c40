"""The Python examples in README.md and docs/python.md run as written."""
import os
import re

import pytest

ROOT = os.path.join(os.path.dirname(__file__), "..", "..")


@pytest.mark.parametrize("doc,printed", [("docs/python.md", "rope(head_dim=64"), ("README.md", "True")])
def test_the_python_example_runs(doc, printed, capsys, monkeypatch):
    text = open(os.path.join(ROOT, doc), encoding="utf-8").read()
    block = re.search(r"```python\n(.*?)```", text, re.S).group(1)
    assert "grape.rotate_qk" in block
    monkeypatch.chdir(ROOT)  # README's example reads a bundled config by a relative path
    exec(compile(block, doc, "exec"), {})
    assert printed in capsys.readouterr().out
