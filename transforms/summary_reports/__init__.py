"""Summary reports: the ARA and PAA clients and the Aggregation Service (Ghazi et al. Sec. 2.1, Alg. 1-3 and 6).

* ``mechanisms/``: the clients' contribution budgets and reports, ARA-SR-Client (Alg. 2), PAA-SR-Client (Alg. 3),
  and the aggregation with discrete Laplace noise, key discovery and thresholds (Alg. 1 and 6).
* ``report_records``: a client's report in the Aggregation Service's wire format (CBOR payload, HPKE).
* ``clients``: the Beam transforms of the clients, batch and streaming.
* ``aggregation``: the Beam transforms of the Aggregation Service.
* ``ledger``: the durable privacy-budget ledger per shared ID (SQLite or PostgreSQL).

The rule of ``transforms`` holds here: ``mechanisms/`` is Beam-free maths, the modules beside it wire it into Beam.
"""
