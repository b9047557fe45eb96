#!/usr/bin/env bash
# Makes this machine ready to build, test and run txfence: the Go modules,
# the pinned anvil, the PostgreSQL and Redis server binaries, and with
# --browser (make test) Chromium for the operator console's browser test.
# It installs what is missing (Debian packages when run as root, anvil from
# its npm package) and stops with a clear message for anything it cannot
# get. Servers themselves are started by whoever needs them: the test
# helpers (testinfra/pgtest, testinfra/redistest) and the local stack (devstack).
set -euo pipefail

log() { echo "setup: $*" >&2; }
die() { log "error: $*"; exit 1; }

repo_root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$repo_root"

command -v go >/dev/null 2>&1 || die "go not found on PATH; install Go 1.26 or later"

browser=false
case "${1:-}" in
"") ;;
--browser) browser=true ;;
*) die "unknown argument ${1}; usage: setup.sh [--browser]" ;;
esac

apt_updated=
apt_install() {
	if ! command -v apt-get >/dev/null 2>&1 || [[ $(id -u) -ne 0 ]]; then
		die "$1 is missing and cannot be installed here (needs root and apt-get); install the Debian package(s): $*"
	fi
	if [[ -z "$apt_updated" ]]; then
		log "apt-get update"
		DEBIAN_FRONTEND=noninteractive apt-get update -qq >&2 || die "apt-get update failed"
		apt_updated=1
	fi
	log "installing $*"
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "$@" >&2 ||
		die "apt-get install $* failed"
}

# PostgreSQL: the server binaries (initdb, pg_ctl) for throwaway clusters
# and pg_dump for the committed schema dumps.
have_pg_server() {
	command -v initdb >/dev/null 2>&1 || compgen -G '/usr/lib/postgresql/*/bin/initdb' >/dev/null
}
if ! have_pg_server || ! command -v pg_dump >/dev/null 2>&1; then
	apt_install postgresql postgresql-client
fi

# Redis: the server binary, for throwaway servers when none is running.
command -v redis-server >/dev/null 2>&1 || apt_install redis-server

# Chromium: the headless browser the operator console's tests drive
# (gateway/console, through chromedp), at the path they look for. Only the
# tests need it; make run does not.
if $browser && [[ ! -x /usr/bin/chromium ]]; then
	apt_install chromium
fi

# anvil, pinned, from its npm package (needs node and npm).
if ! command -v npm >/dev/null 2>&1; then
	apt_install nodejs npm
fi
anvil=$(deploy/scripts/install-anvil.sh | tail -n 1)
log "anvil: $anvil"

# Only the modules the build and tests need: `go mod download` would also
# fetch every module in go-ethereum's graph, some of which the module proxy
# does not serve.
log "fetching the Go modules the build needs"
go list -deps -test $(go list -m -f '{{.Path}}/...') >/dev/null || die "fetching Go modules failed"
log "ready"
