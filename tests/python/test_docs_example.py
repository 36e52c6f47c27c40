"""docs/python.md's example runs as written."""
import os
import re

DOC = os.path.join(os.path.dirname(__file__), "..", "..", "docs", "python.md")


def test_the_api_example_in_docs_python_md_runs(capsys):
    text = open(DOC, encoding="utf-8").read()
    block = re.search(r"```python\n(.*?)```", text, re.S).group(1)
    assert "grape.rotate_qk" in block
    exec(compile(block, "docs/python.md", "exec"), {})
    assert "rope(head_dim=64" in capsys.readouterr().out
