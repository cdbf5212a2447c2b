"""``pm-beam <command> [options]`` (or ``python -m pipelines <command>``): one entry point for every pipeline."""
from __future__ import annotations

import importlib
import sys

COMMANDS = {
    "kanon": ("pipelines.kanon", "differentially private k-anonymity verdicts (k-anonymity note)"),
    "kanon-privacy": ("pipelines.kanon_privacy", "privacy parameters of the k-anonymity server, both directions"),
    "kanon-accuracy": ("pipelines.kanon_accuracy", "accuracy of the k-anonymity server by simulation (Sec. 5)"),
    "measurement": ("pipelines.measurement", "on-device budgeting: attribution reports and noisy queries (Cookie Monster paper)"),
    "compare-policies": ("pipelines.compare_policies", "Cookie Monster, ARA-like and IPA-like side by side (Fig. 4)"),
    "evaluate": ("pipelines.evaluate", "reproduce the Cookie Monster evaluation and Appendix D bias detection"),
    "summary-client": ("pipelines.summary_client", "ARA and PAA clients: aggregatable reports (Ghazi et al. Alg. 2, 3)"),
    "event-level": ("pipelines.event_level", "ARA event-level reports with randomized response (Ghazi et al. Alg. 4, 8)"),
    "registrations": ("pipelines.registrations", "registration logs (header JSON) in, the reports browsers send out"),
    "interop": ("pipelines.interop", "Chrome's Attribution Reporting interop cases against this project's browser"),
    "attribution-e2e": ("pipelines.attribution_e2e", "the W3C Attribution API's end-to-end cases against this project's backend"),
    "collect-reports": ("pipelines.collect_reports", "aggregatable reports from a topic into the service's hourly batch layout"),
    "aggregate": ("pipelines.aggregate", "the Aggregation Service: noisy summary reports and a privacy-budget ledger"),
    "release": ("pipelines.release_submitted", "judge and publish a job submitted as a template, once it has finished"),
    "audit": ("pipelines.audit", "a black-box privacy audit of every mechanism: lower bounds on epsilon"),
    "generate": ("pipelines.generate", "synthetic input data"),
    "demo-report": ("pipelines.demo_report", "what `make demo` produced: the top buckets and one static HTML page"),
    "demo-stream": ("pipelines.demo_stream", "the streaming jobs live on a local Kafka broker (`make demo-stream`)"),
    "local-broker": ("pipelines.local_broker", "a local Kafka-protocol broker (tansu) in the foreground"),
    "kafka-broker": ("pipelines.kafka_broker", "Apache Kafka's own broker (KRaft, from Maven) in the foreground"),
    "noise-key": ("pipelines.noise_key", "make a noise key, or show the id of the key runs derive their noise from"),
    "flink": ("pipelines.flink.cli", "a local Flink cluster without Docker: up, status, jobs, stop, down"),
}


def usage() -> str:
    lines = ["usage: pm-beam <command> [options]   (each command has --help)", "", "commands:"]
    lines += [f"  {name:16} {summary}" for name, (_, summary) in COMMANDS.items()]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if not argv or argv[0] in ("-h", "--help"):
        print(usage())
        return 0
    command = COMMANDS.get(argv[0])
    if command is None:
        print(f"pm-beam: unknown command {argv[0]!r}\n{usage()}", file=sys.stderr)
        return 2
    return importlib.import_module(command[0]).main(argv[1:]) or 0


if __name__ == "__main__":
    sys.exit(main())
