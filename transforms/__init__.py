"""Beam PTransforms and DoFns that wire the mechanisms into pipelines."""
