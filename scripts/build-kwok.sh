#!/usr/bin/env bash
# Build KWOK's controller (sigs.k8s.io/kwok v0.7.0, cmd/kwok) into the labs
# state folder, for lab 18's benchmark (fleet mode beside KWOK).
#
#   scripts/build-kwok.sh            # builds ${LABS_STATE_DIR:-<repo>/.labs}/bin/kwok if missing
#   scripts/build-kwok.sh --force    # rebuilds it
#
# Idempotent: an existing binary that reports the pinned version is kept.
# Only the Go module proxy is needed (scripts/go-tool-lib.sh).
set -euo pipefail

# shellcheck source=scripts/go-tool-lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/go-tool-lib.sh"

build_go_tool kwok sigs.k8s.io/kwok v0.7.0 ./cmd/kwok -- "$@"
