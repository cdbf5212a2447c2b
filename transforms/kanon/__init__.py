"""The Protected Audience k-anonymity server (the k-anonymity note, k-anonymity note).

* ``mechanisms/``: AboveThreshold (Alg. 2) and its periodic restart (Alg. 1), the stream's privacy accounting
  (Cor. 4.4 and 3.1), the stateful group replay (streaming) and the vectorised one (batch).
* ``join_fold``: join rows folded per file into compact per-group join sets (batch reading side).
* ``verdicts``: the Beam transforms, batch and streaming, from join events to verdicts.

The rule of ``transforms`` holds here: ``mechanisms/`` is Beam-free maths, the modules beside it wire it into Beam.
"""
