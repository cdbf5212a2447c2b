"""Tests of the deployment recipes (deploy/): checked here without a cloud account, a cluster or a Docker daemon."""
