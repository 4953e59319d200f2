#!/usr/bin/env bash
# Checks the Prometheus alert rules and runs their unit tests with promtool, installing Debian's
# `prometheus` package (which provides /usr/bin/promtool) when promtool is missing. Then runs
# the dashboards Go tests with CI set, so they fail rather than skip without promtool.
#
#   scripts/promtool.sh            # from anywhere in the repository
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"

if ! command -v promtool >/dev/null 2>&1; then
	if ! command -v apt-get >/dev/null 2>&1; then
		echo "promtool.sh: promtool not found and apt-get is unavailable; install promtool (Prometheus) and retry" >&2
		exit 1
	fi
	sudo=""
	if [ "$(id -u)" -ne 0 ]; then
		sudo="sudo"
	fi
	echo "promtool.sh: installing Debian's prometheus package for promtool" >&2
	$sudo apt-get update
	DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y --no-install-recommends prometheus
fi
command -v promtool >/dev/null 2>&1 || {
	echo "promtool.sh: the prometheus package installed no promtool on PATH" >&2
	exit 1
}
promtool --version 2>&1 | head -n 1

promtool check rules dashboards/alerts.yml
promtool test rules dashboards/alerts_test.yml

# Panel expressions, metric names, prometheus.yml and the compose file (see dashboards/*_test.go).
CI="${CI:-1}" go test -count=1 ./dashboards/...
