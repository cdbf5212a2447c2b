#!/usr/bin/env bash
# Starts a Dataflow job from a template build.sh wrote (deploy/dataflow/README.md):
#
#   PROJECT=my-project REGION=europe-west1 BUCKET=my-bucket deploy/dataflow/run.sh NAME \
#       --parameters input=gs://my-bucket/joins/*.avro,output=gs://my-bucket/kanon/
#
# NAME is a template (templates/NAME.json: kanon, kanon-streaming, aggregate, ...). Every later argument goes to
# `gcloud dataflow flex-template run` as it is: --parameters (the pipeline's options, by the names the template
# gives them), --max-workers, --update and --transform-name-mappings for a streaming job's new version. JOB_NAME
# names the job (default pm-beam-NAME-TIME); an update names the running job. The workers run the image build.sh
# built the template with. (REPOSITORY is build.sh's alone: the template names its images.)
set -euo pipefail

PROJECT="${PROJECT:?set PROJECT, the Google Cloud project}"
REGION="${REGION:?set REGION, the region of the job}"
BUCKET="${BUCKET:?set BUCKET, the Cloud Storage bucket build.sh wrote the templates to (a name, without gs://)}"

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
NAME="${1:?usage: run.sh NAME [gcloud dataflow flex-template run flags...]}"
shift
if [[ ! -f "$HERE/templates/$NAME.json" ]]; then
  echo "run.sh: no template named $NAME in $HERE/templates/" >&2
  exit 2
fi

gcloud dataflow flex-template run "${JOB_NAME:-pm-beam-$NAME-$(date +%Y%m%d-%H%M%S)}" \
  --template-file-gcs-location "gs://$BUCKET/templates/$NAME.json" \
  --project "$PROJECT" \
  --region "$REGION" \
  --staging-location "gs://$BUCKET/staging" \
  --temp-location "gs://$BUCKET/tmp" \
  "$@"
