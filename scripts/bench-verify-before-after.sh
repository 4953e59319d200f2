#!/usr/bin/env bash
# Compares the verifier's go test -json and JUnit readers at a base commit and at HEAD, with
# gotestsum's testjson in the same runs: both built as test binaries, run interleaved (base,
# head, base, head, ...) so that the machine's load falls on both alike, then benchstat.
#   scripts/bench-verify-before-after.sh [BASE_REV] [ROUNDS]   (default ad1a9e7, 6)
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
base_rev="${1:-ad1a9e7}"
rounds="${2:-6}"
tmp="$(mktemp -d)"
trap 'git -C "$root" worktree remove --force "$tmp/base" >/dev/null 2>&1 || true; rm -rf "$tmp"' EXIT
git -C "$root" worktree add --detach "$tmp/base" "$base_rev" >/dev/null
(cd "$tmp/base/verify" && go test -c -o "$tmp/vb_base" .)
(cd "$root/verify" && go test -c -o "$tmp/vb_head" .)
for _ in $(seq "$rounds"); do
	for v in base head; do
		dir="$tmp/base/verify"
		[ "$v" = head ] && dir="$root/verify"
		(cd "$dir" && "$tmp/vb_$v" -test.run XXX -test.bench 'ParseGoJSON$' -test.benchmem -test.benchtime 10x) | grep ^Benchmark >>"$tmp/gojson_$v.txt"
		(cd "$dir" && "$tmp/vb_$v" -test.run XXX -test.bench 'ParseJUnit$' -test.benchmem -test.benchtime 20x) | grep ^Benchmark >>"$tmp/junit_$v.txt"
	done
done
benchstat="$(go env GOPATH)/bin/benchstat"
[ -x "$benchstat" ] || GOFLAGS= go install golang.org/x/perf/cmd/benchstat@latest
for f in gojson junit; do
	(cd "$tmp" && "$benchstat" "${f}_base.txt" "${f}_head.txt")
done
