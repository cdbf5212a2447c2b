"""``pm-beam noise-key``: make a noise key, and name the key a location holds (docs/security.md, "Keys").

    pm-beam noise-key new PATH        a new 256-bit key from the OS CSPRNG, written 0600 (never over a file)
    pm-beam noise-key id [LOCATION]   the id of the key at LOCATION (default: the key runs use), as summaries
                                      and the stores record it; never the key itself
"""
from __future__ import annotations

import sys

from pipelines.common import CliError, CliParser, fail
from pipelines.options.run import key_location
from transforms.core.noise_key import NoiseKey, write_key_file


def build_parser() -> CliParser:
    parser = CliParser(prog="pm-beam noise-key", description="Make a noise key, or show the id of one.")
    commands = parser.add_subparsers(dest="command", required=True)
    new = commands.add_parser("new", help="write a new key to a file (0600) that does not exist yet")
    new.add_argument("path", help="the key file to create")
    show = commands.add_parser("id", help="the id of a key (as summaries, ledgers and stores record it)")
    show.add_argument("location", nargs="?", help="a key file, env:NAME or a Beam file system URL (default: the "
                      "key runs use, $PM_BEAM_NOISE_KEY or ~/.config/pm-beam/noise.key)")
    show.add_argument("--accept-shared-files", dest="accept_shared", action="store_true",
                      help="read a key file that group or others may read")
    return parser


def main(argv: list[str] | None = None) -> int:
    try:
        args = build_parser().parse_args(argv)
        if args.command == "new":
            key = NoiseKey.new()
            try:
                write_key_file(args.path, key)
            except FileExistsError as error:
                raise CliError(str(error)) from None
            except OSError as error:
                raise CliError(f"cannot write {args.path}: {error.strerror or error}") from None
            print(f"noise key {key.key_id} written to {args.path} (0600)")
        else:
            found = key_location(args.location, args.accept_shared, "noise-key id")
            print(f"{found.key_id}  {found.location}")
    except CliError as error:
        return fail(error)
    return 0


if __name__ == "__main__":
    sys.exit(main())
