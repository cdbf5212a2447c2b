"""The audit cases, one module per subject: each ``make_*`` builds an ``AuditCase`` from the mechanism object the
pipelines use (which a test may replace by a deliberately broken one); ``all_cases`` lists what ``pm-beam audit``
runs."""
