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
# ctest: green with a disabled test; a missing executable (exit 8); a failing test; a test that
# exits with its SKIP_RETURN_CODE (a deliberate skip, also `notrun`)
for v in green:"" notrun:-DWITH_MISSING=ON fail:-DWITH_FAIL=ON skip:-DWITH_SKIP=ON; do
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
  -e '/hostname="tbd"/!s#hostname="[^"]*"#hostname="host"#g' junit/*.xml tap/*.tap jestjson/*.json gojson/*.json 2>/dev/null
cd gopkgs
# no machine paths in fixtures
sed -i -e "s#$(cd .. && pwd)#/src/verify/testdata#g" -e "s#${JEST_DIR:-/nonexistent}#/jest#g" ../junit/*.xml ../tap/node.tap "$out"/*.json 2>/dev/null

# ---- issue 27: C++, Rust, Ruby, PHP, shell and Perl runners, each from the real tool ----
# Standalone: T=$PWD/tools sh -c "$(sed -n '/^# ---- issue 27/,$p' gen.sh)"   (from verify/testdata)
# Tools (versions used for the committed fixtures), Debian 12 packages unless said otherwise:
#   googletest (libgtest-dev) 1.12.1 with g++ 12.2; catch2 2.13.10; rustc/cargo 1.95.0 stable
#   (rustup) with RUSTC_BOOTSTRAP=1, because libtest's `--format junit` is nightly-only
#   (`-Z unstable-options`) and stable refuses it ("the option `Z` is only accepted on the
#   nightly compiler"); ruby-rspec 3.12 + ruby-rspec-junit-formatter 0.4.1 (ruby 3.1); phpunit
#   9.6.7 (php 8.2); bats 1.8.2; perl 5.36 Test::More 1.302192 (libtest-simple-perl), prove
#   (TAP::Harness) 3.44 + libtap-formatter-junit-perl 0.11.
cd "${T:?}/.."
mkdir -p console
T=$(pwd)/tools
# googletest: green with DISABLED_ tests and a GTEST_SKIP; a failure; a failing SetUpTestSuite
# (its tests are listed as skipped, the failure is written nowhere); a failing global environment.
if [ -f /usr/include/gtest/gtest.h ]; then
  b=$(mktemp -d)
  for v in green: fail:-DWITH_FAIL setup:-DWITH_SETUP_FAIL env:-DWITH_ENV_FAIL; do
    name=${v%%:*}; flag=${v#*:}
    g++ -std=c++17 $flag tools/gtest/sample_test.cc -lgtest -lgtest_main -pthread -o "$b/sample_test" &&
      (cd tools/gtest && "$b/sample_test" --gtest_output="xml:../../junit/gtest-$name.xml" >/dev/null 2>&1; echo "gtest $name: exit $?")
  done
  (cd tools/gtest && g++ -std=c++17 sample_test.cc -lgtest -lgtest_main -pthread -o "$b/sample_test" && "$b/sample_test" > ../../console/gtest.txt 2>&1)
  rm -rf "$b"
fi
# Catch2 2.x: `tests=` counts assertions; a failing CHECK; an exception outside any assertion;
# a filter that matches no test.
if [ -f /usr/include/catch2/catch.hpp ]; then
  b=$(mktemp -d)
  for v in green: fail:-DWITH_FAIL throw:-DWITH_THROW; do
    name=${v%%:*}; flag=${v#*:}
    g++ -std=c++17 $flag tools/catch2/sample_test.cpp -o "$b/catch2-sample" &&
      ("$b/catch2-sample" --reporter junit --out "junit/catch2-$name.xml" >/dev/null 2>&1; echo "catch2 $name: exit $?")
  done
  "$b/catch2-sample" --reporter junit --out junit/catch2-nomatch.xml "no such test" >/dev/null 2>&1; echo "catch2 nomatch: exit $?"
  "$b/catch2-sample" > console/catch2.txt 2>&1
  rm -rf "$b"
fi
# cargo test with libtest's JUnit output: one document per test binary (unit, integration, doc
# tests) on stdout; ignored tests are counted, not listed; a test binary that aborts writes none.
if command -v cargo >/dev/null; then
  b=$(mktemp -d)
  (cd tools/cargo && export CARGO_TARGET_DIR="$b" RUSTC_BOOTSTRAP=1 RUST_BACKTRACE=0
   cargo test -q --offline -- -Z unstable-options --format junit > ../../junit/cargo-green.xml 2>/dev/null; echo "cargo green: exit $?"
   cargo test -q --offline --features fail -- -Z unstable-options --format junit > ../../junit/cargo-fail.xml 2>/dev/null; echo "cargo fail: exit $?"
   cargo test -q --offline --no-fail-fast --features panic_outside -- -Z unstable-options --format junit > ../../junit/cargo-abort.xml 2>/dev/null; echo "cargo abort: exit $?"
   cargo test --offline > ../../console/cargo.txt 2>&1)
  rm -rf "$b"
fi
# rspec + RspecJunitFormatter: pending, skip and xit; a failure; a failing before(:all); a
# failing after(:context) (not in the report: only the exit status shows it); a spec file that
# does not load (nothing runs); a pending example that passes (a failure).
if command -v rspec >/dev/null; then
  (cd tools/rspec
   for v in green: fail:WITH_FAIL hook:WITH_HOOK_FAIL after:WITH_AFTER_FAIL load:WITH_LOAD_ERROR fixed:WITH_FIXED_PENDING; do
     name=${v%%:*}; e=${v#*:}
     env ${e:+$e=1} rspec --seed 1 --format RspecJunitFormatter --out "../../junit/rspec-$name.xml" >/dev/null 2>&1; echo "rspec $name: exit $?"
   done
   rspec --seed 1 --format documentation > ../../console/rspec.txt 2>&1)
fi
# PHPUnit 9: nested suites (directory, class, data provider), `assertions=`, skipped and
# incomplete tests; a failure; an exception; a failing setUpBeforeClass; a risky test and a warning.
if command -v phpunit >/dev/null; then
  (cd tools/phpunit
   for v in green: fail:WITH_FAIL error:WITH_ERROR setup:WITH_SETUP_FAIL odd:WITH_ODD; do
     name=${v%%:*}; e=${v#*:}
     env ${e:+$e=1} phpunit --log-junit "../../junit/phpunit-$name.xml" tests >/dev/null 2>&1; echo "phpunit $name: exit $?"
   done
   phpunit tests > ../../console/phpunit.txt 2>&1)
fi
# bats: JUnit and TAP; skip; a failure; a failing setup_file; a missing executable under `run`.
if command -v bats >/dev/null; then
  (cd tools/bats
   for v in green: fail:WITH_FAIL setup:WITH_SETUP_FAIL missing:WITH_MISSING; do
     name=${v%%:*}; e=${v#*:}
     env ${e:+$e=1} bats --formatter junit sample.bats > "../../junit/bats-$name.xml" 2>/dev/null; echo "bats $name junit: exit $?"
     env ${e:+$e=1} bats --tap sample.bats > "../../tap/bats-$name.tap" 2>&1; echo "bats $name tap: exit $?"
   done
   bats --formatter pretty sample.bats > ../../console/bats.txt 2>&1)
fi
# Perl Test::More TAP with its diagnostics (stderr merged, as `2>&1` or prove --merge keep them):
# skip, todo, a failure, a program that dies or exits non-zero after its last test (only the
# diagnostic after the plan says so), skip_all; the dying program's stdout alone; prove's
# console output and TAP::Formatter::JUnit for the same files.
(cd tools/perl
 for t in green fail dies dies-done skip-all; do perl "$t.t" > "../../tap/perl-$t.tap" 2>&1; echo "perl $t: exit $?"; done
 perl dies.t > ../../tap/perl-dies-stdout.tap 2>/dev/null
 prove green.t dies.t > ../../console/prove.txt 2>&1
 prove -v green.t dies.t > ../../console/prove-v.txt 2>&1
 prove --formatter TAP::Formatter::JUnit green.t fail.t dies.t dies-done.t skip-all.t > ../../junit/prove-perl.xml 2>/dev/null; echo "prove junit: exit $?")
# no machine paths, host names or thread ids in fixtures
sed -i -e "s#$T/#/src/verify/testdata/tools/#g" -e "s#$(pwd)#/src/verify/testdata#g" -e '/hostname="tbd"/!s#hostname="[^"]*"#hostname="host"#g' \
  -e "s#thread '\([^']*\)' ([0-9]*)#thread '\1'#g" \
  -e 's#/tmp/tmp\.[A-Za-z0-9]*#/target#g' \
  junit/gtest-*.xml junit/catch2-*.xml junit/cargo-*.xml junit/rspec-*.xml junit/phpunit-*.xml junit/bats-*.xml \
  junit/prove-perl.xml tap/bats-*.tap tap/perl-*.tap console/*.txt 2>/dev/null
