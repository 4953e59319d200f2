#!/usr/bin/env bash
# Installs Debian's chromium for the console's browser tests (console/browser_test.go, driven by
# chromedp). Idempotent: nothing happens when /usr/bin/chromium (or $OUTERLOOP_CHROMIUM) exists.
# Needs root or sudo for apt-get. Prints the binary's path as a shell export.
#
#   scripts/setup-chromium.sh && go test ./console/...
set -euo pipefail

bin="${OUTERLOOP_CHROMIUM:-/usr/bin/chromium}"

if [ ! -x "$bin" ]; then
	command -v apt-get >/dev/null || { echo "setup-chromium: apt-get not found; install chromium and set OUTERLOOP_CHROMIUM" >&2; exit 1; }
	sudo=""
	[ "$(id -u)" -eq 0 ] || sudo="sudo"
	echo "setup-chromium: installing Debian's chromium" >&2
	export DEBIAN_FRONTEND=noninteractive
	$sudo apt-get update >&2
	$sudo apt-get install -y --no-install-recommends chromium fonts-dejavu-core >&2
	bin=/usr/bin/chromium
fi

[ -x "$bin" ] || { echo "setup-chromium: $bin missing after install" >&2; exit 1; }
echo "setup-chromium: $("$bin" --version 2>/dev/null | head -1)" >&2
echo "export OUTERLOOP_CHROMIUM=$bin"
