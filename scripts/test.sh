#!/usr/bin/env bash
# The one test command (README, CI). It sets up everything the tests need, then runs them all
# with the race detector:
#   - Redis: $REDIS_URL if set; else 127.0.0.1:6379 if it answers; else a redis-server of its own
#     on a free port (Debian's redis-server is installed when missing). Tests isolate themselves
#     by key prefix and queue name and never flush or stop a shared server.
#   - bubblewrap (Debian's bubblewrap) for the sandbox every child process runs in,
#   - promtool (Debian's prometheus package) for the alert-rule tests, prometheus and
#     prometheus-alertmanager for the live Prometheus and Alertmanager tests,
#   - Chromium (Debian's chromium) for the console's browser test,
#   - the Codex and Claude Code CLIs (npm, pinned) for the external-agent tests,
#   - a Gitea server binary (built once from the Go module proxy into .cache/gitea) for the
#     forge and delivery tests, which start it on a free port (lib/giteatest),
#   - deadcode (golang.org/x/tools, pinned in go.mod's tool directive) for scripts/deadcode.sh:
#     no function is left that neither a main nor a test reaches, but those allowed by name.
# Extra arguments go to `go test` (e.g. scripts/test.sh -run TestDemo ./cmd/...).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
export PATH="$PATH:/usr/local/go/bin"

apt_install() {
	local sudo=""
	[ "$(id -u)" -eq 0 ] || sudo="sudo"
	if [ -z "${APT_UPDATED:-}" ]; then
		$sudo apt-get update -qq >&2
		APT_UPDATED=1
	fi
	DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "$@" >&2
}

answers() { # host port → 0 when a Redis answers PING there
	{ exec 3<>"/dev/tcp/$1/$2"; } 2>/dev/null || return 1
	printf 'PING\r\n' >&3
	local reply=""
	read -r -t 2 reply <&3 || true
	exec 3>&- 3<&-
	[[ "$reply" == +PONG* ]]
}

if [ -z "${REDIS_URL:-}" ]; then
	if answers 127.0.0.1 6379; then
		export REDIS_URL=redis://127.0.0.1:6379/0
	else
		command -v redis-server >/dev/null || apt_install redis-server
		port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])' 2>/dev/null || echo 6390)
		rdir=$(mktemp -d)
		redis-server --port "$port" --bind 127.0.0.1 --save "" --appendonly no --dir "$rdir" \
			--maxmemory-policy noeviction --daemonize yes --pidfile "$rdir/redis.pid" --logfile "$rdir/redis.log"
		trap 'kill "$(cat "$rdir/redis.pid" 2>/dev/null)" 2>/dev/null || true; rm -rf "$rdir"' EXIT
		for _ in $(seq 100); do answers 127.0.0.1 "$port" && break; sleep 0.1; done
		export REDIS_URL="redis://127.0.0.1:$port/0"
	fi
fi
echo "test.sh: Redis at $REDIS_URL" >&2
# Tests that stop or restart Redis start their own server: they need the binary too.
command -v redis-server >/dev/null || apt_install redis-server
command -v git >/dev/null || apt_install git
# The sandbox of every command an item runs (proc).
command -v bwrap >/dev/null || apt_install bubblewrap
# promtool for the rule tests, prometheus for the live Prometheus test (both in Debian's package).
{ command -v promtool && command -v prometheus; } >/dev/null || apt_install prometheus
# prometheus-alertmanager for the live Alertmanager test (alerts).
command -v prometheus-alertmanager >/dev/null || apt_install prometheus-alertmanager
eval "$(scripts/setup-chromium.sh)"
eval "$(scripts/setup-agents.sh)"
eval "$(scripts/setup-gitea.sh)"

echo "test.sh: go vet" >&2
go vet ./...
echo "test.sh: deadcode" >&2
scripts/deadcode.sh
echo "test.sh: promtool check rules + test rules" >&2
promtool check rules dashboards/alerts.yml
promtool test rules dashboards/alerts_test.yml
echo "test.sh: go test -race" >&2
if [ "$#" -eq 0 ]; then
	set -- ./...
fi
go test -race -count=1 -timeout 30m "$@"
