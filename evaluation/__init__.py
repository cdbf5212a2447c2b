"""The experiment harness of ``python -m pipelines.evaluate`` (Cookie Monster paper Sec. 8 and Appendix D).

``data`` loads a generated dataset once for many runs, ``runs`` runs one point (a policy, epoch length and bias
detection) through the in-memory measurement job, ``metrics`` computes budget consumption and query error from it,
``experiments`` and ``realistic`` define the experiments and their sweeps, ``output`` writes their CSVs and
``results.json``, ``figures`` draws the PNG figures (matplotlib, the ``plots`` extra), ``report`` writes
``report.md`` next to the paper's numbers, and ``html_page`` draws the demo's static page with inline SVG.
"""
