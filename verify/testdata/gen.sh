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
# non-JSON lines mixed in (go: downloading, compiler output on stderr)
{ echo "go: downloading example.com/dep v1.2.3"; head -5 "$out/pass.json"; echo "# fixtures/other"
  echo "other/x.go:3:1: syntax error: unexpected }"; printf 'FAIL\tfixtures/other [build failed]\n'
  tail -n +6 "$out/pass.json"; } > "$out/nonjson-mixed.json"
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

# pytest (Debian python3-pytest): xunit1 and xunit2, a teardown error after a call failure,
# xfail, skip, control characters, a collection error.
if [ -x /usr/bin/python3 ] && /usr/bin/python3 -c 'import pytest' 2>/dev/null; then
  (cd ../tools/pytest &&
   /usr/bin/python3 -m pytest -q -p no:cacheprovider -o junit_family=xunit2 --junitxml=../../junit/pytest-xunit2.xml test_sample.py >/dev/null 2>&1;
   /usr/bin/python3 -m pytest -q -p no:cacheprovider -o junit_family=xunit1 --junitxml=../../junit/pytest-xunit1.xml test_sample.py >/dev/null 2>&1;
   /usr/bin/python3 -m pytest -q -p no:cacheprovider --junitxml=../../junit/pytest-collect-error.xml test_collect_error.py >/dev/null 2>&1)
  echo "pytest: done"
fi
# node's test runner: TAP with nested subtests, SKIP, TODO and YAML diagnostics holding JSON.
(cd ../tools/node && node --test --test-reporter=tap sample.test.mjs > ../../tap/node.tap 2>/dev/null; echo "node tap: exit $?")
# jest + jest-junit (npm); JEST_DIR points at a directory with both installed.
if [ -n "${JEST_DIR:-}" ]; then
  (cd ../tools/jest && JEST_JUNIT_OUTPUT_FILE=../../junit/jest-junit.xml \
     node "$JEST_DIR/node_modules/jest/bin/jest.js" --rootDir . --reporters=default --reporters="$JEST_DIR/node_modules/jest-junit" >/dev/null 2>&1;
   echo "jest: exit $?")
fi
# no machine paths in fixtures
sed -i -e "s#$(cd .. && pwd)#/src/verify/testdata#g" -e "s#${JEST_DIR:-/nonexistent}#/jest#g" ../junit/*.xml ../tap/node.tap "$out"/*.json 2>/dev/null
