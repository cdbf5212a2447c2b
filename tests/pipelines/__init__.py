"""End-to-end tests of the entry points of ``pipelines``: each job's command line on small generated or hand-built
inputs, the command-line conventions of DESIGN.md (options, errors, deprecated aliases), failed runs that release
nothing, a release that a retry cannot duplicate, the ``pm-beam`` dispatcher and the demo's report page.
"""
