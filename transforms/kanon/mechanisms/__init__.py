"""Beam-free k-anonymity mechanisms: AboveThreshold with periodic restart, TLap accounting, group replays."""
