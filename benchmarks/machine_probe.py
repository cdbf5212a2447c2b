"""The machine's speed over time, beside a long benchmark (a soak): every ``--every`` seconds, the time of a
pure-Python loop of two million additions (the CPU) and of a random gather of two million int64 from 400 MB (memory
latency), one JSON line each. A job that falls behind while both stay flat fell behind by itself, not because the
machine slowed down.

    python benchmarks/machine_probe.py [--every 20] > probe.jsonl
"""
from __future__ import annotations

import argparse
import json
import time

import numpy as np


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--every", type=float, default=20.0, help="seconds between two probes (default 20)")
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    memory = np.arange(50_000_000, dtype=np.int64)  # 400 MB
    indices = rng.integers(0, memory.size, 2_000_000)
    start = time.time()
    while True:
        began = time.perf_counter()
        total = 0
        for value in range(2_000_000):
            total += value
        looped = time.perf_counter()
        memory[indices].sum()
        gathered = time.perf_counter()
        print(json.dumps({"t": round(time.time() - start), "loop_s": round(looped - began, 3),
                          "gather_s": round(gathered - looped, 3)}), flush=True)
        time.sleep(args.every)


if __name__ == "__main__":
    raise SystemExit(main())
