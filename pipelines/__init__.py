"""Runnable entry points: python -m pipelines.<name>."""
import logging
import warnings

# Importing Beam warns on the root logger about optional Google Cloud client libraries that the
# local runners do not need; the entry points configure logging themselves (pipelines.common).
logging.getLogger().addFilter(lambda record: "apitools not found" not in record.getMessage())
# With Beam 2.62 (grpcio < 1.66) importing Beam imports google.cloud.storage, whose imports warn on stderr that
# grpcio < 1.83 lacks post-quantum TLS (and, with google-api-core 2.28 or later, that Python 3.11 nears its end).
warnings.filterwarnings("ignore", category=FutureWarning, module=r"google\.(auth|api_core)\.")

# Beam 2.62 does not know the runner name FnApiRunner (later releases list it in StandardOptions.ALL_KNOWN_RUNNERS):
# the batch default and every --runner=FnApiRunner would fail with "Unexpected pipeline runner".
from apache_beam.runners import runner as _beam_runner  # noqa: E402

_beam_runner._RUNNER_MAP.setdefault("fnapirunner", "apache_beam.runners.portability.fn_api_runner.FnApiRunner")
