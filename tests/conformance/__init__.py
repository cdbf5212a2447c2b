"""Conformance with the public implementations' own test data (each suite with its NOTICE and licence)."""
