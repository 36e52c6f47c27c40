"""grape.load_encoding: an encoding type written in C++ by its user, compiled against what the
package carries (grape/sdk: grape's headers, the templates that make a built-in's kernels, the
libraries behind them and build.txt, the compiler and flags they were built with) into a library
that grape's module opens. What it makes is a grape.BuiltinEncoding like grape.encoding's, so
every call that takes a built-in takes it; its laws are checked by a checker compiled for the type,
run in a process of its own as `grape check` is. Both are cached by a hash of the type, the
headers it reads and the package: a second load opens the library it finds."""
import hashlib
import json
import os
import re
import subprocess
import tempfile
import threading

from . import _grape
from ._grape import GrapeError

_SDK = os.path.join(os.path.dirname(os.path.abspath(__file__)), "sdk")
_lock = threading.Lock()
_sdk_hash = None
_loaded = {}  # name -> LoadedEncoding


def _sdk_build():
    """build.txt: cxx, flags, defines, include_dirs, libraries, check_libraries, gen_libraries and each
    build's own libraries of the sdk (encoding_grape_libraries, check_grape_libraries, gen_grape_libraries)."""
    path = os.path.join(_SDK, "build.txt")
    if not os.path.exists(path):
        raise GrapeError("grape: load_encoding: this package carries no sdk (%s): reinstall grape" % path)
    values = {}
    with open(path, encoding="utf-8") as f:
        for line in f:
            key, _, value = line.rstrip("\n").partition("=")
            if key:
                values[key] = [v for v in value.split(";") if v] if key != "cxx" else value
    return values


def _sdk_id():
    """A hash of every file the package's sdk holds: a rebuilt grape gets new libraries."""
    global _sdk_hash
    if _sdk_hash is None:
        h = hashlib.sha256()
        for root, dirs, files in os.walk(_SDK):
            dirs.sort()
            for name in sorted(files):
                path = os.path.join(root, name)
                h.update(os.path.relpath(path, _SDK).encode())
                with open(path, "rb") as f:
                    h.update(hashlib.sha256(f.read()).digest())
        _sdk_hash = h.hexdigest()
    return _sdk_hash


def _file_hash(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def _user_dependencies(depfile, system_dirs):
    """The files a compile read (its -MD output) that are neither grape's sdk nor the system's:
    the user's headers, whose content the cached build depends on."""
    with open(depfile, encoding="utf-8") as f:
        text = f.read().replace("\\\n", " ")
    paths = text.partition(":")[2].split()
    outside = tuple(os.path.realpath(d) + os.sep for d in [_SDK, *system_dirs, "/usr/"])
    return {p: _file_hash(p) for p in (os.path.realpath(p) for p in paths) if not p.startswith(outside)}


def _first_error(log):
    """The line a user needs from a failed compile: the first `grape:` sentence (a static_assert's),
    else the first compiler error with its file:line."""
    for line in log.splitlines():
        if "grape:" in line and "error" in line:
            return line[line.index("grape:") + len("grape:"):].strip()
    for line in log.splitlines():
        m = re.match(r"^(\S+?:\d+:\d+): (?:fatal )?error: (.*)$", line)
        if m:
            return "%s: %s" % m.groups()
    lines = [line for line in log.splitlines() if line.strip()]
    return lines[0] if lines else "the compiler failed without a message"


class LoadedEncoding:
    """A C++ encoding type compiled by grape.load_encoding. enc.make(...) (or enc(...)) gives a
    grape.BuiltinEncoding at the given parameters: by name where the type's params struct names its
    members (BOOST_HANA_DEFINE_STRUCT; those not given at default_params() where the type has it),
    else every value in member order. enc.check(...) runs the laws it claims."""

    def __init__(self, name, type_name, header, info, library, build_dir, compile_args, checker=None):
        self.name = name
        self.type_name = type_name
        self.header = header
        self.summary = info["summary"]
        self.injection = info["injection"]
        self.param_names = info.get("param_names")  # None: the params struct names no members
        self.param_count = len(self.param_names) if self.param_names is not None else info["param_count"]
        self.default_params = info.get("default_params")
        self.library = library
        self._build_dir = build_dir
        self._compile_args = compile_args
        self._built_checker = checker  # built by grape_add_python_encodings, else compiled at the first check

    def __repr__(self):
        return "LoadedEncoding(%s = %s from %s: %s; %s)" % (self.name, self.type_name, self.header, self.summary,
                                                          self.injection)

    def _params_value(self, values, params):
        if values and params:
            raise GrapeError("grape: %s: give its parameters by name or in order, not both" % self.name)
        if self.param_names is None:
            if params:
                raise GrapeError("grape: %s: its params struct names no members (no BOOST_HANA_DEFINE_STRUCT): give "
                                 "its %d values in order" % (self.name, self.param_count))
            return list(values)
        if values:
            if len(values) > self.param_count:
                raise GrapeError("grape: %s: takes %d parameters (%s), got %d"
                                 % (self.name, self.param_count, ", ".join(self.param_names), len(values)))
            return dict(zip(self.param_names, values))
        return dict(params)

    def _params_json(self, values, params, none_given=None):
        """The parameters as JSON; `none_given` instead where none are (the checker's and gen's "-":
        the type's random or default ones)."""
        if none_given is not None and not values and not params:
            return none_given
        try:
            return json.dumps(self._params_value(values, params))
        except TypeError as e:
            raise GrapeError("grape: %s: parameters must be numbers, bools or lists of numbers (%s)" % (self.name, e))

    def make(self, *values, **params):
        """The encoding at these parameters, as a grape.BuiltinEncoding."""
        text = self._params_json(values, params)
        return _grape._user_encoding(self.library, self.name, text, json.loads(text))

    __call__ = make

    def check(self, *values, trials=100, seed=1, max_position=None, **params):
        """The laws the type claims, as grape.check reports a built-in's: with random parameters
        (the type's random_params) unless parameters are given, then at those."""
        from ._check import _report, run_process
        cmd = [self._checker(), self._params_json(values, params, "-"), str(int(trials)), str(int(seed)),
               str(0 if max_position is None else int(max_position))]
        return _report(json.loads(run_process(cmd)))

    def _checker(self):
        if self._built_checker is not None:
            if not os.access(self._built_checker, os.X_OK):
                raise GrapeError("grape: %s: no checker at %s (build the project's encodings target)"
                                 % (self.name, self._built_checker))
            return self._built_checker
        return self._helper("check")

    def _helper(self, what):
        """The checker or grape gen's helper, compiled at its first use."""
        if self._build_dir is None:
            raise GrapeError("grape: %s: built by a project (grape.load_encodings): load it with grape.load_encoding "
                             "to generate its kernel" % self.name)
        path = _output(self._build_dir, what)
        with _lock:
            if not os.path.exists(path):
                _build(self._build_dir, what, self._compile_args)
        return path

    def generate(self, out, *values, target="cpp", name=None, **params):
        """`grape gen` for this type: one self-contained C++ (target "cpp") or CUDA ("cuda") source
        at `out` that rotates Q and K as cpu::rotate_qk does for the type at these parameters (its
        default_params() when none are given), its view's header text embedded (docs/generated-kernels.md).
        Returns the line grape gen prints."""
        from ._check import run_process
        helper = self._helper("gen")
        view_type = run_process([helper, "view-type"], ok=(0,)).strip()
        headers = _view_headers(view_type, os.path.join(self._build_dir, "gen.deps.json"),
                                [os.path.dirname(self.header), *self._compile_args["include_dirs"]])
        pairs = [x for spelling, path in headers for x in (spelling, path)]
        return run_process([helper, "write", self._params_json(values, params, "-"), str(target), os.fspath(out),
                            name or self.name, *pairs], ok=(0,)).strip()


# What _build makes: the template it instantiates, the file it writes, its optimisation, and the
# system libraries it links besides build.txt's "libraries"; the sdk's own libraries it links are
# build.txt's "<kind>_grape_libraries".
_KINDS = {
    "encoding": ("user_encoding.tpp", "lib.so", "-O3", []),
    "check": ("user_check.tpp", "check", "-O1", ["check_libraries"]),
    "gen": ("user_gen.tpp", "gen", "-O1", ["gen_libraries"]),
}


def _output(build_dir, what):
    return os.path.join(build_dir, _KINDS[what][1])


def _build(build_dir, what, args):
    """Compiles the library ("encoding"), the checker ("check") or grape gen's helper ("gen") for the
    type in args into build_dir, through a temporary file renamed into place (two processes may
    build at once)."""
    sdk = _sdk_build()
    header, type_name, include_dirs = args["header"], args["type"], args["include_dirs"]
    template, _, optimisation, system_libs = _KINDS[what]
    source = os.path.join(build_dir, what + ".cpp")
    with open(source, "w", encoding="utf-8") as f:
        f.write("// Generated by grape.load_encoding for %s from %s.\n#include \"%s\"\n#define GRAPE_USER_ENCODING %s\n"
                "#include \"%s\"\n" % (type_name, header, header, type_name, template))
    fd, partial = tempfile.mkstemp(dir=build_dir, prefix="." + what)
    os.close(fd)
    cmd = [sdk["cxx"], *sdk["flags"], *("-D" + d for d in sdk.get("defines", [])), optimisation, "-w",
           "-I" + os.path.dirname(header), *("-I" + d for d in include_dirs),
           *("-I" + os.path.join(_SDK, d) for d in ("include", "kernels", "python_src", "src")),
           *("-isystem" + d for d in sdk.get("include_dirs", [])),
           "-MD", "-MF", os.path.join(build_dir, what + ".d"), source, "-o", partial]
    if what == "encoding":
        cmd += ["-shared", "-Wl,--exclude-libs,ALL"]
    cmd += [os.path.join(_SDK, "lib", lib) for lib in sdk[what + "_grape_libraries"]]
    for key in system_libs + ["libraries"]:
        cmd += sdk.get(key, [])
    done = subprocess.run(cmd, capture_output=True, text=True)
    log = os.path.join(build_dir, what + ".log")
    with open(log, "w", encoding="utf-8") as f:
        f.write(" ".join(cmd) + "\n" + done.stdout + done.stderr)
    if done.returncode != 0:
        os.unlink(partial)
        raise GrapeError("grape: load_encoding: %s: %s (the compiler's output: %s)"
                         % (type_name, _first_error(done.stderr), log))
    os.chmod(partial, 0o755)
    os.replace(partial, _output(build_dir, what))
    deps = _user_dependencies(os.path.join(build_dir, what + ".d"), sdk.get("include_dirs", []))
    with open(os.path.join(build_dir, what + ".deps.json"), "w", encoding="utf-8") as f:
        json.dump(deps, f)


def _up_to_date(build_dir, what):
    """Whether build_dir holds `what` built from the user headers as they are now."""
    output = _output(build_dir, what)
    deps = os.path.join(build_dir, what + ".deps.json")
    if not (os.path.exists(output) and os.path.exists(deps)):
        return False
    with open(deps, encoding="utf-8") as f:
        recorded = json.load(f)
    return all(os.path.exists(p) and _file_hash(p) == h for p, h in recorded.items())


def cache_root():
    """$GRAPE_CACHE_DIR, else ~/.cache/grape (XDG_CACHE_HOME's grape): where load_encoding builds."""
    root = os.environ.get("GRAPE_CACHE_DIR")
    if not root:
        root = os.path.join(os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache"),
                            "grape")
    return os.path.join(root, "encodings")


def load_encoding(header, type_name, include_dirs=(), name=None):
    """Compiles a C++ encoding type written by its user (`type_name`, e.g. "quaternion_rope<>",
    declared in `header`; `include_dirs` for the headers it includes besides its own directory and
    grape's) and gives a LoadedEncoding: .make(...) for grape.BuiltinEncoding objects that
    grape.rotate_qk, grape.attention (forward, backward, decode), bias_tile, add_embedding and
    grape.torch.attention take as they take grape.encoding(...)'s, and .check(...) for its laws.
    `name` registers it under another name than the type's own (two variants of one type)."""
    header = os.path.realpath(os.fspath(header))
    if not os.path.isfile(header):
        raise GrapeError("grape: load_encoding: header: no file %s" % header)
    if not isinstance(type_name, str) or not type_name.strip():
        raise GrapeError("grape: load_encoding: type_name: must be a C++ type, e.g. \"quaternion_rope<>\"")
    include_dirs = [os.path.realpath(os.fspath(d)) for d in include_dirs]
    for d in include_dirs:
        if not os.path.isdir(d):
            raise GrapeError("grape: load_encoding: include_dirs: no directory %s" % d)
    key = hashlib.sha256(json.dumps([_sdk_id(), header, _file_hash(header), type_name.strip(), include_dirs])
                         .encode()).hexdigest()[:20]
    build_dir = os.path.join(cache_root(), key)
    args = {"header": header, "type": type_name.strip(), "include_dirs": include_dirs}
    with _lock:
        os.makedirs(build_dir, exist_ok=True)
        if not _up_to_date(build_dir, "encoding"):
            _build(build_dir, "encoding", args)
        for lazy in ("check", "gen"):  # built at their first use: drop one built from older headers
            if os.path.exists(_output(build_dir, lazy)) and not _up_to_date(build_dir, lazy):
                os.unlink(_output(build_dir, lazy))
        return _register("load_encoding", name, args["type"], header, os.path.join(build_dir, "lib.so"), build_dir,
                         args)


_INCLUDE = re.compile(r'^\s*#\s*include\s*"([^"]+)"', re.M)


def _view_headers(view_type, deps_file, search_dirs):
    """The user headers that define the view type `view_type`, in the order a file that pastes
    them needs (each after the ones it includes), as (spelling in an #include, path): the one among
    the helper's own dependencies that declares the type, and the user headers it includes; grape's
    (grape/...) are embedded by grape gen itself."""
    with open(deps_file, encoding="utf-8") as f:
        candidates = sorted(json.load(f))
    short = re.sub(r"<.*", "", view_type).split("::")[-1]
    declares = re.compile(r"\b(?:struct|class)\s+%s\b(?!\s*;)" % re.escape(short))
    defining = [p for p in candidates if declares.search(open(p, encoding="utf-8").read())]
    if not defining:
        raise GrapeError("grape: gen: no header among the type's own (%s) defines its view %s"
                         % (", ".join(candidates) or "none", view_type))
    ordered, seen = [], set()

    def visit(spelling, path):
        if path in seen:
            return
        seen.add(path)
        text = open(path, encoding="utf-8").read()
        for included in _INCLUDE.findall(text):
            if included.startswith("grape/"):
                continue
            found = [os.path.join(d, included) for d in [os.path.dirname(path), *search_dirs]
                     if os.path.isfile(os.path.join(d, included))]
            if not found:
                raise GrapeError("grape: gen: %s includes %s, which is not found" % (path, included))
            visit(included, os.path.realpath(found[0]))
        ordered.append((spelling, path))

    visit(os.path.basename(defining[0]), defining[0])
    return ordered


def _register(caller, name, type_name, header, library, build_dir, args, checker=None):
    """Opens a library and registers its encoding under `name` (None: the type's own)."""
    info = json.loads(_grape._user_encoding_info(library))
    name = info["name"] if name is None else str(name)
    if name in {b.name for b in _builtin_infos()}:
        raise GrapeError("grape: %s: name '%s' is a built-in's: give name=" % (caller, name))
    previous = _loaded.get(name)
    if previous is not None and (previous.header, previous.type_name) != (header, type_name):
        raise GrapeError("grape: %s: name '%s' is taken by %s from %s: give name="
                         % (caller, name, previous.type_name, previous.header))
    loaded = LoadedEncoding(name, type_name, header, info, library, build_dir, args, checker)
    _loaded[name] = loaded
    return loaded


def load_encodings(manifest):
    """The encodings a project built with grape_add_python_encodings (CMake; README, "Use grape
    from your project"): its <build>/<target>/encodings.json, as {name: LoadedEncoding}. Nothing is
    compiled; the libraries and checkers are the project's."""
    manifest = os.fspath(manifest)
    try:
        with open(manifest, encoding="utf-8") as f:
            entries = json.load(f)
    except (OSError, ValueError) as e:
        raise GrapeError("grape: load_encodings: %s: %s" % (manifest, e))
    out = {}
    with _lock:
        for i, entry in enumerate(entries):
            try:
                name, type_name, header, library, checker = (entry[k] for k in ("name", "type", "header", "library",
                                                                                "checker"))
            except (KeyError, TypeError):
                raise GrapeError("grape: load_encodings: %s: entry %d: needs name, type, header, library, checker"
                                 % (manifest, i))
            if not os.path.exists(library):
                raise GrapeError("grape: load_encodings: %s: no library %s (build the project's encodings target)"
                                 % (manifest, library))
            loaded = _register("load_encodings", name, type_name, header, library, None, None, checker)
            out[loaded.name] = loaded
    return out


def cmake_dir():
    """Where grape_python_encodings.cmake is (include() it to get grape_add_python_encodings)."""
    return os.path.join(_SDK, "cmake")


_builtin_cache = []


def _builtin_infos():
    if not _builtin_cache:
        from ._check import list as _list
        _builtin_cache.extend(_list())
    return _builtin_cache


def loaded(name):
    """The LoadedEncoding registered under this name, or None."""
    return _loaded.get(name)


def encoding_named(name, params):
    """A built-in's or a loaded type's encoding by name and parameters (a dict, or a list for a
    type whose params struct names no members): what grape.torch's plain values rebuild."""
    lo = _loaded.get(name)
    if lo is not None:
        values, named = as_arguments(params)
        return lo.make(*values, **named)
    return _grape._builtin_encoding(name, params)


def as_arguments(params):
    """An encoding's parameters as one value (a dict by name, or a list in member order, as
    BuiltinEncoding.params and JSON hold them) split into the (values, named) a call takes."""
    return ((), dict(params)) if isinstance(params, dict) else (tuple(params), {})
