"""Tests of the evaluation harness: its metrics against hand computations, and ``python -m pipelines.evaluate``
end to end at the tiny size (CSVs, PNGs, ``results.json`` and ``report.md``).
"""
