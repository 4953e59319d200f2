#!/usr/bin/env bash
# Builds a Gitea server binary for the forge tests (lib/giteatest starts one per test
# package). Idempotent: a binary already built for the pinned version is kept. Next to it go the
# module's options/ and templates/, which a Gitea built without bindata reads at run time (it
# stops on a missing translation otherwise). Prints the binary's path as a shell export.
#
# `go install code.gitea.io/gitea@VERSION` refuses the module (its go.mod has replace
# directives), so the module is downloaded through the Go module proxy and built inside a
# writable copy of its directory. The default SQLite driver is pure Go (modernc), so no build
# tags and no cgo are needed. About 3.5 minutes on 2 cores, once.
#
#   scripts/setup-gitea.sh            # builds into .cache/gitea/<version>/gitea
#   OUTERLOOP_GITEA_DIR=/opt/gitea scripts/setup-gitea.sh
set -euo pipefail
export PATH="$PATH:/usr/local/go/bin"

GITEA_VERSION="${GITEA_VERSION:-v1.27.3}"

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
dir="${OUTERLOOP_GITEA_DIR:-$root/.cache/gitea}/$GITEA_VERSION"
bin="$dir/gitea"

command -v go >/dev/null || { echo "setup-gitea: go not found" >&2; exit 1; }
command -v git >/dev/null || { echo "setup-gitea: git not found (Gitea needs it at run time)" >&2; exit 1; }

moddir="$(go mod download -json "code.gitea.io/gitea@$GITEA_VERSION" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')"
[ -n "$moddir" ] && [ -d "$moddir" ] || { echo "setup-gitea: go mod download code.gitea.io/gitea@$GITEA_VERSION gave no module directory" >&2; exit 1; }

if [ ! -x "$bin" ]; then
	mkdir -p "$dir"
	# The module cache is read-only; go build writes nothing there, but a copy keeps the build
	# independent of cache permissions and of anyone cleaning the cache mid-build.
	src="$(mktemp -d)"
	trap 'chmod -R u+w "$src" 2>/dev/null; rm -rf "$src"' EXIT
	cp -r "$moddir/." "$src/"
	chmod -R u+w "$src"
	echo "setup-gitea: building Gitea $GITEA_VERSION into $bin (a few minutes, once)" >&2
	(cd "$src" && CGO_ENABLED=0 go build -trimpath -buildvcs=false \
		-ldflags "-s -w -X main.Version=${GITEA_VERSION#v}" -o "$bin.tmp" .) >&2
	mv "$bin.tmp" "$bin" # atomic: a concurrent caller sees no binary or a whole one
fi
for d in options templates; do
	if [ ! -d "$dir/$d" ]; then
		rm -rf "$dir/$d.tmp"
		cp -r "$moddir/$d" "$dir/$d.tmp"
		chmod -R u+w "$dir/$d.tmp"
		mv "$dir/$d.tmp" "$dir/$d"
	fi
done

[ -x "$bin" ] || { echo "setup-gitea: $bin missing after build" >&2; exit 1; }
echo "setup-gitea: $("$bin" --version 2>/dev/null | head -1)" >&2
echo "export OUTERLOOP_GITEA_BIN=$bin"
