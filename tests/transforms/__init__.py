"""Tests of ``transforms``, one package per subject as there (``core``, ``kanon``, ``budgeting``, ``summary_reports``,
``event_level``): each ``mechanisms`` package tests the Beam-free maths against the papers, the modules beside it test
the Beam transforms, batch against streaming (TestStream) and the portable runner.
"""
