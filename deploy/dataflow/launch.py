"""The program a Flex Template launcher image runs (its ``FLEX_TEMPLATE_PYTHON_PY_FILE``): ``pm-beam`` with the
command the image was built for and the template's parameters.

The launcher runs ``python launch.py --NAME=VALUE ...``: the template's parameters and the pipeline options it adds
itself (``--runner``, ``--project``, ``--region``, ``--job_name``, ``--template_location``, ...). A template cannot
set environment variables of its own, so the image carries the command (``PM_BEAM_COMMAND``, for example
``summary-client ara``, set by Dockerfile.launcher's build argument) and the SDK worker image its jobs run on
(``PM_BEAM_WORKER_IMAGE``), which becomes ``--sdk_container_image`` unless a parameter names another.
"""
from __future__ import annotations

import os
import sys
from collections.abc import Mapping

from pipelines.__main__ import main

COMMAND = "PM_BEAM_COMMAND"
WORKER_IMAGE = "PM_BEAM_WORKER_IMAGE"
WORKER_IMAGE_OPTION = "--sdk_container_image"


def launch_arguments(parameters: list[str], environment: Mapping[str, str]) -> list[str]:
    """``pm-beam``'s arguments: the image's command, the parameters, and the worker image when none is named."""
    arguments = [*environment[COMMAND].split(), *parameters]
    image = environment.get(WORKER_IMAGE)
    if image and not any(parameter.split("=", 1)[0] == WORKER_IMAGE_OPTION for parameter in parameters):
        arguments.append(f"{WORKER_IMAGE_OPTION}={image}")
    return arguments


if __name__ == "__main__":
    sys.exit(main(launch_arguments(sys.argv[1:], os.environ)))
