"""The `grape` command of the Python package (pip installs it on PATH; also `python -m grape`):
grape's CLI (grape/bin/grape) with every subcommand, plus `grape gen --header H --type T` for an
encoding type of the user's own, which needs the package's sdk to compile (grape/_load.py)."""
import argparse
import json
import os
import sys

from ._check import cli_path
from ._grape import GrapeError


def _gen_user_type(argv):
    parser = argparse.ArgumentParser(
        prog="grape gen", description="Write one self-contained C++ or CUDA source that rotates Q and K as grape's "
                                      "CPU kernel does for a C++ encoding type of your own")
    parser.add_argument("--header", required=True, help="the header that declares the type")
    parser.add_argument("--type", required=True, help='the C++ type, e.g. "quaternion_rope<>"')
    parser.add_argument("--params", help="its parameters as JSON: an object by name, or a list in member order "
                        "(default: the type's default_params()); a path to a .json file works too")
    parser.add_argument("--include-dir", action="append", default=[], help="where the headers it includes are")
    parser.add_argument("--target", required=True, choices=("cpp", "cuda"))
    parser.add_argument("--out", required=True, help="the source file to write")
    parser.add_argument("--name", help="the name in the entry point grape_<name>_encode (default: the type's)")
    args = parser.parse_args(argv)
    from ._load import as_arguments, load_encoding
    params = []
    if args.params is not None:
        text = open(args.params, encoding="utf-8").read() if os.path.isfile(args.params) else args.params
        try:
            params = json.loads(text)
        except ValueError as e:
            raise GrapeError("grape: --params: not JSON (%s)" % e)
    loaded = load_encoding(args.header, args.type, include_dirs=args.include_dir)
    values, named = as_arguments(params)
    print(loaded.generate(args.out, *values, target=args.target, name=args.name, **named))


def main(argv=None):
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv[:1] == ["gen"] and any(a in ("--header", "--type") or a.startswith(("--header=", "--type="))
                                   for a in argv[1:]):
        try:
            _gen_user_type(argv[1:])
        except GrapeError as e:
            print(e, file=sys.stderr)
            return 2
        return 0
    try:
        cli = cli_path()
    except GrapeError as e:
        print(e, file=sys.stderr)
        return 2
    os.execv(cli, [cli] + argv)


if __name__ == "__main__":
    sys.exit(main())
