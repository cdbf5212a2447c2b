"""Beam-free mechanisms: noise samplers, AboveThreshold, accounting, windowed counts. Never import Beam here."""
