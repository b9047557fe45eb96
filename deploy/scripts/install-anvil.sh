#!/usr/bin/env bash
# Installs the pinned anvil (Foundry's local EVM node) for tests and the
# local stack into <repo>/.tools/anvil/<version>/, from the npm package that
# ships the prebuilt binary, so every developer, CI and the tests run the
# same anvil without a separate download step. Idempotent: a working
# install is left alone. Prints the binary's path as the last line of
# stdout; progress goes to stderr.
set -euo pipefail

ANVIL_VERSION=1.7.1 # keep in step with testinfra/anvil.Version
ANVIL_PACKAGE=@foundry-rs/anvil-linux-amd64

log() { echo "install-anvil: $*" >&2; }
die() { log "error: $*"; exit 1; }

repo_root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
dir="$repo_root/.tools/anvil/$ANVIL_VERSION"
bin="$dir/node_modules/$ANVIL_PACKAGE/bin/anvil"

# The npm package holds a linux/amd64 binary only; anything else would
# install fine and then fail obscurely at run time.
os=$(uname -s)
arch=$(uname -m)
if [[ "$os" != Linux || ( "$arch" != x86_64 && "$arch" != amd64 ) ]]; then
	die "$ANVIL_PACKAGE runs on linux/amd64 only; this machine is $os/$arch. Install anvil $ANVIL_VERSION another way and set TXFENCE_ANVIL to its path."
fi

works() { [[ -x "$bin" ]] && "$bin" --version >/dev/null 2>&1; }

if works; then
	log "anvil $ANVIL_VERSION already installed"
	echo "$bin"
	exit 0
fi

for tool in node npm; do
	command -v "$tool" >/dev/null 2>&1 ||
		die "$tool not found; install nodejs and npm from Debian packages: apt-get install -y nodejs npm"
done

# Test binaries of several packages may call this at the same moment
# (go test runs packages in parallel); two npm installs into one prefix
# would trip over each other, so the second waits and then finds the first
# one's work.
mkdir -p "$dir"
exec 9>"$dir.lock"
if command -v flock >/dev/null 2>&1; then
	flock 9
	if works; then
		log "anvil $ANVIL_VERSION installed by a concurrent run"
		echo "$bin"
		exit 0
	fi
fi

log "installing $ANVIL_PACKAGE@$ANVIL_VERSION into $dir"
if ! npm install --no-save --no-audit --no-fund --prefix "$dir" "$ANVIL_PACKAGE@$ANVIL_VERSION" >&2; then
	die "npm install of $ANVIL_PACKAGE@$ANVIL_VERSION failed (see npm's output above)"
fi
[[ -f "$bin" ]] || die "npm install succeeded but $bin is missing; has the package's layout changed?"
# The package declares anvil as its bin, so npm marks it executable; this
# only turns an odd tarball's "permission denied" into a working install.
[[ -x "$bin" ]] || chmod +x "$bin"
works || die "$bin does not run: $("$bin" --version 2>&1 | head -n 5)"
log "installed $("$bin" --version 2>/dev/null | head -n 1)"
echo "$bin"
