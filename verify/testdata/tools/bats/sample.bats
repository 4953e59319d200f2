#!/usr/bin/env bats
# Fixture for verify/testdata/gen.sh: what bats says about each outcome.

setup_file() {
  if [ -n "${WITH_SETUP_FAIL:-}" ]; then
    echo "fixture server did not start" >&2
    return 1
  fi
}

@test "adds" {
  [ $((1 + 1)) -eq 2 ]
}

@test "divides" {
  want=3
  [ -n "${WITH_FAIL:-}" ] && want=4
  [ $((7 / 2)) -eq "$want" ]
}

@test "needs a gpu" {
  skip "no GPU here"
  false
}

@test "runs the tool" {
  if [ -n "${WITH_MISSING:-}" ]; then
    run ./no-such-tool
    [ "$status" -eq 0 ]
  fi
}
