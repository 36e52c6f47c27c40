"""grape_add_python_encodings: README's recipe ("Use grape from your project") built as a project of
its own against the installed package, with the tutorial's two encodings; grape.load_encodings opens
what it built, and the encodings check and compute what grape.load_encoding's do."""
import json
import os
import re
import shutil
import subprocess
import sys

import numpy as np
import pytest

import grape

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
EXAMPLES = os.path.join(ROOT, "examples")


def readme_recipe():
    text = open(os.path.join(ROOT, "README.md"), encoding="utf-8").read()
    blocks = [b for b in re.findall(r"```cmake\n(.*?)```", text, re.S) if "grape_add_python_encodings" in b]
    assert len(blocks) == 1
    return blocks[0]


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    project = tmp_path_factory.mktemp("project")
    recipe = readme_recipe().replace("your_encodings", "tutorial_encodings").replace(
        "your_encoding.hpp", os.path.join(EXAMPLES, "quaternion_rope.hpp")).replace("your_encoding<>", "quaternion_rope<>")
    (project / "CMakeLists.txt").write_text(
        "cmake_minimum_required(VERSION 3.25)\nproject(tutorial_encodings LANGUAGES CXX)\n" + recipe +
        "grape_add_python_encodings(more_encodings HEADERS %s TYPES log_distance NAMES log_distance_cmake)\n"
        % os.path.join(EXAMPLES, "log_distance.hpp"))
    build = project / "build"
    options = ["-DPython_EXECUTABLE=" + sys.executable, "-DCMAKE_BUILD_TYPE=Release"]
    if shutil.which("ccache"):
        options.append("-DCMAKE_CXX_COMPILER_LAUNCHER=ccache")
    for cmd in (["cmake", "-S", str(project), "-B", str(build)] + options, ["cmake", "--build", str(build), "-j2"]):
        done = subprocess.run(cmd, capture_output=True, text=True)
        assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return build


def test_the_readme_recipe_builds_libraries_and_checkers_that_load(built):
    manifest = built / "tutorial_encodings" / "encodings.json"
    entries = json.loads(manifest.read_text())
    assert [e["type"] for e in entries] == ["quaternion_rope<>"] and entries[0]["name"] is None
    loaded = grape.load_encodings(manifest)
    assert list(loaded) == ["quaternion_rope"]
    quaternion = loaded["quaternion_rope"]
    assert quaternion.library.startswith(str(built))
    report = grape.check(quaternion, trials=20)
    assert report.passed and report.law("relative").holds
    # The same kernels as the run-time build: rotations equal to the last bit.
    runtime = grape.load_encoding(os.path.join(EXAMPLES, "quaternion_rope.hpp"), "quaternion_rope<>")
    assert runtime.library != quaternion.library
    x = np.random.default_rng(0).standard_normal((5, 2, 8)).astype(np.float32)
    ours = grape.rotate_qk(x, None, quaternion.make(8, 100.0, 3), positions=np.arange(5) * 1000)[0]
    theirs = grape.rotate_qk(x, None, runtime.make(8, 100.0, 3), positions=np.arange(5) * 1000)[0]
    assert np.array_equal(np.asarray(ours), np.asarray(theirs))


def test_names_register_a_type_under_another_name(built):
    loaded = grape.load_encodings(built / "more_encodings" / "encodings.json")
    enc = loaded["log_distance_cmake"].make(4, 8)
    assert enc.name == "log_distance_cmake" and len(enc.bias_params) == 4
    q, k, v = (np.random.default_rng(i).standard_normal((9, 4, 8)).astype(np.float32) for i in range(3))
    out = np.asarray(grape.attention(q, k, v, enc))
    assert np.isfinite(out).all()
    report = grape.check(enc, trials=10)  # at these parameters, through the project's checker
    assert report.passed and "4 8" in report.parameters


def test_a_bad_manifest_is_one_line(tmp_path):
    with pytest.raises(grape.GrapeError, match=r"^grape: load_encodings: .*missing.json: "):
        grape.load_encodings(tmp_path / "missing.json")
    bad = tmp_path / "bad.json"
    bad.write_text('[{"name": null}]')
    with pytest.raises(grape.GrapeError, match=r"^grape: load_encodings: .*bad.json: entry 0: needs name, type, "):
        grape.load_encodings(bad)
