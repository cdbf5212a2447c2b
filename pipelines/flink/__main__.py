"""``python -m pipelines.flink``: the same as ``pm-beam flink`` (``pipelines.flink.cli``)."""
import sys

from pipelines.flink.cli import main

sys.exit(main())
