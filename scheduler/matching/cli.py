"""``cellfit allox --input FILE [--output FILE]``: schedule one AlloX instance (the only module of
this package that does I/O).

``scheduler/cli.py`` registers the subcommand with :func:`add_arguments` and :func:`run`;
``python -m scheduler.matching.cli --input FILE`` runs it alone. Exit codes: 0 done, 2 bad
input or arguments (one line on stderr naming the field), 1 anything else cellfit refuses.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path
from typing import Final, Sequence

from scheduler.errors import CellfitError, InvalidRequest
from scheduler.matching.schema import parse_instance
from scheduler.matching.tool import POLICIES, run_instance

EXIT_OK: Final = 0
EXIT_FAILED: Final = 1
EXIT_BAD_INPUT: Final = 2
_PROG: Final = "cellfit allox"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.description = (
        "Choose CPU or GPU and the order of interchangeable jobs (AlloX, EuroSys'20) for one "
        "instance, and print the schedule as JSON."
    )
    parser.add_argument("--input", required=True, metavar="FILE", help="instance JSON ('-' for stdin)")
    parser.add_argument("--output", metavar="FILE", help="write the schedule here instead of stdout")
    parser.add_argument(
        "--policy",
        choices=POLICIES,
        default="allox",
        help="allox: min-cost matching (default); allox+: shortest job first with a timeout",
    )
    parser.add_argument(
        "--timeout",
        type=_non_negative,
        default=None,
        metavar="SECONDS",
        help="allox+ only: a job waiting this long goes ahead of shorter ones (default: never)",
    )


def run(args: argparse.Namespace) -> int:
    if args.timeout is not None and args.policy != "allox+":
        # Only allox+ reads it: taken silently, it would look like it had changed the schedule.
        return _fail(f"--timeout: allox+ only (add --policy allox+; the policy is {args.policy})", EXIT_BAD_INPUT)
    timeout = math.inf if args.timeout is None else args.timeout
    if args.output is not None and args.input != "-" and Path(args.output).resolve() == Path(args.input).resolve():
        return _fail(f"--output: {args.output} is the --input file (the instance would be lost)", EXIT_BAD_INPUT)
    try:
        text = sys.stdin.buffer.read() if args.input == "-" else Path(args.input).read_bytes()
    except OSError as error:
        return _fail(f"cannot read {args.input}: {error.strerror or error}", EXIT_BAD_INPUT)
    try:
        report = run_instance(parse_instance(text), policy=args.policy, timeout=timeout)
    except InvalidRequest as error:
        return _fail(str(error), EXIT_BAD_INPUT)
    except CellfitError as error:
        return _fail(str(error), EXIT_FAILED)
    document = json.dumps(report.to_document(), indent=2) + "\n"
    if args.output is None:
        sys.stdout.write(document)
        return EXIT_OK
    try:
        Path(args.output).write_text(document, encoding="utf-8")
    except OSError as error:
        return _fail(f"cannot write {args.output}: {error.strerror or error}", EXIT_FAILED)
    return EXIT_OK


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog=_PROG)
    add_arguments(parser)
    return run(parser.parse_args(argv))


def _non_negative(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not value >= 0:
        raise argparse.ArgumentTypeError(f"must be >= 0, got {text}")
    return value


def _fail(message: str, code: int) -> int:
    # One line, so that the message stays readable in logs and CI output.
    print(f"{_PROG}: error: {' '.join(message.split())}", file=sys.stderr)
    return code


if __name__ == "__main__":
    sys.exit(main())
