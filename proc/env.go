package proc

import (
	"os"
	"sort"
)

// AllowedEnv names the worker's environment variables a child process may see: what a
// toolchain needs to work, never credentials. Everything else is passed only on purpose: a
// template's loop.env names, the condition's env, and an exec agent's own provider key.
func AllowedEnv() []string {
	return []string{"PATH", "HOME", "USER", "LANG", "LC_ALL", "TZ", "TMPDIR", "TERM",
		"GOPATH", "GOCACHE", "GOMODCACHE", "GOROOT", "GOPROXY", "GOFLAGS", "GOTOOLCHAIN", "GONOSUMDB", "GOPRIVATE"}
}

// BaseEnv returns the scrubbed environment from the worker's own: the AllowedEnv names only.
func BaseEnv() []string { return Env(os.LookupEnv, nil, nil) }

// Env builds a child's whole environment: the AllowedEnv names and the extra passed-through
// names read through lookup, then set (sorted by name). A name in set wins over a looked-up one;
// each name appears once.
func Env(lookup func(string) (string, bool), pass []string, set map[string]string) []string {
	if lookup == nil {
		lookup = os.LookupEnv
	}
	seen := map[string]bool{}
	var env []string
	for _, k := range sortedKeys(set) {
		seen[k] = true
		env = append(env, k+"="+set[k])
	}
	for _, k := range append(AllowedEnv(), pass...) {
		if seen[k] {
			continue
		}
		if v, ok := lookup(k); ok {
			seen[k] = true
			env = append(env, k+"="+v)
		}
	}
	return env
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// setEnv returns env with name set to value (replacing an earlier entry).
func setEnv(env []string, name, value string) []string {
	out := make([]string, 0, len(env)+1)
	for _, kv := range env {
		if len(kv) > len(name) && kv[:len(name)+1] == name+"=" {
			continue
		}
		out = append(out, kv)
	}
	return append(out, name+"="+value)
}

// getEnv returns name's value in env.
func getEnv(env []string, name string) string {
	v := ""
	for _, kv := range env {
		if len(kv) > len(name) && kv[:len(name)+1] == name+"=" {
			v = kv[len(name)+1:]
		}
	}
	return v
}
