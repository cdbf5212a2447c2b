"""Everything that turns events into outputs, one package per subject:

* ``core``: what the subjects share: noise samplers, time steps and epochs, exact budget units, sliding distinct
  counts, ARA source matching; file I/O with dead letters, and the per-device Beam state.
* ``kanon``: the Protected Audience k-anonymity server (AboveThreshold with periodic restart, k-anonymity note).
* ``budgeting``: on-device budgeting at population scale (Cookie Monster, ARA-like, IPA-like; Cookie Monster paper).
* ``summary_reports``: the ARA and PAA summary-report clients and the Aggregation Service with its ledger (Ghazi et al.).
* ``event_level``: ARA event-level reports with randomized response (Ghazi et al. Sec. 2.2, Alg. 8).

Subject packages never import each other (what two need lives in ``core``), and ``core`` imports no subject.

The rule (checked by the import contracts in ``.importlinter``, run by ``make lint`` and the tests): modules
under ``mechanisms/`` are Beam-free maths (Python and numpy; no ``apache_beam``, no codecs, no I/O, columnar
or plotting library), so they can be read against the papers line by line and reused by the batch path,
the streaming path, the evaluation and the tests; the modules beside ``mechanisms/`` wire them into Beam.
"""
