#!/usr/bin/env bash
# Builds the pinned HashiCorp Vault for the signer's tests (a real
# `vault server -dev` with transit and KV v2) into
# <repo>/.tools/vault/<version>/vault. Vault ships no Debian or npm package,
# so it is built from the Go module proxy: a wrapper module in
# <repo>/.tools/vault-build requires github.com/hashicorp/vault at the pinned
# tag with exactly the dependency versions of Vault's own go.mod and its
# non-local replace directives. Vault's local replaces (./api, ./sdk, ...)
# point into its repository, which a module zip does not contain: each is
# mapped to the published module at the version Vault's go.mod requires,
# except sdk, which no published version matches (see prepare_sdk). After
# the build the script checks that every module Vault's go.mod names
# resolved to exactly that version (or to its replacement).
#
# Idempotent: a working binary is left alone. The first build takes about
# ten minutes on two cores; later runs reuse the Go build cache. Prints the
# binary's path as the last line of stdout; progress goes to stderr.
# Never used in production: signerd talks to an operator's Vault.
set -euo pipefail

VAULT_VERSION=1.21.4 # keep in step with testinfra/vaulttest.Version
# The tag's commit time, as the proxy reports it; Vault reads its build date
# (plugins are told it) and refuses nothing without it, but an empty date
# shows as such in `vault status`.
VAULT_BUILD_DATE=2026-03-05T01:40:05Z

# github.com/hashicorp/vault/sdk, which Vault replaces with its own ./sdk,
# is the one module no published version matches. v1.21.4's go.mod
# requires sdk v0.21.0, but the release/1.21.x ./sdk that v1.21.4 was
# built from is sdk v0.20.0 (the 1.21.0 release, October 2025) plus
# backports, which no tag and no pseudo-version on the proxy captures:
#   - sdk v0.20.0 lacks the backported observation methods
#     (framework.Backend.TryRecordObservationWithRequest);
#   - sdk v0.21.0 (January 2026, from main) has them, but also main's
#     three-argument framework.Backend.ActivationFunc, which the branch
#     did not take (vault/identity_store.go), and lacks the backported
#     keysutil.LockManager.RestorePolicy that returns the restored key's
#     name (builtin/logical/transit/path_restore.go);
#   - sdk v0.24.0 (after v1.21.4) has RestorePolicy, but also main's new
#     certificate counter and SystemView methods, which the branch lacks.
# So the build uses sdk $SDK_BASE with two changes, each checked in
# prepare_sdk: ActivationFunc's two-argument signature restored (one line;
# nothing in the sdk calls it), and helper/keysutil/lock_manager.go taken
# from sdk $SDK_RESTORE_FROM, where it differs from $SDK_BASE's in
# RestorePolicy only.
SDK_BASE=v0.21.0
SDK_RESTORE_FROM=v0.24.0

log() { echo "build-vault: $*" >&2; }
die() { log "error: $*"; exit 1; }

repo_root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
tools="$repo_root/.tools"
out_dir="$tools/vault/$VAULT_VERSION"
bin="$out_dir/vault"
build_dir="$tools/vault-build"

works() { [[ -x "$bin" ]] && "$bin" version 2>/dev/null | grep -q "^Vault v$VAULT_VERSION\b"; }

if works; then
	log "vault $VAULT_VERSION already built"
	echo "$bin"
	exit 0
fi

command -v go >/dev/null 2>&1 || die "go not found on PATH; install Go 1.25 or later"

# Test binaries of several packages may call this at the same moment (go
# test runs packages in parallel); the second waits for the first build and
# then finds its binary.
mkdir -p "$out_dir" "$build_dir"
exec 9>"$out_dir.lock"
if command -v flock >/dev/null 2>&1; then
	if ! flock -n 9; then
		log "another build of vault $VAULT_VERSION is running; waiting for it"
		flock 9
	fi
	if works; then
		log "vault $VAULT_VERSION built by a concurrent run"
		echo "$bin"
		exit 0
	fi
fi

# The wrapper module lives inside this repository, whose go.work does not
# list it; toolchain switching would download a Go the machine does not
# have. Neither is wanted here.
export GOWORK=off GOTOOLCHAIN=local GOFLAGS=-buildvcs=false CGO_ENABLED=0

log "reading github.com/hashicorp/vault@v$VAULT_VERSION's go.mod from the module proxy"
dl=$(go mod download -json "github.com/hashicorp/vault@v$VAULT_VERSION") ||
	die "go mod download github.com/hashicorp/vault@v$VAULT_VERSION failed: $dl"
vault_mod=$(sed -n 's/^[[:space:]]*"GoMod": "\(.*\)",\{0,1\}$/\1/p' <<<"$dl")
[[ -f "$vault_mod" ]] || die "go mod download printed no go.mod path: $dl"

# The requirements (path version), from both the single-line and the block
# form, comments dropped.
requires=$(awk '
	/^require[[:space:]]*\(/ { inblock = 1; next }
	inblock && /^\)/ { inblock = 0; next }
	inblock { sub(/\/\/.*/, ""); if (NF >= 2) print $1, $2; next }
	/^require[[:space:]]+[^(]/ { sub(/\/\/.*/, ""); print $2, $3 }
' "$vault_mod")
[[ -n "$requires" ]] || die "no requirements found in $vault_mod"
go_directive=$(awk '$1 == "go" { print $2; exit }' "$vault_mod")

# replace lines (single-line form: Vault uses no replace block; refuse one
# rather than silently drop it).
if grep -q '^replace[[:space:]]*($' "$vault_mod"; then
	die "$vault_mod has a replace block, which this script does not parse; extend it"
fi
# sdk_dir downloads sdk version $1 and prints its module cache directory.
sdk_dir() {
	local out dir
	out=$(go mod download -json "github.com/hashicorp/vault/sdk@$1") ||
		die "go mod download github.com/hashicorp/vault/sdk@$1 failed: $out"
	dir=$(sed -n 's/^[[:space:]]*"Dir": "\(.*\)",\{0,1\}$/\1/p' <<<"$out")
	[[ -d "$dir" ]] || die "go mod download printed no directory for sdk $1: $out"
	echo "$dir"
}

# prepare_sdk writes $build_dir/sdk: the release branch's sdk, rebuilt
# from published versions as the comment on SDK_BASE explains.
prepare_sdk() {
	local src restore dst=$build_dir/sdk
	src=$(sdk_dir "$SDK_BASE")
	restore=$(sdk_dir "$SDK_RESTORE_FROM")
	rm -rf "$dst"
	cp -R "$src" "$dst"
	chmod -R u+w "$dst" # the module cache is read-only
	local f=$dst/framework/backend.go
	local three='ActivationFunc func(context.Context, *logical.Request, string) error'
	local two='ActivationFunc func(context.Context, *logical.Request) error'
	[[ $(grep -cF "$three" "$f") == 1 ]] || die "$f no longer declares '$three'; revisit prepare_sdk"
	sed -i "s/ActivationFunc func(context.Context, \*logical.Request, string) error/$two/" "$f"
	[[ $(grep -cF "$two" "$f") == 1 && $(grep -cF "$three" "$f") == 0 ]] || die "patching $f failed"
	if grep -rq --include='*.go' 'ActivationFunc(' "$dst"; then
		die "the sdk calls ActivationFunc itself; the one-line patch is no longer enough"
	fi

	local lm=helper/keysutil/lock_manager.go
	# Outside RestorePolicy the two files must be identical: compare them
	# with that function cut out.
	local cut='/^func \(lm \*LockManager\) RestorePolicy\(/,/^}/d'
	if ! cmp -s <(sed -E "$cut" "$src/$lm") <(sed -E "$cut" "$restore/$lm"); then
		die "$lm of sdk $SDK_BASE and $SDK_RESTORE_FROM differ outside RestorePolicy; revisit prepare_sdk"
	fi
	cp "$restore/$lm" "$dst/$lm"
	grep -q '^func (lm \*LockManager) RestorePolicy(.*) (string, error) {$' "$dst/$lm" ||
		die "$lm of sdk $SDK_RESTORE_FROM has no RestorePolicy returning (string, error); revisit prepare_sdk"
}

replaces=""
while read -r line; do
	# replace OLD [OLDV] => NEW [NEWV]
	left=${line#replace }
	left=${left%%=>*}
	right=${line#*=> }
	old_path=$(awk '{ print $1 }' <<<"$left")
	if [[ "$old_path" == github.com/hashicorp/vault/sdk ]]; then
		prepare_sdk
		replaces+="replace $old_path => ./sdk"$'\n'
		log "local replace $old_path => $right mapped to $old_path $SDK_BASE with two release-branch changes, in $build_dir/sdk"
	elif [[ "$right" == ./* || "$right" == ../* ]]; then
		# A directory of Vault's repository: use the published module at
		# the version Vault's go.mod requires.
		v=$(awk -v p="$old_path" '$1 == p { print $2; exit }' <<<"$requires")
		[[ -n "$v" ]] || die "local replace of $old_path, which Vault's go.mod does not require at any version; map it by hand"
		replaces+="replace $old_path => $old_path $v"$'\n'
		log "local replace $old_path => $right mapped to the published $old_path $v"
	else
		replaces+="$line"$'\n'
	fi
done < <(grep '^replace[[:space:]]' "$vault_mod")

log "writing the wrapper module in $build_dir"
{
	echo "// Generated by deploy/scripts/build-vault.sh from github.com/hashicorp/vault@v$VAULT_VERSION's go.mod."
	echo "module txfence.local/vault-build"
	echo
	echo "go $go_directive"
	echo
	echo "require github.com/hashicorp/vault v$VAULT_VERSION"
	echo
	echo "require ("
	while read -r p v; do echo "	$p $v"; done <<<"$requires"
	echo ")"
	echo
	printf '%s' "$replaces"
} >"$build_dir/go.mod.new"
# Keep go.sum across runs (a failed build resumes without re-verifying
# every module); start it afresh when the module changed.
if ! cmp -s "$build_dir/go.mod.new" "$build_dir/go.mod" 2>/dev/null; then
	rm -f "$build_dir/go.sum"
fi
mv "$build_dir/go.mod.new" "$build_dir/go.mod"
cd "$build_dir"

start=$(date +%s)
log "building github.com/hashicorp/vault v$VAULT_VERSION (about ten minutes the first time)"
# -mod=mod records the checksums of what the build needs in go.sum (each
# checked against the checksum database); the version check below catches
# any requirement it might have raised.
if ! go build -mod=mod -trimpath -tags vault \
	-ldflags "-s -w -X github.com/hashicorp/vault/version.GitCommit=v$VAULT_VERSION -X github.com/hashicorp/vault/version.BuildDate=$VAULT_BUILD_DATE" \
	-o "$bin.tmp" github.com/hashicorp/vault >&2; then
	rm -f "$bin.tmp"
	die "go build of github.com/hashicorp/vault v$VAULT_VERSION failed (see the compiler's output above)"
fi
log "built in $(($(date +%s) - start)) s"

# Exactly Vault's versions: every module its go.mod requires must have
# resolved to the required version (or to the target of its replace).
# A directory replacement (the patched sdk) resolves to its directory.
resolved=$(go list -mod=mod -m -f '{{.Path}} {{if .Replace}}{{or .Replace.Version .Replace.Path}}{{else}}{{.Version}}{{end}}' all)
mismatches=""
while read -r p v; do
	want=$v
	target=$(awk -v p="$p" '$1 == "replace" && $2 == p && $3 == "=>" && NF == 4 { print $4; exit }
		$1 == "replace" && $2 == p && $3 == "=>" && NF == 5 { print $5; exit }
		$1 == "replace" && $2 == p && $3 == v && $4 == "=>" && NF == 6 { print $6; exit }' v="$v" go.mod)
	[[ -n "$target" ]] && want=$target
	got=$(awk -v p="$p" '$1 == p { print $2; exit }' <<<"$resolved")
	if [[ "$got" != "$want" ]]; then
		mismatches+="  $p: Vault requires $want, the build resolved ${got:-nothing}"$'\n'
	fi
done <<<"$requires"
if [[ -n "$mismatches" ]]; then
	rm -f "$bin.tmp"
	die "the build did not use Vault's exact dependency versions:"$'\n'"$mismatches"
fi

mv "$bin.tmp" "$bin"
works || die "$bin does not run: $("$bin" version 2>&1 | head -n 5)"
log "built $("$bin" version 2>/dev/null | head -n 1)"
echo "$bin"
