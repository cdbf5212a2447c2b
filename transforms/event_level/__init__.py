"""ARA event-level reports with randomized response (Ghazi et al. Sec. 2.2, Alg. 4; Sec. 5, Alg. 8, Thm. 5.1).

* ``mechanisms/``: the source configuration, the output set O counted and unranked exactly, randomized response,
  information gain and the configuration check, the per-device client (Alg. 4) and its replay.
* ``frames``: the columnar batch path (polars), an exact shortcut of the row replay.
* ``reports``: the Beam transforms, batch and streaming.

The rule of ``transforms`` holds here: ``mechanisms/`` is Beam-free maths, the modules beside it wire it into Beam.
"""
