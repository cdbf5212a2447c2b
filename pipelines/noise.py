"""A run's noise source (DESIGN.md, "Two kinds of randomness"; docs/security.md, "Noise").

Seeded with ``--seed`` (simulation and tests). Otherwise secure: a ``SecretSource`` derived from the run's noise key
(``transforms.core.noise_key``), never a secret that a store or the job's graph keeps. Its context is the pipeline
and the job: a local streaming job with durable state derives from its job id and the nonce its state store drew
when the job started, so a restarted job draws again exactly what it drew (and released) before; any other run
from a nonce of its own, so that two runs never share noise. Runners outside this process (Flink, Dataflow) retry
bundles and restore from checkpoints: every draw is keyed (group and hour, query, report), so what they compute
again they draw the same noise for, and each worker derives the source from the key it reads itself.
"""
from __future__ import annotations

import apache_beam as beam

from pipelines import topics
from pipelines.options.run import RunOptions
from transforms.core.mechanisms.noise import RandomSource, SeededSource

PURPOSE = "noise"


def noise_source(pipeline: beam.Pipeline, run: RunOptions, name: str) -> RandomSource:
    """The noise of the run of pipeline ``name``: seeded, or derived from the noise key for its job (call it once
    the pipeline's topics are read: a durable job's nonce comes from its store)."""
    if run.seed is not None:
        return SeededSource(run.seed)
    if run.noise_key is None:
        raise ValueError("a secure run needs a noise key (RunOptions.noise_key)")
    job = topics.durable_job(pipeline)
    if job is not None:
        return run.noise_key.source(PURPOSE, name, job.job_id, salt=job.noise_nonce)
    return run.noise_key.source(PURPOSE, name, salt=run.run_nonce)
