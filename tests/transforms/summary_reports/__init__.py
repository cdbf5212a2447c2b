"""Tests of the summary reports (``transforms.summary_reports``): the ARA and PAA client PTransforms, batch and
streaming against a plain replay, and the Aggregation Service's privacy-budget ledger on SQLite and PostgreSQL; the
mechanisms in ``mechanisms``.
"""
