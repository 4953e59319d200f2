#!/usr/bin/env bash
# Installs the external agent CLIs that worker/execloop runs (and tests against) at pinned
# versions from the npm registry into a project-local directory. Idempotent: a pinned version
# already installed is kept. Prints where the binaries are, as shell exports.
#
#   scripts/setup-agents.sh            # installs into .cache/agents
#   OUTERLOOP_AGENTS_DIR=/opt/agents scripts/setup-agents.sh
set -euo pipefail

CODEX_VERSION="${CODEX_VERSION:-0.171.0}"
CLAUDE_VERSION="${CLAUDE_VERSION:-2.1.332}"

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
dir="${OUTERLOOP_AGENTS_DIR:-$root/.cache/agents}"
mkdir -p "$dir"

installed_version() { # package -> version installed in $dir, or empty
	local pj="$dir/node_modules/$1/package.json"
	[ -f "$pj" ] && node -p "require('$pj').version" 2>/dev/null || true
}

need=()
[ "$(installed_version @openai/codex)" = "$CODEX_VERSION" ] || need+=("@openai/codex@$CODEX_VERSION")
[ "$(installed_version @anthropic-ai/claude-code)" = "$CLAUDE_VERSION" ] || need+=("@anthropic-ai/claude-code@$CLAUDE_VERSION")

if [ "${#need[@]}" -gt 0 ]; then
	command -v npm >/dev/null || { echo "setup-agents: npm not found (install nodejs and npm)" >&2; exit 1; }
	[ -f "$dir/package.json" ] || echo '{"name":"outerloop-agents","private":true}' >"$dir/package.json"
	echo "setup-agents: installing ${need[*]} into $dir" >&2
	npm install --prefix "$dir" --no-audit --no-fund --save-exact --loglevel=error "${need[@]}" >&2
fi

codex="$dir/node_modules/.bin/codex"
claude="$dir/node_modules/.bin/claude"
for b in "$codex" "$claude"; do
	[ -x "$b" ] || { echo "setup-agents: $b missing after install" >&2; exit 1; }
done
echo "setup-agents: codex $("$codex" --version 2>/dev/null | tail -1), claude $("$claude" --version 2>/dev/null | tail -1)" >&2
echo "export OUTERLOOP_CODEX_BIN=$codex"
echo "export OUTERLOOP_CLAUDE_BIN=$claude"
