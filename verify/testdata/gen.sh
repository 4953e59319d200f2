#!/bin/sh
# Regenerates the verifier's fixtures with the real tools. Run from verify/testdata:
#
#   sh gen.sh [--install] [go] [13] [27] [43]
#
# go: the go test -json and gotestsum fixtures (purpose-built packages in gopkgs/); 13: the
# reporter conventions of issue 13 (pytest, node, jest, vitest, mocha, tape, ctest, prove, Ant);
# 27: the C++, Rust, Ruby, PHP, shell and Perl runners of issue 27; 43: Common Test's surefire
# hook, jasmine-reporters and `prove -v` of issue 43. No section named: all four.
# --install first installs the Debian packages of issue 27's runners (as root; apt-get):
#
#   apt-get install -y --no-install-recommends googletest libgtest-dev g++ catch2 ruby-rspec \
#     ruby-rspec-junit-formatter phpunit bats libtest-simple-perl libtap-formatter-junit-perl cargo
#
# Issue 13 also used Debian's python3-pytest, python3-pytest-rerunfailures, cmake, ant,
# ant-optional and junit4, and npm packages in TOOLS_DIR / JEST_DIR (see that section).
#
# Every fixture goes to a temporary file that replaces the committed one only when the tool ran
# and wrote something, so a machine without a tool keeps its fixtures (and says which tool it
# skipped). The versions of the tools that ran are written to VERSIONS.txt, one line per tool;
# a run replaces the lines of the tools it ran and keeps the others.
set -u
PKGS27="googletest libgtest-dev g++ catch2 ruby-rspec ruby-rspec-junit-formatter phpunit bats libtest-simple-perl libtap-formatter-junit-perl cargo"
D=$(pwd)
[ -f "$D/gen.sh" ] && [ -d "$D/gopkgs" ] || { echo "gen.sh: run from verify/testdata" >&2; exit 2; }
sections=""
for a in "$@"; do
  case $a in
  --install)
    # shellcheck disable=SC2086 # one word per package
    { apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends $PKGS27; } ||
      { echo "gen.sh: installing $PKGS27 failed" >&2; exit 1; } ;;
  go | 13 | 27 | 43) sections="$sections $a" ;;
  *) echo "gen.sh: unknown argument $a (want --install, go, 13, 27 or 43)" >&2; exit 2 ;;
  esac
done
[ -n "$sections" ] || sections="go 13 27 43"
VERS=$(mktemp)
trap 'rm -f "$VERS"' EXIT

# skip WHAT: says that a fixture section did not run and why.
skip() { echo "gen.sh: skipped: $*" >&2; return 1; }
# have CMD [PKG]: true when CMD is on PATH, else says which tool (and Debian package) is missing.
have() { command -v "$1" >/dev/null 2>&1 || skip "$1 not found${2:+ (Debian package $2)}"; }
# keep TMP DEST: TMP replaces DEST when it is not empty; else DEST stays as committed.
keep() {
  if [ -s "$1" ]; then
    chmod 644 "$1" && mv "$1" "$2"
  else
    rm -f "$1"
    echo "gen.sh: $2 not replaced: the tool wrote nothing" >&2
  fi
}
# tmpname DEST: a path beside DEST for a tool that writes its report file itself.
tmpname() { mktemp -u "$1.XXXXXX"; }
# put DEST CMD...: CMD's stdout into DEST (stderr dropped); CMD's exit status.
put() {
  _dest=$1; shift
  have "$1" || return 127
  _tmp=$(tmpname "$_dest")
  "$@" > "$_tmp" 2>/dev/null; _rc=$?
  keep "$_tmp" "$_dest"; return $_rc
}
# putall DEST CMD...: the same with stderr merged into DEST (as `2>&1` keeps diagnostics).
putall() {
  _dest=$1; shift
  have "$1" || return 127
  _tmp=$(tmpname "$_dest")
  "$@" > "$_tmp" 2>&1; _rc=$?
  keep "$_tmp" "$_dest"; return $_rc
}
# ver NAME VERSION: records the version of a tool that made fixtures in this run.
ver() { printf '%s: %s\n' "$1" "$(printf '%s\n' "$2" | head -1)" >> "$VERS"; }
# dpkgv PKG: a Debian package's installed version.
dpkgv() { dpkg-query -W -f='${Version}' "$1" 2>/dev/null || echo "(not installed by dpkg)"; }

# ---- go test -json and gotestsum ----
gen_go() {
  have go || return
  ver go "$(go version)"
  cd "$D/gopkgs" || return
  out=../gojson
  run() { name=$1; shift; putall "$out/$name.json" go test -json "$@"; echo "$name: exit $?"; }
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
  t=$(tmpname "$out/nonjson-mixed.json")
  { echo "go: downloading example.com/dep v1.2.3"; head -5 "$out/pass.json"; echo "# fixtures/other"
    echo "other/x.go:3:1: syntax error: unexpected }"; printf 'FAIL\tfixtures/other [build failed]\n'
    tail -n +6 "$out/pass.json"; } > "$t"
  keep "$t" "$out/nonjson-mixed.json"
  # several runs of one package: gotestsum --rerun-fails re-runs the flaky test
  gts="gotest.tools/gotestsum@v1.13.0"
  if gv=$(go run "$gts" --version 2>/dev/null); then
    ver gotestsum "$gv"
    d=$(mktemp -d); j=$(tmpname "$out/rerun.json"); x=$(tmpname ../junit/gotestsum-rerun.xml)
    FLAKY_DIR=$d go run "$gts" --format standard-quiet --jsonfile "$j" --junitfile "$x" \
      --rerun-fails=2 --packages ./flaky >/dev/null 2>&1; echo "rerun: exit $?"
    keep "$j" "$out/rerun.json"; keep "$x" ../junit/gotestsum-rerun.xml
    rm -rf "$d"
    x=$(tmpname ../junit/gotestsum-fail.xml)
    go run "$gts" --format standard-quiet --junitfile "$x" --packages "./fail ./pass ./panic" >/dev/null 2>&1
    echo "gotestsum junit: exit $?"; keep "$x" ../junit/gotestsum-fail.xml
    # gotestsum's JUnit for a TestMain failure
    x=$(tmpname ../junit/gotestsum-testmain.xml)
    go run "$gts" --format standard-quiet --junitfile "$x" --packages "./testmain ./pass" >/dev/null 2>&1
    echo "gotestsum testmain: exit $?"; keep "$x" ../junit/gotestsum-testmain.xml
  else
    skip "gotestsum ($gts) cannot be built: no module proxy?"
  fi
  # a stream cut off in the middle of a line
  put "$out/cutoff.json" head -c 700 "$out/fail.json"
  # go test -count=2: the flaky test fails in the first run and passes in the second, one invocation.
  d=$(mktemp -d); FLAKY_DIR=$d putall "$out/count-fail.json" go test -json -count=2 ./flaky; echo "count: exit $?"; rm -rf "$d"
  # benchmarks next to tests, and a benchmark-only run
  run bench -bench . -benchtime 100x ./bench
  run bench-only -run '^$' -bench . -benchtime 100x ./bench
  # a UTF-8 byte order mark in front of real output (PowerShell's Out-File writes one)
  t=$(tmpname "$out/bom.json"); printf '\357\273\277' | cat - "$out/pass.json" > "$t"; keep "$t" "$out/bom.json"
  # no machine paths in fixtures
  sed -i -e "s#$D#/src/verify/testdata#g" ../junit/gotestsum-*.xml "$out"/*.json 2>/dev/null
}

# ---- issue 13: reporter conventions, each from the real tool ----
# npm packages: jest 29.7.0, jest-junit 17.0.0, vitest 4.1.12, mocha 10.8.2 + mocha-junit-reporter
# 2.2.1, tape 5.10.2 (TOOLS_DIR: a directory where `npm install jest@29 jest-junit vitest mocha@10
# mocha-junit-reporter tape` ran; JEST_DIR: one with jest and jest-junit). Debian 12:
# python3-pytest, python3-pytest-rerunfailures (PyPI is not reachable here), perl prove +
# libtap-formatter-junit-perl, cmake (ctest), ant + ant-optional + junit4 (OpenJDK 17).
gen_13() {
  cd "$D" || return
  T=$D/tools
  # pytest (Debian python3-pytest): xunit1 and xunit2, a teardown error after a call failure,
  # xfail, skip, control characters, a collection error; a passing test whose teardown errors
  # (pytest counts it twice); pytest-rerunfailures: a test that fails, then passes on its rerun
  # (its JUnit keeps only the final run).
  py=/usr/bin/python3
  if [ -x $py ] && $py -c 'import pytest' 2>/dev/null || skip "pytest not found (Debian package python3-pytest)"; then
    ver pytest "$($py -m pytest --version 2>&1)"
    pytest() { dir=$1 dest=$D/junit/$2; shift 2; x=$(tmpname "$dest")
      (cd "tools/$dir" && $py -m pytest -q -p no:cacheprovider --junitxml="$x" "$@" >/dev/null 2>&1); rc=$?
      keep "$x" "$dest"; return $rc; }
    pytest pytest pytest-xunit2.xml -o junit_family=xunit2 test_sample.py
    pytest pytest pytest-xunit1.xml -o junit_family=xunit1 test_sample.py
    pytest pytest pytest-collect-error.xml test_collect_error.py
    echo "pytest: done"
    pytest pytest-green pytest-teardown.xml test_green.py; echo "pytest teardown: exit $?"
    if $py -c 'import pytest_rerunfailures' 2>/dev/null || skip "pytest-rerunfailures not found (Debian package python3-pytest-rerunfailures)"; then
      ver pytest-rerunfailures "$(dpkgv python3-pytest-rerunfailures)"
      d=$(mktemp -d); RERUN_DIR=$d pytest pytest-rerun pytest-rerun.xml --reruns 2 test_rerun.py; echo "pytest rerun: exit $?"; rm -rf "$d"
    fi
  fi
  # node's test runner: TAP with nested subtests, SKIP, TODO and YAML diagnostics holding JSON; a
  # file that defines no tests (TAP and JUnit), and a failing todo in JUnit.
  if have node nodejs; then
    ver node "$(node --version)"
    (cd tools/node && put ../../tap/node.tap node --test --test-reporter=tap sample.test.mjs; echo "node tap: exit $?"
     put ../../junit/node.xml node --test --test-reporter=junit sample.test.mjs; echo "node junit: exit $?")
    (cd tools/node-empty && put ../../tap/node-empty.tap node --test --test-reporter=tap empty.test.mjs; echo "node empty tap: exit $?"
     put ../../junit/node-empty.xml node --test --test-reporter=junit empty.test.mjs; echo "node empty junit: exit $?")
  fi
  # jest + jest-junit (npm); JEST_DIR points at a directory with both installed.
  if [ -n "${JEST_DIR:-}" ] || skip "jest: JEST_DIR not set"; then
    x=$(tmpname "$D/junit/jest-junit.xml")
    (cd tools/jest && JEST_JUNIT_OUTPUT_FILE=$x node "$JEST_DIR/node_modules/jest/bin/jest.js" --rootDir . \
       --reporters=default --reporters="$JEST_DIR/node_modules/jest-junit" >/dev/null 2>&1; echo "jest: exit $?")
    keep "$x" junit/jest-junit.xml
  fi
  # ctest: green with a disabled test; a missing executable (exit 8); a failing test; a test that
  # exits with its SKIP_RETURN_CODE (a deliberate skip, also `notrun`)
  if have cmake cmake; then
    ver cmake "$(cmake --version)"
    for v in green:"" notrun:-DWITH_MISSING=ON fail:-DWITH_FAIL=ON skip:-DWITH_SKIP=ON; do
      name=${v%%:*}; flag=${v#*:}; b=$(mktemp -d)
      # shellcheck disable=SC2086 # an empty flag is no argument
      cmake -S tools/ctest -B "$b" $flag >/dev/null && (cd "$b" && ctest --output-junit out.xml >/dev/null 2>&1; echo "ctest $name: exit $?")
      keep "$b/out.xml" "junit/ctest-$name.xml"; rm -rf "$b"
    done
  fi
  # prove with TAP::Formatter::JUnit: a bad plan (suite-level <error>) and a green run
  if have prove perl && { perl -MTAP::Formatter::JUnit -e1 2>/dev/null || skip "TAP::Formatter::JUnit not found (Debian package libtap-formatter-junit-perl)"; }; then
    (cd tools/prove && put ../../junit/prove-badplan.xml prove --formatter TAP::Formatter::JUnit pass.t badplan.t; echo "prove badplan: exit $?"
     put ../../junit/prove-green.xml prove --formatter TAP::Formatter::JUnit pass.t; echo "prove green: exit $?")
  fi
  # Ant's junit task: a failing @BeforeClass and a green class
  if have ant ant; then
    ver ant "$(ant -version 2>&1)"
    for cls in SetupTest GreenTest; do
      b=$(mktemp -d); (cd tools/ant && ant -q -Dout="$b" -Dtests=$cls >/dev/null 2>&1; echo "ant $cls: exit $?")
      # keep only the properties that identify the tool (the rest is the machine's environment)
      put "junit/ant-$cls.xml" grep -v '<property name="[^a]\|<property name="a[^n]' "$b/TEST-$cls.xml"; rm -rf "$b"
    done
  fi
  if [ -n "${TOOLS_DIR:-}" ] || skip "jest, vitest, mocha, tape: TOOLS_DIR not set"; then
    export NODE_PATH="$TOOLS_DIR/node_modules"; M=$TOOLS_DIR/node_modules
    for p in jest jest-junit vitest mocha mocha-junit-reporter tape; do
      ver "npm $p" "$(node -p "require('$M/$p/package.json').version" 2>/dev/null)"
    done
    # jest-junit with a test.todo (listed, not counted); jest --json green and failing
    x=$(tmpname "$D/junit/jest-todo.xml"); j=$(tmpname "$D/jestjson/jest-green.json"); k=$(tmpname "$D/jestjson/jest-fail.json")
    (cd tools/jest-green && JEST_JUNIT_OUTPUT_FILE=$x node "$M/jest/bin/jest.js" --rootDir . \
       --reporters=default --reporters="$M/jest-junit" >/dev/null 2>&1; echo "jest todo: exit $?"
     node "$M/jest/bin/jest.js" --rootDir . --json --outputFile="$j" >/dev/null 2>&1; echo "jest json green: exit $?")
    (cd tools/jest && node "$M/jest/bin/jest.js" --rootDir . --json --outputFile="$k" >/dev/null 2>&1; echo "jest json fail: exit $?")
    keep "$x" junit/jest-todo.xml; keep "$j" jestjson/jest-green.json; keep "$k" jestjson/jest-fail.json
    # vitest: JSON failing and green, JUnit
    j=$(tmpname "$D/jestjson/vitest-fail.json"); k=$(tmpname "$D/jestjson/vitest-green.json"); x=$(tmpname "$D/junit/vitest.xml")
    (cd tools/vitest && node "$M/vitest/vitest.mjs" run --reporter=json --outputFile="$j" sum.test.js >/dev/null 2>&1; echo "vitest fail: exit $?"
     node "$M/vitest/vitest.mjs" run --reporter=json --outputFile="$k" green.test.js >/dev/null 2>&1; echo "vitest green: exit $?"
     node "$M/vitest/vitest.mjs" run --reporter=junit --outputFile="$x" sum.test.js >/dev/null 2>&1; echo "vitest junit: exit $?")
    keep "$j" jestjson/vitest-fail.json; keep "$k" jestjson/vitest-green.json; keep "$x" junit/vitest.xml
    # mocha + mocha-junit-reporter: a failing before() hook; a pending test (counted, not listed)
    x=$(tmpname "$D/junit/mocha-hook.xml"); j=$(tmpname "$D/junit/mocha-pending.xml")
    (cd tools/mocha && node "$M/mocha/bin/mocha.js" --reporter "$M/mocha-junit-reporter" --reporter-options mochaFile="$x" hook.spec.js >/dev/null 2>&1; echo "mocha hook: exit $?"
     node "$M/mocha/bin/mocha.js" --reporter "$M/mocha-junit-reporter" --reporter-options mochaFile="$j" pending.spec.js >/dev/null 2>&1; echo "mocha pending: exit $?")
    keep "$x" junit/mocha-hook.xml; keep "$j" junit/mocha-pending.xml
    # tape: TAP failing; green with CRLF line ends (as a Windows checkout or runner writes them)
    (cd tools/tape && put ../../tap/tape.tap node sample.js; echo "tape: exit $?"
     put ../../tap/tape-crlf.tap sh -c 'node green.js | sed "s/\$/\r/"'; echo "tape crlf: exit $?")
    t=$(tmpname tap/bom-crlf.tap); printf '\357\273\277' | cat - tap/tape-crlf.tap > "$t"; keep "$t" tap/bom-crlf.tap
  fi
  # several JUnit documents concatenated in one file (a CI step appending reports)
  [ -s junit/ant-GreenTest.xml ] && [ -s junit/ctest-green.xml ] && put junit/concatenated.xml cat junit/ant-GreenTest.xml junit/ctest-green.xml
  # no machine paths in fixtures
  sed -i -e "s#$T/#/src/verify/testdata/tools/#g" -e "s#${TOOLS_DIR:-/nonexistent}#/tools#g" -e "s#${JEST_DIR:-/nonexistent}#/jest#g" \
    -e "s#$D#/src/verify/testdata#g" -e '/hostname="tbd"/!s#hostname="[^"]*"#hostname="host"#g' \
    junit/*.xml tap/*.tap jestjson/*.json 2>/dev/null
}

# ---- issue 27: C++, Rust, Ruby, PHP, shell and Perl runners, each from the real tool ----
# Debian 12 packages ($PKGS27) unless VERSIONS.txt says otherwise. libtest's `--format junit` is
# nightly-only (`-Z unstable-options`; stable refuses it: "the option `Z` is only accepted on the
# nightly compiler"), so cargo runs with RUSTC_BOOTSTRAP=1.
gen_27() {
  cd "$D" || return
  mkdir -p console
  T=$D/tools
  # googletest: green with DISABLED_ tests and a GTEST_SKIP; a failure; a failing SetUpTestSuite
  # (its tests are listed as skipped, the failure is written nowhere); a failing global environment.
  if have g++ g++ && { [ -f /usr/include/gtest/gtest.h ] || skip "googletest not found (Debian package libgtest-dev)"; }; then
    ver g++ "$(g++ --version)"; ver googletest "libgtest-dev $(dpkgv libgtest-dev)"
    b=$(mktemp -d)
    for v in green: fail:-DWITH_FAIL setup:-DWITH_SETUP_FAIL env:-DWITH_ENV_FAIL; do
      name=${v%%:*}; flag=${v#*:}; x=$(tmpname "$D/junit/gtest-$name.xml")
      # shellcheck disable=SC2086 # an empty flag is no argument
      g++ -std=c++17 $flag tools/gtest/sample_test.cc -lgtest -lgtest_main -pthread -o "$b/sample_test" &&
        (cd tools/gtest && "$b/sample_test" --gtest_output="xml:$x" >/dev/null 2>&1; echo "gtest $name: exit $?")
      keep "$x" "junit/gtest-$name.xml"
    done
    (cd tools/gtest && g++ -std=c++17 sample_test.cc -lgtest -lgtest_main -pthread -o "$b/sample_test" &&
      putall ../../console/gtest.txt "$b/sample_test")
    rm -rf "$b"
  fi
  # Catch2 2.x: `tests=` counts assertions; a failing CHECK; an exception outside any assertion;
  # a filter that matches no test; [!mayfail] and [!shouldfail] tests that fail (exit 0) and a
  # [!shouldfail] test that passes (exit 1). Errors outside any test: a listener that throws when the run
  # starts (the JUnit file is opened, then left empty; exit 255), and a global constructor that
  # throws before main (std::terminate: no report at all, only stderr; exit 134).
  if have g++ g++ && { [ -f /usr/include/catch2/catch.hpp ] || skip "Catch2 not found (Debian package catch2)"; }; then
    ver catch2 "$(dpkgv catch2)"
    b=$(mktemp -d)
    for v in green: fail:-DWITH_FAIL throw:-DWITH_THROW listener:-DWITH_LISTENER_THROW mayfail:-DWITH_MAYFAIL \
      shouldfail-passes:-DWITH_SHOULDFAIL_PASSES; do
      name=${v%%:*}; flag=${v#*:}; x=$(tmpname "$D/junit/catch2-$name.xml")
      # shellcheck disable=SC2086 # an empty flag is no argument
      g++ -std=c++17 $flag tools/catch2/sample_test.cpp -o "$b/catch2-sample" &&
        ("$b/catch2-sample" --reporter junit --out "$x" >/dev/null 2>&1; echo "catch2 $name: exit $?")
      if [ "$name" = listener ]; then
        # the empty report is the fixture: keep it only when the run made it
        [ -f "$x" ] && chmod 644 "$x" && mv "$x" "junit/catch2-$name.xml"
      else
        keep "$x" "junit/catch2-$name.xml"
      fi
    done
    g++ -std=c++17 -DWITH_STATIC_THROW tools/catch2/sample_test.cpp -o "$b/catch2-static" &&
      { putall console/catch2-static.txt "$b/catch2-static" --reporter junit; echo "catch2 static: exit $?"; }
    if g++ -std=c++17 tools/catch2/sample_test.cpp -o "$b/catch2-sample"; then
      x=$(tmpname "$D/junit/catch2-nomatch.xml")
      "$b/catch2-sample" --reporter junit --out "$x" "no such test" >/dev/null 2>&1; echo "catch2 nomatch: exit $?"
      keep "$x" junit/catch2-nomatch.xml
      putall console/catch2.txt "$b/catch2-sample"
    fi
    rm -rf "$b"
  fi
  # cargo test with libtest's JUnit output: one document per test binary (unit, integration, doc
  # tests) on stdout; ignored tests are counted, not listed; a test binary that aborts writes none;
  # a crate that does not compile runs nothing (stdout empty, the compiler's errors on stderr).
  if have cargo cargo; then
    ver cargo "$(cargo --version)"; ver rustc "$(rustc --version)"
    b=$(mktemp -d)
    (cd tools/cargo && export CARGO_TARGET_DIR="$b" RUSTC_BOOTSTRAP=1 RUST_BACKTRACE=0
     J="-Z unstable-options --format junit"
     # shellcheck disable=SC2086 # J is several arguments
     put ../../junit/cargo-green.xml cargo test -q --offline -- $J; echo "cargo green: exit $?"
     # shellcheck disable=SC2086
     put ../../junit/cargo-fail.xml cargo test -q --offline --features fail -- $J; echo "cargo fail: exit $?"
     # shellcheck disable=SC2086
     put ../../junit/cargo-abort.xml cargo test -q --offline --no-fail-fast --features panic_outside -- $J; echo "cargo abort: exit $?"
     # shellcheck disable=SC2086
     putall ../../console/cargo-compile.txt cargo test -q --offline --features compile_error -- $J; echo "cargo compile: exit $?"
     putall ../../console/cargo.txt cargo test --offline)
    rm -rf "$b"
  fi
  # rspec + RspecJunitFormatter: pending, skip and xit; a failure; a failing before(:all); a
  # failing after(:context) (not in the report: only the exit status shows it); a spec file that
  # does not load (nothing runs); a pending example that passes (a failure).
  if have rspec ruby-rspec && { ruby -e 'require "rspec_junit_formatter"' 2>/dev/null || skip "rspec_junit_formatter not found (Debian package ruby-rspec-junit-formatter)"; }; then
    ver ruby "$(ruby --version)"; ver rspec "ruby-rspec $(dpkgv ruby-rspec)"
    ver rspec_junit_formatter "ruby-rspec-junit-formatter $(dpkgv ruby-rspec-junit-formatter)"
    (cd tools/rspec
     for v in green: fail:WITH_FAIL hook:WITH_HOOK_FAIL after:WITH_AFTER_FAIL load:WITH_LOAD_ERROR fixed:WITH_FIXED_PENDING; do
       name=${v%%:*}; e=${v#*:}; x=$(tmpname "$D/junit/rspec-$name.xml")
       env ${e:+$e=1} rspec --seed 1 --format RspecJunitFormatter --out "$x" >/dev/null 2>&1; echo "rspec $name: exit $?"
       keep "$x" "$D/junit/rspec-$name.xml"
     done
     putall ../../console/rspec.txt rspec --seed 1 --format documentation)
  fi
  # PHPUnit 9: nested suites (directory, class, data provider), `assertions=`, skipped and
  # incomplete tests; a failure; an exception; a failing setUpBeforeClass; a risky test and a warning.
  if have phpunit phpunit; then
    ver php "$(php --version)"; ver phpunit "$(phpunit --version | grep PHPUnit)"
    (cd tools/phpunit
     for v in green: fail:WITH_FAIL error:WITH_ERROR setup:WITH_SETUP_FAIL odd:WITH_ODD; do
       name=${v%%:*}; e=${v#*:}; x=$(tmpname "$D/junit/phpunit-$name.xml")
       env ${e:+$e=1} phpunit --do-not-cache-result --log-junit "$x" tests >/dev/null 2>&1; echo "phpunit $name: exit $?"
       keep "$x" "$D/junit/phpunit-$name.xml"
     done
     putall ../../console/phpunit.txt phpunit --do-not-cache-result tests)
  fi
  # bats: JUnit and TAP; skip; a failure; a failing setup_file; a missing executable under `run`.
  if have bats bats; then
    ver bats "$(bats --version)"
    (cd tools/bats
     for v in green: fail:WITH_FAIL setup:WITH_SETUP_FAIL missing:WITH_MISSING; do
       name=${v%%:*}; e=${v#*:}
       put "../../junit/bats-$name.xml" env ${e:+$e=1} bats --formatter junit sample.bats; echo "bats $name junit: exit $?"
       putall "../../tap/bats-$name.tap" env ${e:+$e=1} bats --tap sample.bats; echo "bats $name tap: exit $?"
     done
     putall ../../console/bats.txt bats --formatter pretty sample.bats)
  fi
  # Perl Test::More TAP with its diagnostics (stderr merged, as `2>&1` or prove --merge keep them):
  # skip, todo, a failure, a program that dies or exits non-zero after its last test (only the
  # diagnostic after the plan says so), skip_all; the dying program's stdout alone; prove's
  # console output and TAP::Formatter::JUnit for the same files.
  if have perl perl && { perl -MTest::More -e1 2>/dev/null || skip "Test::More not found (Debian package libtest-simple-perl)"; }; then
    ver perl "$(perl -e 'print "perl $^V"')"
    ver Test::More "$(perl -MTest::More -e 'print "Test::More $Test::More::VERSION"') (libtest-simple-perl $(dpkgv libtest-simple-perl))"
    (cd tools/perl
     for t in green fail dies dies-done skip-all; do putall "../../tap/perl-$t.tap" perl "$t.t"; echo "perl $t: exit $?"; done
     put ../../tap/perl-dies-stdout.tap perl dies.t
     if have prove perl; then
       ver prove "$(prove --version)"
       putall ../../console/prove.txt prove green.t dies.t
       putall ../../console/prove-v.txt prove -v green.t dies.t
       if perl -MTAP::Formatter::JUnit -e1 2>/dev/null || skip "TAP::Formatter::JUnit not found (Debian package libtap-formatter-junit-perl)"; then
         ver TAP::Formatter::JUnit "$(perl -MTAP::Formatter::JUnit -e 'print "TAP::Formatter::JUnit $TAP::Formatter::JUnit::VERSION"') (libtap-formatter-junit-perl $(dpkgv libtap-formatter-junit-perl))"
         put ../../junit/prove-perl.xml prove --formatter TAP::Formatter::JUnit green.t fail.t dies.t dies-done.t skip-all.t; echo "prove junit: exit $?"
       fi
     fi)
  fi
  # no machine paths, host names or thread ids in fixtures
  sed -i -e "s#$T/#/src/verify/testdata/tools/#g" -e "s#$D#/src/verify/testdata#g" -e '/hostname="tbd"/!s#hostname="[^"]*"#hostname="host"#g' \
    -e "s#thread '\([^']*\)' ([0-9]*)#thread '\1'#g" \
    -e 's#/tmp/tmp\.[A-Za-z0-9]*#/target#g' \
    junit/gtest-*.xml junit/catch2-*.xml junit/cargo-*.xml junit/rspec-*.xml junit/phpunit-*.xml junit/bats-*.xml \
    junit/prove-perl.xml tap/bats-*.tap tap/perl-*.tap console/*.txt 2>/dev/null
}

# ---- issue 43: Common Test, jasmine-reporters and prove -v, each from the real tool ----
# Debian 12: erlang-base + erlang-common-test (ct_run); npm: jasmine and jasmine-reporters
# (JASMINE_DIR: a directory where `npm install jasmine jasmine-reporters` ran); perl's prove.
gen_43() {
  cd "$D" || return
  T=$D/tools
  # Common Test with the surefire hook (cth_surefire): a green run with a skip in a group; a
  # failing test case; a failing init_per_suite and a failing init_per_group (their test cases
  # are auto-skipped). The hook lists the configuration functions as cases; tests= counts
  # only the test cases.
  if have ct_run erlang-common-test; then
    ver ct_run "common_test $(erl -noshell -eval 'application:load(common_test), {ok, V} = application:get_key(common_test, vsn), io:format("~s, OTP ~s", [V, erlang:system_info(otp_release)]), halt().') (erlang-common-test $(dpkgv erlang-common-test))"
    b=$(mktemp -d); cp tools/ct/sample_SUITE.erl "$b/"
    for v in green: fail:WITH_FAIL suite:WITH_SUITE_FAIL group:WITH_GROUP_FAIL; do
      name=${v%%:*}; e=${v#*:}; x=$(tmpname "$D/junit/ct-$name.xml"); mkdir -p "$b/logs"
      (cd "$b" && env ${e:+$e=1} ct_run -noshell -suite sample_SUITE -logdir logs \
        -ct_hooks cth_surefire "[{path,\"$x\"}]" >/dev/null 2>&1; echo "ct $name: exit $?")
      keep "$x" "junit/ct-$name.xml"
    done
    sed -i -e "s#$b/logs/[^\"]*/#/logs/#g" -e "s#$b/#/src/verify/testdata/tools/ct/#g" -e 's#hostname="[^"]*"#hostname="host"#g' junit/ct-*.xml
    rm -rf "$b"
  fi
  # jasmine + jasmine-reporters' JUnitXmlReporter: pending specs (xit, pending()) green, and a
  # failing spec. Its root <testsuites> has disabled= but no skipped=.
  if [ -n "${JASMINE_DIR:-}" ] || skip "jasmine: JASMINE_DIR not set"; then
    M=$JASMINE_DIR/node_modules
    ver "npm jasmine" "$(node -p "require('$M/jasmine/package.json').version" 2>/dev/null)"
    ver "npm jasmine-reporters" "$(node -p "require('$M/jasmine-reporters/package.json').version" 2>/dev/null)"
    for v in green: fail:WITH_FAIL; do
      name=${v%%:*}; e=${v#*:}; b=$(mktemp -d)
      (cd tools/jasmine && env ${e:+$e=1} JUNIT_DIR="$b" NODE_PATH="$M" node "$M/jasmine/bin/jasmine.js" --random=false \
        >/dev/null 2>&1; echo "jasmine $name: exit $?")
      keep "$b/junitresults.xml" "junit/jasmine-$name.xml"; rm -rf "$b"
    done
    sed -i -e "s#$T/#/src/verify/testdata/tools/#g" -e 's#hostname="[^"]*"#hostname="host"#g' junit/jasmine-*.xml
  fi
  # prove -v: the test programs' TAP between prove's headers, then its summary. A green run with
  # a skip, a todo and a skipped program (exit 0), and a failing one (exit 1), stderr merged.
  if have prove perl; then
    ver prove "$(prove --version)"
    (cd tools/perl && putall ../../console/prove-v-green.txt prove -v green.t skip-all.t; echo "prove -v green: exit $?"
     putall ../../console/prove-v-fail.txt prove -v green.t fail.t; echo "prove -v fail: exit $?")
    sed -i -E 's#^(Files=[0-9]+, Tests=[0-9]+, +)[0-9]+ wallclock secs .*#\10 wallclock secs ( 0.01 usr  0.00 sys +  0.10 cusr  0.02 csys =  0.13 CPU)#' console/prove-v-*.txt
  fi
}

for s in $sections; do
  (gen_"$s")
done
# The versions this run used replace their tools' lines; the other tools' lines stay.
if [ -s "$VERS" ]; then
  t=$(tmpname "$D/VERSIONS.txt")
  { echo "# Tool versions that made these fixtures, written by gen.sh (one line per tool; a run"
    echo "# replaces the lines of the tools it ran)."
    { cat "$VERS"; grep -v '^#' "$D/VERSIONS.txt" 2>/dev/null; } | awk -F': ' '!seen[$1]++' | LC_ALL=C sort; } > "$t"
  keep "$t" "$D/VERSIONS.txt"
fi
