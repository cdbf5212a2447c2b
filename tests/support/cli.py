"""Running a job's command line in process, for the CLI tests."""
from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from pathlib import Path


def run_main(main: Callable[[list[str]], int], capsys, argv: Sequence) -> tuple[int, dict, str]:
    """``main`` on ``argv`` (every item made a string): its exit status, the summary.json it wrote into its
    ``--output`` directory (empty when the status is not 0) and everything it printed."""
    status = main([str(arg) for arg in argv])
    printed = capsys.readouterr()
    output = Path(argv[list(argv).index("--output") + 1])
    summary = json.loads((output / "summary.json").read_text()) if status == 0 else {}
    return status, summary, printed.out + printed.err
