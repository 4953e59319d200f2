#!/bin/sh
# Regenerates the go test -json and gotestsum fixtures from the purpose-built packages in
# gopkgs/ with the real tools. Run from verify/testdata: sh gen.sh
set -u
cd gopkgs
out=../gojson
mkdir -p "$out"
run() { name=$1; shift; go test -json "$@" > "$out/$name.json" 2>&1; echo "$name: exit $?"; }
run pass ./pass
run fail ./fail
run panic ./panic
run timeout -timeout 1s ./timeout
run buildfail ./buildfail
run depbuild ./depbuild
run testmain ./testmain
run notests ./notests
run bigoutput ./bigoutput
run parallel -parallel 3 ./parallel
run multi ./pass ./fail ./notests
# stderr mixed in (build errors as plain lines) and a vet failure
run mixed ./buildfail ./pass
# several runs of one package: gotestsum --rerun-fails re-runs the flaky test
d=$(mktemp -d)
FLAKY_DIR=$d go run gotest.tools/gotestsum@v1.13.0 --format standard-quiet \
  --jsonfile "$out/rerun.json" --junitfile ../junit/gotestsum-rerun.xml \
  --rerun-fails=2 --packages ./flaky >/dev/null 2>&1; echo "rerun: exit $?"
rm -rf "$d"
go run gotest.tools/gotestsum@v1.13.0 --format standard-quiet --junitfile ../junit/gotestsum-fail.xml \
  --packages "./fail ./pass ./panic" >/dev/null 2>&1; echo "gotestsum junit: exit $?"
# a stream cut off in the middle of a line
head -c 700 "$out/fail.json" > "$out/cutoff.json"
