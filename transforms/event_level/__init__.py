"""ARA event-level reports with randomized response (seed 000 Sec. 2.2, Alg. 4; Sec. 5, Alg. 8, Thm. 5.1).

* ``mechanisms/``: the source configuration, the output set O counted and unranked exactly, randomized response,
  information gain and the configuration check, the per-device client (Alg. 4) and its replay.
* ``frames``: the columnar batch path (polars), an exact shortcut of the row replay.
* ``reports``: the Beam transforms, batch and streaming.

The rule (checked by the import contracts in ``.importlinter``, run by ``make lint`` and the tests): modules
under ``mechanisms/`` are Beam-free maths (Python and numpy; no ``apache_beam``, no codecs, no I/O, columnar
or plotting library), so they can be read against the papers line by line and reused by the batch path,
the streaming path, the evaluation and the tests; the modules beside ``mechanisms/`` wire them into Beam.
"""
