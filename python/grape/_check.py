"""grape.list(), grape.check() and grape.inspect(): the registry and the law checker, run by the
grape CLI that the package carries (grape/bin/grape), so a check runs in its own process (see python/CMakeLists.txt)."""
import dataclasses
import json
import os
import subprocess
import tempfile
from typing import List, Optional

from ._grape import GrapeError


def cli_path():
    """The grape executable: $GRAPE_CLI, else the one installed in this package."""
    path = os.environ.get("GRAPE_CLI") or os.path.join(os.path.dirname(__file__), "bin", "grape")
    if not os.access(path, os.X_OK):
        raise GrapeError("grape CLI not found at %s (reinstall the package, or set GRAPE_CLI)" % path)
    return path


def run_process(cmd, ok=(0, 1)):
    """Runs one of grape's programs (the CLI, a loaded type's checker or gen helper) and returns its
    output; an exit outside `ok` (2: bad input) raises GrapeError with its one-line message."""
    done = subprocess.run(cmd, capture_output=True, text=True)
    if done.returncode not in ok:
        lines = done.stderr.strip().splitlines() or ["%s exited %d" % (" ".join(cmd), done.returncode)]
        raise GrapeError(lines[-1])
    return done.stdout


def _run(args):
    """Runs the CLI and reads its JSON."""
    return json.loads(run_process([cli_path()] + args))


@dataclasses.dataclass(frozen=True)
class BuiltinInfo:
    name: str
    summary: str
    group: str
    injection: str
    claims: List[str]


@dataclasses.dataclass(frozen=True)
class Counterexample:
    positions: str
    lhs: float
    rhs: float
    error: float
    tolerance: float
    what: str


@dataclasses.dataclass(frozen=True)
class LawResult:
    name: str
    formula: str
    claimed: bool
    holds: bool
    trials: int
    tolerance: str
    counterexample: Optional[Counterexample]
    run: bool = True                    # False: the law's kernel cannot run this encoding (why_not_run says why)
    why_not_run: Optional[str] = None


@dataclasses.dataclass(frozen=True)
class CheckReport:
    encoding: str
    summary: str
    parameters: str
    positions: str
    position_draws: str
    reference: str
    notes: List[str]
    seed: int
    trials: int
    laws: List[LawResult]

    @property
    def passed(self):
        """Every claimed law holds."""
        return all(law.holds for law in self.laws if law.claimed)

    def law(self, name):
        """The row of one law, by name."""
        for law in self.laws:
            if law.name == name:
                return law
        raise KeyError(name)

    def __str__(self):
        rows = ["%s: %s" % (self.encoding, "passed" if self.passed else "FAILED")]
        for law in self.laws:
            if not law.run:
                rows.append("  %-26s %-9s not run: %s" % (law.name, "", law.why_not_run))
                continue
            state = "holds" if law.holds else "DOES NOT HOLD"
            rows.append("  %-26s %-9s %s" % (law.name, "claimed" if law.claimed else "", state))
            if law.counterexample is not None:
                c = law.counterexample
                number = lambda x: "n/a" if x is None else "%.3g" % x  # noqa: E731: a non-finite side has none
                rows.append("    counterexample %s: %s = %r vs %r (error %s > %s)"
                            % (c.positions, c.what, c.lhs, c.rhs, number(c.error), number(c.tolerance)))
        return "\n".join(rows)


def list():  # noqa: A001 (the API's name)
    """Every built-in encoding with the laws it claims."""
    return [BuiltinInfo(e["name"], e["summary"], e["group"], e["injection"], e["claims"])
            for e in _run(["list", "--json"])]


def check(name, trials=100, seed=1, max_position=None):
    """Checks a built-in's laws with random parameters; the same seed gives the same report. A
    grape.python_bias or grape.python_rotation object in place of the name is checked in this process
    (grape/_check_python.py, grape/_check_python_rotation.py), and so is an encoding object with its
    own values: a RotaryEncoding as a Python rotation, an AlibiEncoding or a T5Encoding with its
    table as a Python score bias (grape/_check_objects.py)."""
    from ._python_encodings import PythonBias
    from ._python_rotations import PythonRotation
    if isinstance(name, PythonRotation):
        from ._check_python_rotation import check_python_rotation
        return check_python_rotation(name, trials=trials, seed=seed, max_position=max_position)
    from ._check_objects import as_python_encoding
    mirror = None if isinstance(name, (str, PythonBias, PythonRotation)) else as_python_encoding(name)
    if mirror is not None:
        return check(mirror, trials=trials, seed=seed, max_position=max_position)
    if isinstance(name, PythonBias):
        from ._check_python import check_python
        return check_python(name, trials=trials, seed=seed, max_position=max_position)
    from ._grape import BuiltinEncoding
    from ._load import LoadedEncoding, as_arguments, loaded
    if isinstance(name, LoadedEncoding):  # grape.load_encoding(...): its own checker, random parameters
        return name.check(trials=trials, seed=seed, max_position=max_position)
    if isinstance(name, BuiltinEncoding) and loaded(name.name) is not None:  # ... at these parameters
        values, named = as_arguments(name.params)
        return loaded(name.name).check(*values, trials=trials, seed=seed, max_position=max_position, **named)
    if isinstance(name, BuiltinEncoding):  # grape.encoding(name, **params): the C++ laws at its parameters
        return _report(_run(["check", name.name, "--params", json.dumps(name.params), "--json", "--trials",
                             str(int(trials)), "--seed", str(int(seed))]
                            + ([] if max_position is None else ["--max-position", str(int(max_position))])))
    if not isinstance(name, str):
        raise GrapeError("grape: check: takes a built-in's name or grape.encoding(...) object, a grape.python_bias or "
                         "grape.python_rotation, or a RotaryEncoding, AlibiEncoding or T5Encoding with its table "
                         "(got %s)" % type(name).__name__)
    args = ["check", str(name), "--json", "--trials", str(int(trials)), "--seed", str(int(seed))]
    if max_position is not None:
        args += ["--max-position", str(int(max_position))]
    return _report(_run(args))


def inspect(config, seq_len=None, precision="float32_reference", trials=100, seed=1):
    """What `grape inspect --json` says of a config (a path or a dict): the encoding, its schedule and
    table, the KV-cache size, the precision certificate, and under "laws" the CheckReport of its
    rotary table (None for ALiBi and T5 models)."""
    args = ["--json", "--precision", str(precision), "--trials", str(int(trials)), "--seed", str(int(seed))]
    if seq_len is not None:
        args += ["--seq-len", str(int(seq_len))]
    if isinstance(config, dict):
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "config.json")
            with open(path, "w", encoding="utf-8") as f:
                json.dump(config, f)
            j = _run(["inspect", path] + args)
    elif isinstance(config, (str, os.PathLike)):
        j = _run(["inspect", os.fspath(config)] + args)
    else:
        raise TypeError("grape: inspect: config must be a path or a dict (got %s)" % type(config).__name__)
    if j.get("laws") is not None:
        j["laws"] = _report(j["laws"])
    return j


def _report(j):
    """A CheckReport from the checker's JSON (grape/check/report_json.hpp)."""
    laws = []
    for r in j["laws"]:
        c = r.get("counterexample")
        example = None if c is None else Counterexample(c["positions"], c["lhs"], c["rhs"], c["error"],
                                                        c["tolerance"], c["what"])
        laws.append(LawResult(r["law"], r["formula"], r["claimed"], r["holds"], r["trials"], r["tolerance"],
                              example, r.get("run", True), r.get("why_not_run")))
    return CheckReport(j["encoding"], j["summary"], j["parameters"], j["positions"], j["position_draws"],
                       j["reference"], j["notes"], j["seed"], j["trials"], laws)
