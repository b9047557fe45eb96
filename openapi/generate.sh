#!/usr/bin/env bash
# Regenerates the Go code of the openapi module from its specs with
# oapi-codegen, the version pinned as a tool in openapi/go.mod.
#
#   openapi/generate.sh          rewrite every *.gen.go from the specs
#   openapi/generate.sh --check  generate into a temporary directory and
#                                fail, showing the diff, when a committed
#                                *.gen.go differs from it (or is missing or
#                                left over)
#
# Each package directory holds its oapi-codegen.yaml; the table below says
# which spec it is generated from. Works from any directory.
set -euo pipefail

# package directory : spec it is generated from
packages=(
	components:components.yaml
	gatewayapi:gateway.yaml
	txmanagerapi:txmanager.yaml
	signerapi:signer.yaml
	mevrouterapi:mevrouter.yaml
	ledgerapi:ledger.yaml
)

usage() {
	echo "usage: $0 [--check]" >&2
	exit 2
}

check=false
case $# in
0) ;;
1) [[ $1 == --check ]] || usage; check=true ;;
*) usage ;;
esac

root=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
cd "$root"

# go tool -n builds the pinned oapi-codegen (or finds it in the build cache)
# and prints its path, so that it can also run outside the module's tree.
codegen=$(go tool -n oapi-codegen)

# Generate into a copy of the specs and configurations first, so that a
# failing run leaves the committed files alone and --check compares
# against exactly what a rewrite would produce.
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cp ./*.yaml "$tmp/"
for entry in "${packages[@]}"; do
	pkg=${entry%%:*}
	spec=${entry#*:}
	mkdir -p "$tmp/$pkg"
	cp "$pkg/oapi-codegen.yaml" "$tmp/$pkg/"
	(cd "$tmp/$pkg" && "$codegen" -config oapi-codegen.yaml "../$spec") ||
		{ echo "generate.sh: oapi-codegen failed for $pkg from $spec" >&2; exit 1; }
done

if ! $check; then
	for entry in "${packages[@]}"; do
		pkg=${entry%%:*}
		rm -f "$pkg"/*.gen.go
		cp "$tmp/$pkg"/*.gen.go "$pkg/"
	done
	exit 0
fi

stale=0
for entry in "${packages[@]}"; do
	pkg=${entry%%:*}
	# Compare the sets of generated files as well as their contents, so a
	# leftover or missing *.gen.go counts too.
	if ! diff -u --label "committed $pkg/" --label "generated $pkg/" \
		<(cd "$root/$pkg" && ls -1 -- *.gen.go 2>/dev/null || true) \
		<(cd "$tmp/$pkg" && ls -1 -- *.gen.go 2>/dev/null || true) >&2; then
		stale=1
		continue
	fi
	for f in "$tmp/$pkg"/*.gen.go; do
		name=$(basename "$f")
		if ! diff -u --label "committed $pkg/$name" --label "generated $pkg/$name" "$root/$pkg/$name" "$f" >&2; then
			stale=1
		fi
	done
done
if ((stale)); then
	echo "generate.sh --check: generated code is stale; run openapi/generate.sh (make generate) and commit the result" >&2
	exit 1
fi
echo "generate.sh --check: generated code is current"
