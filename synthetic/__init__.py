"""Synthetic datasets of impressions and conversions for the Cookie Monster evaluation (Cookie Monster paper Sec. 8).

* ``synthetic.files``: the file formats and helpers every generator shares (Avro, JSON Lines,
  length-delimited protobuf; independent random streams; time parsing; progress lines).
* ``synthetic.patcg``: the PATCG-like dataset (Cookie Monster paper Sec. 8.1, 8.3).
* ``synthetic.criteo``: the Criteo-like dataset and its augmented Criteo++ variants (Cookie Monster paper Sec. 8.1, 8.4).

The command line is ``python -m pipelines.generate patcg-like ...`` / ``criteo-like ...`` (``pipelines/generate.py``
registers the sub-commands this package defines). Submodules are not imported here, so that importing one
generator does not import the others.
"""
