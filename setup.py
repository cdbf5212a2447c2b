"""One distribution for the privacy-preserving ad-measurement pipelines (see README.md)."""
from setuptools import find_packages, setup

setup(
    name="privacy-measurement-beam",
    version="0.1.0",
    description=(
        "Differentially private ad-measurement and k-anonymity pipelines on Apache Beam: "
        "the Protected Audience k-anonymity server, on-device budgeting and the Aggregation Service."
    ),
    long_description=open("README.md", encoding="utf-8").read(),
    long_description_content_type="text/markdown",
    python_requires=">=3.10",
    packages=find_packages(include=[
        "pipelines", "pipelines.*", "evaluation", "evaluation.*", "synthetic", "synthetic.*",
        "transforms", "transforms.*", "schemas", "schemas.*",
    ]),
    package_data={"schemas": ["proto/*.proto", "avro/*.avsc"]},
    install_requires=[
        "apache-beam==2.77.*",
        "numpy>=1.26",
        "protobuf>=6.31.1,<7",
        "fastavro>=1.9",
        "matplotlib>=3.8",
        "cbor2>=5.6",
        "pyhpke>=0.6",
        "orjson>=3.10",
        "polars>=1.30",
        "pyarrow>=14",
    ],
    extras_require={
        "postgres": ["psycopg[binary]>=3.2"],
        "test": ["pytest>=8", "hypothesis>=6.100", "grpcio-tools==1.78.2", "psycopg[binary]>=3.2", "import-linter>=2.1"],
        "dev": ["ruff>=0.5", "import-linter>=2.1"],
    },
    entry_points={"console_scripts": ["pm-beam=pipelines.__main__:main"]},
)
