#!/usr/bin/env bash
# Builds and pushes the SDK worker image and one Flex Template launcher image per pipeline, then writes each
# template's spec file to gs://$BUCKET/templates/NAME.json (deploy/dataflow/README.md). After `make dist constraints`:
#
#   PROJECT=my-project REGION=europe-west1 BUCKET=my-bucket REPOSITORY=pm-beam deploy/dataflow/build.sh
#
# TAG (default: the time) tags the images; a template's spec file names its launcher image by that tag.
set -euo pipefail

PROJECT="${PROJECT:?set PROJECT, the Google Cloud project}"
REGION="${REGION:?set REGION, the region of the Artifact Registry repository and of the jobs}"
BUCKET="${BUCKET:?set BUCKET, the Cloud Storage bucket for the templates (a name, without gs://)}"
REPOSITORY="${REPOSITORY:?set REPOSITORY, an Artifact Registry Docker repository in REGION}"
TAG="${TAG:-$(date +%Y%m%d-%H%M%S)}"

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/../.." && pwd)"
REGISTRY="$REGION-docker.pkg.dev/$PROJECT/$REPOSITORY"
WORKER_IMAGE="$REGISTRY/pm-beam-worker:$TAG"

# Each template (templates/NAME.json) and the pm-beam command its launcher image runs, as make_metadata.py's
# TEMPLATES has them (tests/deploy checks that the two agree).
TEMPLATES=(
  "kanon kanon"
  "kanon-streaming kanon"
  "measurement measurement"
  "measurement-streaming measurement"
  "summary-client-ara summary-client ara"
  "summary-client-ara-streaming summary-client ara"
  "summary-client-paa summary-client paa"
  "summary-client-paa-streaming summary-client paa"
  "event-level event-level"
  "event-level-streaming event-level"
  "registrations registrations"
  "aggregate aggregate"
)

export DOCKER_BUILDKIT=1  # reads Dockerfile.*.dockerignore, the build contexts' lists
gcloud auth configure-docker "$REGION-docker.pkg.dev" --quiet

# Dataflow's workers and launcher VMs are x86-64 machines, whatever machine builds the images.
docker build --platform linux/amd64 -f "$HERE/Dockerfile.worker" -t "$WORKER_IMAGE" "$ROOT"
docker push "$WORKER_IMAGE"

built=" "
for entry in "${TEMPLATES[@]}"; do
  read -r name command <<<"$entry"
  launcher="$REGISTRY/pm-beam-launcher-${command// /-}:$TAG"
  if [[ "$built" != *" $launcher "* ]]; then
    docker build --platform linux/amd64 -f "$HERE/Dockerfile.launcher" --build-arg "WORKER_IMAGE=$WORKER_IMAGE" \
      --build-arg "PM_BEAM_COMMAND=$command" -t "$launcher" "$HERE"
    docker push "$launcher"
    built+="$launcher "
  fi
  gcloud dataflow flex-template build "gs://$BUCKET/templates/$name.json" \
    --image "$launcher" \
    --sdk-language PYTHON \
    --metadata-file "$HERE/templates/$name.json" \
    --project "$PROJECT"
done
echo "templates written to gs://$BUCKET/templates/; the jobs run on $WORKER_IMAGE"
