"""Tests of the Beam-free event-level mechanisms (Ghazi et al. Sec. 2.2): ARA-Event-Client with the noise off and with
Alg. 8's randomized response, configurations and |O| with its ranking, and the reports of rows per device.
"""
