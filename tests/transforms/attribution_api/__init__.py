"""Tests of the W3C Attribution API subject (``transforms.attribution_api``): its backend's budgets and credit."""
