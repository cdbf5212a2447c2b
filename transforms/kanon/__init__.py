"""The Protected Audience k-anonymity server (the k-anonymity note, seed 004).

* ``mechanisms/``: AboveThreshold (Alg. 2) and its periodic restart (Alg. 1), the stream's privacy accounting
  (Cor. 4.4 and 3.1), the stateful group replay (streaming) and the vectorised one (batch).
* ``join_fold``: join rows folded per file into compact per-group join sets (batch reading side).
* ``verdicts``: the Beam transforms, batch and streaming, from join events to verdicts.

The rule (checked by the import contracts in ``.importlinter``, run by ``make lint`` and the tests): modules
under ``mechanisms/`` are Beam-free maths (Python and numpy; no ``apache_beam``, no codecs, no I/O, columnar
or plotting library), so they can be read against the papers line by line and reused by the batch path,
the streaming path, the evaluation and the tests; the modules beside ``mechanisms/`` wire them into Beam.
"""
