"""Beam-free event-level mechanisms: configuration, output set, randomized response, information gain, client."""
