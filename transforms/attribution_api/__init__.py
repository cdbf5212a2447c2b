"""The W3C Attribution API (Level 1) on device: its privacy budget (Cookie Monster's per-site, per-epoch filters),
its global budget and impression-site quotas (Big Bird), attribution and histograms, and Big Bird's options beyond
the specification (``mechanisms/``)."""
