#!/usr/bin/env bash
# Build crictl (sigs.k8s.io/cri-tools v1.34.0) into the labs state folder.
#
#   scripts/build-crictl.sh            # builds ${LABS_STATE_DIR:-<repo>/.labs}/bin/crictl if missing
#   scripts/build-crictl.sh --force    # rebuilds it
#
# Idempotent: an existing binary that reports the pinned version is kept.
# Only the Go module proxy is needed (scripts/go-tool-lib.sh). cri-tools has
# no checksum-database entry on the proxy, hence --nosumdb; its own go.sum
# still pins every dependency.
set -euo pipefail

# shellcheck source=scripts/go-tool-lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/go-tool-lib.sh"

build_go_tool crictl sigs.k8s.io/cri-tools v1.34.0 ./cmd/crictl \
	--nosumdb --version-var pkg/version.Version -- "$@"
