#!/usr/bin/env bash
# Runs every Go fuzz target in the repository (func FuzzX in a _test.go
# file) for FUZZTIME each, default 10000x (ten thousand inputs): make test
# runs it after the unit tests so each target's seed corpus and a short
# burst of new inputs are exercised on every change. `make fuzz
# FUZZTIME=1000000x` fuzzes longer. A failing input is written under the
# package's testdata/fuzz/ directory; commit it with the fix so it stays in
# the seed corpus.
#
# The default is a count, not a duration: with a duration, Go up to 1.26
# can fail a target with a bare "context deadline exceeded" as the time
# runs out (a race in its fuzzing coordinator, golang/go#75804, fixed in
# Go 1.27), which would fail CI for nothing.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
fuzztime=${FUZZTIME:-10000x}
# Each new interesting input is minimized for up to a minute by default,
# which turned a ten-second burst into minutes; bound it by a count too.
minimizetime=${FUZZMINIMIZETIME:-200x}

found=0
while read -r file; do
	dir=$(dirname "$file")
	for target in $(sed -n 's/^func \(Fuzz[A-Za-z0-9_]*\)(.*/\1/p' "$file"); do
		found=$((found + 1))
		echo "fuzz: $target in ./$dir for $fuzztime"
		(cd "$dir" && go test -run '^$' -fuzz "^$target\$" -fuzztime "$fuzztime" -fuzzminimizetime "$minimizetime" .)
	done
done < <(git ls-files --cached --others --exclude-standard '*_test.go' | sort)
[[ $found -gt 0 ]] || { echo "fuzz: no fuzz targets found" >&2; exit 1; }
echo "fuzz: $found targets passed"
