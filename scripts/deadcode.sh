#!/usr/bin/env bash
# Dead code check (scripts/test.sh runs it): golang.org/x/tools/cmd/deadcode, pinned by go.mod's
# tool directive (`go tool deadcode`, fetched once through the Go module proxy and cached),
# lists the functions that neither a main nor a test reaches. Each must be removed, or listed
# with its reason in scripts/deadcode-allow.txt (a documented extension point). Fails naming
# every function found and not listed, and every listed one no longer found.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
export PATH="$PATH:/usr/local/go/bin"

found=$(go tool deadcode -test -f '{{range .Funcs}}{{$.Path}}.{{.Name}} {{.Position}}{{"\n"}}{{end}}' ./... | sed '/^$/d' | sort)
allowed=$(sed -e 's/#.*//' -e '/^[[:space:]]*$/d' scripts/deadcode-allow.txt | awk '{print $1}' | sort -u)
status=0
while read -r name pos; do
	[ -n "$name" ] || continue
	if ! grep -qxF "$name" <<<"$allowed"; then
		echo "deadcode: $pos: $name is reached by no main and no test: remove it, or list it with its reason in scripts/deadcode-allow.txt" >&2
		status=1
	fi
done <<<"$found"
while read -r name; do
	[ -n "$name" ] || continue
	if ! awk '{print $1}' <<<"$found" | grep -qxF "$name"; then
		echo "deadcode: scripts/deadcode-allow.txt lists $name, which is not dead code (any more): take it out" >&2
		status=1
	fi
done <<<"$allowed"
exit $status
