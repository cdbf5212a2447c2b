"""Command-line option groups, declared once and read into the jobs' typed records.

``run``: what every event pipeline has (output, input format, seed, streaming, shards). ``measurement`` and
``aggregate``: the option groups of one subject each, with the function that turns them into its configuration.
"""
