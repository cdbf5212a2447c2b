"""Tests of the privacy audit (audit/, pipelines/audit.py) and the broken variants it must catch."""
