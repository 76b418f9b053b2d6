#!/usr/bin/env bash
# Install mermaid-cli (@mermaid-js/mermaid-cli, pinned with every dependency
# in hack/mermaid/package-lock.json) into the labs state folder, for the
# test that renders every mermaid block of docs/ and the READMEs
# (go test ./internal/doccheck). Not needed for any lab.
#
#   scripts/build-mermaid-cli.sh     # ${LABS_STATE_DIR:-<repo>/.labs}/mermaid-cli/node_modules/.bin/mmdc
#
# It needs node and npm, and a Chromium for mermaid to render in: Debian's
# chromium package (as root, this script installs it with apt; otherwise it
# says what to install). npm runs with --ignore-scripts: puppeteer's
# install script would download a browser build of its own; Debian's is
# used instead (PUPPETEER_EXECUTABLE_PATH, read by the test).
# Idempotent: an installed mmdc of the pinned version is kept.
set -euo pipefail

repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
state_dir="${LABS_STATE_DIR:-${repo_root}/.labs}"
dest="${state_dir}/mermaid-cli"
want="$(sed -n 's/.*"@mermaid-js\/mermaid-cli": "\([^"]*\)".*/\1/p' "${repo_root}/hack/mermaid/package.json")"

die() {
	printf 'error: %s\n' "$*" >&2
	exit 1
}

if ! command -v chromium >/dev/null; then
	if [ "$(id -u)" -eq 0 ] && command -v apt-get >/dev/null; then
		echo "installing Debian's chromium (mermaid renders in it) ..."
		apt-get update -qq
		DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends chromium
	else
		die "no chromium: install Debian's (sudo apt-get install --no-install-recommends chromium)"
	fi
fi
if ! command -v npm >/dev/null; then
	if [ "$(id -u)" -eq 0 ] && command -v apt-get >/dev/null; then
		echo "installing Debian's nodejs and npm ..."
		apt-get update -qq
		DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends nodejs npm
	else
		die "no npm: install node and npm (Debian: sudo apt-get install nodejs npm)"
	fi
fi

# A state folder this script makes gets the labs' marker (internal/state).
if [ ! -e "${state_dir}" ]; then
	mkdir -p "${state_dir}"
	chmod 0700 "${state_dir}"
	: >"${state_dir}/.kubelet-labs-state"
fi

mmdc="${dest}/node_modules/.bin/mmdc"
if [ -x "${mmdc}" ] && [ "$("${mmdc}" --version 2>/dev/null)" = "${want}" ]; then
	echo "mermaid-cli ${want} already installed: ${mmdc}"
	exit 0
fi

echo "installing mermaid-cli ${want} into ${dest} ..."
rm -rf "${dest}"
mkdir -p "${dest}"
cp "${repo_root}/hack/mermaid/package.json" "${repo_root}/hack/mermaid/package-lock.json" "${dest}/"
(cd "${dest}" && PUPPETEER_SKIP_DOWNLOAD=1 npm ci --ignore-scripts --no-audit --no-fund --loglevel=error)
[ "$("${mmdc}" --version)" = "${want}" ] || die "${mmdc} does not report version ${want}"
echo "installed ${mmdc} (mermaid-cli ${want}; browser: $(command -v chromium))"
