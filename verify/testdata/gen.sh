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

# ---- issue 13: reporter conventions, each from the real tool ----
# Tools (versions used for the committed fixtures):
#   go1.26.8; gotestsum v1.13.0; node v20.20.2 (node --test); npm: jest 29.7.0, jest-junit 17.0.0,
#   vitest 4.1.12, mocha 10.8.2 + mocha-junit-reporter 2.2.1, tape 5.10.2 (TOOLS_DIR: a directory
#   where `npm install jest@29 jest-junit vitest mocha@10 mocha-junit-reporter tape` ran);
#   Debian 12: python3-pytest 7.2.1, perl prove 3.44 + libtap-formatter-junit-perl 0.11,
#   cmake/ctest 3.25.1, ant 1.10.13 + ant-optional + junit4 4.13.2 (OpenJDK 17).
#   python3-pytest-rerunfailures 10.2 (Debian; PyPI is not reachable here, so no newer plugin).
# go test -count=2: the flaky test fails in the first run and passes in the second, one invocation.
d=$(mktemp -d); FLAKY_DIR=$d go test -json -count=2 ./flaky > "$out/count-fail.json" 2>&1; echo "count: exit $?"; rm -rf "$d"
# benchmarks next to tests, and a benchmark-only run
run bench -bench . -benchtime 100x ./bench
run bench-only -run '^$' -bench . -benchtime 100x ./bench
# gotestsum's JUnit for a TestMain failure
go run gotest.tools/gotestsum@v1.13.0 --format standard-quiet --junitfile ../junit/gotestsum-testmain.xml \
  --packages "./testmain ./pass" >/dev/null 2>&1; echo "gotestsum testmain: exit $?"
# a UTF-8 byte order mark in front of real output (PowerShell's Out-File writes one)
printf '\357\273\277' | cat - "$out/pass.json" > "$out/bom.json"
cd ..
T=$(pwd)/tools
# node --test: a file that defines no tests (TAP and JUnit), and a failing todo in JUnit
(cd tools/node-empty && node --test --test-reporter=tap empty.test.mjs > ../../tap/node-empty.tap; echo "node empty tap: exit $?"
 node --test --test-reporter=junit empty.test.mjs > ../../junit/node-empty.xml; echo "node empty junit: exit $?")
(cd tools/node && node --test --test-reporter=junit sample.test.mjs > ../../junit/node.xml 2>/dev/null; echo "node junit: exit $?")
# ctest: green with a disabled test; a missing executable (exit 8); a failing test
for v in green:"" notrun:-DWITH_MISSING=ON fail:-DWITH_FAIL=ON; do
  name=${v%%:*}; flag=${v#*:}; b=$(mktemp -d)
  cmake -S tools/ctest -B "$b" $flag >/dev/null && (cd "$b" && ctest --output-junit out.xml >/dev/null 2>&1; echo "ctest $name: exit $?")
  cp "$b/out.xml" "junit/ctest-$name.xml"; rm -rf "$b"
done
# prove with TAP::Formatter::JUnit: a bad plan (suite-level <error>) and a green run
(cd tools/prove && prove --formatter TAP::Formatter::JUnit pass.t badplan.t > ../../junit/prove-badplan.xml 2>/dev/null; echo "prove badplan: exit $?"
 prove --formatter TAP::Formatter::JUnit pass.t > ../../junit/prove-green.xml 2>/dev/null; echo "prove green: exit $?")
# pytest: a passing test whose teardown errors (pytest counts it twice)
if [ -x /usr/bin/python3 ] && /usr/bin/python3 -c 'import pytest' 2>/dev/null; then
  (cd tools/pytest-green && /usr/bin/python3 -m pytest -q -p no:cacheprovider --junitxml=../../junit/pytest-teardown.xml test_green.py >/dev/null 2>&1; echo "pytest teardown: exit $?")
fi
# pytest-rerunfailures (Debian python3-pytest-rerunfailures 10.2): a test that fails, then passes
# on its rerun; its JUnit keeps only the final run
if /usr/bin/python3 -c 'import pytest_rerunfailures' 2>/dev/null; then
  d=$(mktemp -d)
  (cd tools/pytest-rerun && RERUN_DIR=$d /usr/bin/python3 -m pytest -q -p no:cacheprovider --reruns 2 --junitxml=../../junit/pytest-rerun.xml test_rerun.py >/dev/null 2>&1; echo "pytest rerun: exit $?")
  rm -rf "$d"
fi
# Ant's junit task: a failing @BeforeClass and a green class
if command -v ant >/dev/null; then
  for cls in SetupTest GreenTest; do
    b=$(mktemp -d); (cd tools/ant && ant -q -Dout="$b" -Dtests=$cls >/dev/null 2>&1; echo "ant $cls: exit $?")
    # keep only the properties that identify the tool (the rest is the machine's environment)
    grep -v '<property name="[^a]\|<property name="a[^n]' "$b/TEST-$cls.xml" > "junit/ant-$cls.xml"; rm -rf "$b"
  done
fi
if [ -n "${TOOLS_DIR:-}" ]; then
  export NODE_PATH="$TOOLS_DIR/node_modules"; M=$TOOLS_DIR/node_modules
  # jest-junit with a test.todo (listed, not counted); jest --json green and failing
  (cd tools/jest-green && JEST_JUNIT_OUTPUT_FILE=../../junit/jest-todo.xml node "$M/jest/bin/jest.js" --rootDir . \
     --reporters=default --reporters="$M/jest-junit" >/dev/null 2>&1; echo "jest todo: exit $?"
   node "$M/jest/bin/jest.js" --rootDir . --json --outputFile=../../jestjson/jest-green.json >/dev/null 2>&1; echo "jest json green: exit $?")
  (cd tools/jest && node "$M/jest/bin/jest.js" --rootDir . --json --outputFile=../../jestjson/jest-fail.json >/dev/null 2>&1; echo "jest json fail: exit $?")
  # vitest: JSON failing and green, JUnit
  (cd tools/vitest && node "$M/vitest/vitest.mjs" run --reporter=json --outputFile=../../jestjson/vitest-fail.json sum.test.js >/dev/null 2>&1; echo "vitest fail: exit $?"
   node "$M/vitest/vitest.mjs" run --reporter=json --outputFile=../../jestjson/vitest-green.json green.test.js >/dev/null 2>&1; echo "vitest green: exit $?"
   node "$M/vitest/vitest.mjs" run --reporter=junit --outputFile=../../junit/vitest.xml sum.test.js >/dev/null 2>&1; echo "vitest junit: exit $?")
  # mocha + mocha-junit-reporter: a failing before() hook; a pending test (counted, not listed)
  (cd tools/mocha && node "$M/mocha/bin/mocha.js" --reporter "$M/mocha-junit-reporter" --reporter-options mochaFile=../../junit/mocha-hook.xml hook.spec.js >/dev/null 2>&1; echo "mocha hook: exit $?"
   node "$M/mocha/bin/mocha.js" --reporter "$M/mocha-junit-reporter" --reporter-options mochaFile=../../junit/mocha-pending.xml pending.spec.js >/dev/null 2>&1; echo "mocha pending: exit $?")
  # tape: TAP failing; green with CRLF line ends (as a Windows checkout or runner writes them)
  (cd tools/tape && node sample.js > ../../tap/tape.tap; echo "tape: exit $?"
   node green.js | sed 's/$/\r/' > ../../tap/tape-crlf.tap; echo "tape crlf: exit $?")
  printf '\357\273\277' | cat - tap/tape-crlf.tap > tap/bom-crlf.tap
fi
# several JUnit documents concatenated in one file (a CI step appending reports)
cat junit/ant-GreenTest.xml junit/ctest-green.xml > junit/concatenated.xml 2>/dev/null
# no machine paths in fixtures
sed -i -e "s#$T/#/src/verify/testdata/tools/#g" -e "s#${TOOLS_DIR:-/nonexistent}#/tools#g" -e "s#$(pwd)#/src/verify/testdata#g" \
  -e 's#hostname="[^"]*"#hostname="host"#g' junit/*.xml tap/*.tap jestjson/*.json gojson/*.json 2>/dev/null
cd gopkgs
# no machine paths in fixtures
sed -i -e "s#$(cd .. && pwd)#/src/verify/testdata#g" -e "s#${JEST_DIR:-/nonexistent}#/jest#g" ../junit/*.xml ../tap/node.tap "$out"/*.json 2>/dev/null
