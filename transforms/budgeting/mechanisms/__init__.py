"""Beam-free on-device budgeting: filters, attribution, policies, bias detection, device replay, queries."""
