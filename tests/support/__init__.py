"""Helpers the tests share, not tests themselves: hand-built and random events of every subject and their file
writers, readers of the files a job or generator wrote, aggregatable report files, seeded random sources, TestStream
helpers, in-process command lines, a naive k-anonymity replay to check the optimised one against, sample per-key
state of every streaming stage, and a throw-away PostgreSQL server.
"""
