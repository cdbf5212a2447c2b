"""The Dataflow recipes (deploy/dataflow/), checked without a cloud account: the templates' metadata against the
pipelines' own parsers (names, required options, help, validation regexes), the committed files against their
generator, the images against the installed Beam, the launcher's command per template, and the scripts' gcloud
and docker calls (recorded by stand-ins, not run)."""
from __future__ import annotations

import argparse
import importlib
import importlib.metadata
import json
import re

import apache_beam
import pytest

from pipelines.__main__ import COMMANDS
from tests.deploy.recipes import DATAFLOW, ROOT, bash_syntax_error, beam_pipelines, load, run_recorded

make_metadata = load(DATAFLOW / "make_metadata.py")
launch = load(DATAFLOW / "launch.py")
TEMPLATES = {template.name: template for template in make_metadata.TEMPLATES}

# The options no template offers (deploy/dataflow/README.md, "Template by template"), written out here so that
# leaving out one more is a visible change: the options only the local runner reads.
LOCAL_RUNNER_ONLY = {"--state-store", "--snapshot-seconds", "--job-id", "--progress-seconds", "--metrics-port"}
LEFT_OUT = {
    ("kanon",): LOCAL_RUNNER_ONLY,
    ("measurement",): LOCAL_RUNNER_ONLY,
    ("summary-client", "ara"): LOCAL_RUNNER_ONLY,
    ("summary-client", "paa"): LOCAL_RUNNER_ONLY,
    ("event-level",): LOCAL_RUNNER_ONLY,
    ("aggregate",): {"--local-test"},  # nothing private: a local tool only
    ("registrations",): LOCAL_RUNNER_ONLY | {"--streaming", "--allowed-lateness-seconds", "--output-topic"},
}
# Optional on the command line, required on Dataflow, where the default would be wrong: the ledger (a sqlite file
# on a worker's disk would lose the budget) and the job id (a retried launch must not charge twice).
REQUIRED_ON_DATAFLOW = {("aggregate",): {"--ledger", "--job-id"}}
# The options the Flex Template launcher adds to the parameters (Dataflow's "Troubleshoot Flex Templates", "Failed
# to read the job file"), besides the locations it stages to, and the worker image launch.py adds.
LAUNCHER_OPTIONS = ["--runner=DataflowRunner", "--project=p", "--region=europe-west1", "--job_name=j",
                    "--template_location=gs://b/t.json", "--staging_location=gs://b/s", "--temp_location=gs://b/t",
                    "--sdk_container_image=europe-west1-docker.pkg.dev/p/r/pm-beam-worker:1"]
POSIX_INCOMPATIBLE = re.compile(r"\\[dDwWsSbB]|\(\?|[*+?}]\?")  # Python-only regex syntax egrep does not read
SETTINGS = {"PROJECT": "my-project", "REGION": "europe-west1", "BUCKET": "my-bucket", "REPOSITORY": "pm-beam"}


def parameters(template) -> dict[str, dict]:
    return {parameter["name"]: parameter for parameter in json.loads(template.path.read_text())["parameters"]}


def actions(template) -> dict[str, argparse.Action]:
    """The template's parser's options by their long spelling, without --help."""
    return {make_metadata.option_of(action): action for action in make_metadata.options(template.pipeline.parser())}


def example_arguments(template, option: str | None = None) -> list[str]:
    """The template's required parameters as the launcher passes them, each with a value its regex accepts, and
    ``option`` (a parameter) too."""
    chosen = actions(template)
    return [f"--{name}={make_metadata.pattern(template, chosen[f'--{name}']).example}"
            for name, parameter in parameters(template).items()
            if not parameter["isOptional"] or f"--{name}" == option]


def test_the_committed_metadata_is_the_generators():
    written = {path.stem for path in make_metadata.TEMPLATE_DIR.glob("*.json")}
    assert written == set(TEMPLATES), "run: python deploy/dataflow/make_metadata.py"
    for template in TEMPLATES.values():
        assert template.path.read_text() == make_metadata.render(template), (
            f"{template.path.name} is stale: run python deploy/dataflow/make_metadata.py")


def test_each_pipeline_has_a_batch_template_and_the_streaming_ones_a_streaming_one():
    assert set(TEMPLATES) == {
        "kanon", "kanon-streaming", "measurement", "measurement-streaming", "summary-client-ara",
        "summary-client-ara-streaming", "summary-client-paa", "summary-client-paa-streaming", "event-level",
        "event-level-streaming", "registrations", "aggregate"}
    for name, template in TEMPLATES.items():
        assert json.loads(template.path.read_text())["streaming"] is name.endswith("-streaming")


def test_every_beam_pipeline_has_templates_or_a_reason_not_to():
    templated = {template.pipeline.command[0] for template in TEMPLATES.values()}
    assert templated.isdisjoint(make_metadata.NOT_TEMPLATED)
    assert templated | set(make_metadata.NOT_TEMPLATED) == beam_pipelines()
    assert set(make_metadata.NOT_TEMPLATED) == {"compare-policies"}
    # collect-reports reads a topic with its own consumer and writes files itself: not a Beam job to launch
    assert not importlib.import_module(COMMANDS["collect-reports"][0]).build_parser().beam_options


@pytest.mark.parametrize("name", TEMPLATES)
def test_the_parameters_are_the_options_of_the_pipelines_parser(name):
    template = TEMPLATES[name]
    command = template.pipeline.command
    options, offered = actions(template), parameters(template)
    assert {f"--{parameter}" for parameter in offered} == set(options) - LEFT_OUT[command]
    for option, action in options.items():
        if action.required:
            assert not offered[option.removeprefix("--")]["isOptional"], option
    for parameter in offered.values():
        action = options[f"--{parameter['name']}"]
        assert parameter["helpText"] == action.help
        assert parameter["label"]
        required_here = f"--{parameter['name']}" in REQUIRED_ON_DATAFLOW.get(command, set())
        assert parameter["isOptional"] is not (action.required or required_here), parameter["name"]


@pytest.mark.parametrize("name", TEMPLATES)
def test_each_regex_accepts_what_the_command_line_takes_and_refuses_what_it_does_not(name):
    template = TEMPLATES[name]
    options = actions(template)
    parser = template.pipeline.parser()
    for parameter in parameters(template).values():
        option = f"--{parameter['name']}"
        [regex] = parameter["regexes"]
        assert not POSIX_INCOMPATIBLE.search(regex), regex
        pattern = make_metadata.pattern(template, options[option])
        assert re.fullmatch(regex, pattern.example), (option, regex)
        assert not re.fullmatch(regex, ""), option
        if pattern != make_metadata.TEXT:
            assert not re.fullmatch(regex, "x"), option
        default = options[option].default
        if option in REQUIRED_ON_DATAFLOW.get(template.pipeline.command, set()):
            assert default is None or not re.fullmatch(regex, str(default)), option
        elif default not in (None, []):
            text = str(default).lower() if isinstance(default, bool) else str(default)  # a flag: =true|false
            assert re.fullmatch(regex, text), (option, default, regex)
        # the launcher's command line: the parameters as --NAME=VALUE, and the options the launcher adds
        parser.parse_known_args([*example_arguments(template, option), *LAUNCHER_OPTIONS])


def test_streaming_templates_read_topics_and_batch_templates_files():
    for template in TEMPLATES.values():
        offered = parameters(template)
        for option in template.pipeline.inputs:
            [regex] = offered[option.removeprefix("--")]["regexes"]
            assert bool(re.fullmatch(regex, "kafka://broker:9092/joins")) is template.streaming, (template.name, option)
            assert bool(re.fullmatch(regex, "gs://bucket/joins/*.avro")) is not template.streaming


def test_the_images_are_built_on_the_installed_beam_and_the_wheel():
    worker = (DATAFLOW / "Dockerfile.worker").read_text()
    assert f"ARG BEAM_VERSION={apache_beam.__version__}\n" in worker
    python = re.search(r"^FROM apache/beam_python(\d)\.(\d+)_sdk:\$\{BEAM_VERSION\}$", worker, re.MULTILINE)
    assert python is not None
    wheel = f"privacy_measurement_beam-{importlib.metadata.version('privacy-measurement-beam')}-py3-none-any.whl"
    assert f"ARG WHEEL={wheel}\n" in worker
    assert '"/tmp/pm-beam/${WHEEL}[gcp,kafka,postgres]" -c /tmp/pm-beam/constraints.txt' in worker
    launcher = (DATAFLOW / "Dockerfile.launcher").read_text()
    # the launcher binary of the worker image's Python
    assert f"/python{''.join(python.groups())}-template-launcher-base:" in launcher
    assert "\nFROM ${WORKER_IMAGE}\n" in launcher
    assert "FLEX_TEMPLATE_PYTHON_PY_FILE=/template/launch.py" in launcher
    assert "COPY launch.py /template/launch.py\n" in launcher


def test_the_launcher_runs_the_command_of_each_template_on_the_worker_image():
    listed = re.search(r"^TEMPLATES=\(\n(.*?)\n\)$", (DATAFLOW / "build.sh").read_text(), re.MULTILINE | re.DOTALL)
    assert listed is not None
    commands = {line.strip().strip('"').split()[0]: tuple(line.strip().strip('"').split()[1:])
                for line in listed.group(1).splitlines()}
    assert commands == {name: template.pipeline.command for name, template in TEMPLATES.items()}
    for command in set(commands.values()):
        environment = {launch.COMMAND: " ".join(command), launch.WORKER_IMAGE: "registry/pm-beam-worker:1"}
        assert launch.launch_arguments(["--output=gs://b/o"], environment) == [
            *command, "--output=gs://b/o", "--sdk_container_image=registry/pm-beam-worker:1"]
        assert launch.launch_arguments(["--sdk_container_image=other"], environment) == [
            *command, "--sdk_container_image=other"]
        importlib.import_module(COMMANDS[command[0]][0])  # the module the launcher runs


def test_the_scripts_parse():
    for script in ("build.sh", "run.sh"):
        assert bash_syntax_error(DATAFLOW / script) == ""


def test_build_pushes_the_images_and_writes_every_template(tmp_path):
    done, calls = run_recorded(DATAFLOW / "build.sh", [], tmp_path, ("docker", "gcloud"), TAG="7", **SETTINGS)
    assert done.returncode == 0, done.stderr
    registry = "europe-west1-docker.pkg.dev/my-project/pm-beam"
    worker = f"{registry}/pm-beam-worker:7"
    assert ["docker", "build", "--platform", "linux/amd64", "-f", str(DATAFLOW / "Dockerfile.worker"), "-t", worker,
            str(ROOT)] in calls
    assert ["docker", "push", worker] in calls
    for name, template in TEMPLATES.items():
        launcher = f"{registry}/pm-beam-launcher-{'-'.join(template.pipeline.command)}:7"
        assert ["docker", "push", launcher] in calls
        assert ["docker", "build", "--platform", "linux/amd64", "-f", str(DATAFLOW / "Dockerfile.launcher"),
                "--build-arg", f"WORKER_IMAGE={worker}", "--build-arg",
                f"PM_BEAM_COMMAND={' '.join(template.pipeline.command)}", "-t", launcher, str(DATAFLOW)] in calls
        assert ["gcloud", "dataflow", "flex-template", "build", f"gs://my-bucket/templates/{name}.json", "--image",
                launcher, "--sdk-language", "PYTHON", "--metadata-file", str(template.path), "--project",
                "my-project"] in calls
    assert calls.index(["docker", "push", worker]) < min(index for index, call in enumerate(calls) if "-f" in call
                                                         and call[call.index("-f") + 1].endswith("Dockerfile.launcher"))


def test_build_needs_its_settings(tmp_path):
    done, calls = run_recorded(DATAFLOW / "build.sh", [], tmp_path, ("docker", "gcloud"),
                               **{**SETTINGS, "REPOSITORY": ""})
    assert done.returncode != 0 and "REPOSITORY" in done.stderr and calls == []


@pytest.mark.parametrize("name", ["kanon", "kanon-streaming", "aggregate"])
def test_run_starts_a_job_from_the_template(tmp_path, name):
    done, calls = run_recorded(DATAFLOW / "run.sh", [name, "--parameters", "output=gs://my-bucket/out"], tmp_path,
                               ("gcloud",), JOB_NAME="job-1", **SETTINGS)
    assert done.returncode == 0, done.stderr
    assert calls == [["gcloud", "dataflow", "flex-template", "run", "job-1", "--template-file-gcs-location",
                      f"gs://my-bucket/templates/{name}.json", "--project", "my-project", "--region", "europe-west1",
                      "--staging-location", "gs://my-bucket/staging", "--temp-location", "gs://my-bucket/tmp",
                      "--parameters", "output=gs://my-bucket/out"]]


def test_run_refuses_an_unknown_template(tmp_path):
    done, calls = run_recorded(DATAFLOW / "run.sh", ["collect-reports"], tmp_path, ("gcloud",), **SETTINGS)
    assert done.returncode == 2 and "no template named collect-reports" in done.stderr and calls == []
