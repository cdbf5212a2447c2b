"""Beam-free maths shared by the subjects: noise, time steps and epochs, budget units, distinct counts, ARA matching."""
