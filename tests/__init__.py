"""The test suite, laid out as the packages it tests (``tests/transforms/...``, ``tests/schemas/...``,
``tests/pipelines/...``), with shared helpers in ``tests.support``; at the top level, the checks that hold for the whole
project: the architecture's import contracts, install hygiene (the extras) and the linters.
"""
