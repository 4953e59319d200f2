package egress

import (
	"slices"
	"strconv"
	"strings"
)

// DefaultAllow is the documented default list of the registries network (docs/sandbox-network.md):
// the Go module proxy and checksum database, npm, PyPI, crates.io, Maven Central and RubyGems.
// A bare name allows ports 443 and 80; host:port allows that port only.
func DefaultAllow() []string {
	return []string{
		"proxy.golang.org", "sum.golang.org", // GOPROXY serves modules and zips itself
		"registry.npmjs.org",
		"pypi.org", "files.pythonhosted.org",
		"crates.io", "index.crates.io", "static.crates.io",
		"repo.maven.apache.org", "repo1.maven.org",
		"rubygems.org", "index.rubygems.org",
	}
}

// allowList matches a request's host and port against the entries.
type allowList map[string][]int // host → ports

func newAllowList(entries []string) allowList {
	l := allowList{}
	for _, e := range entries {
		host, ports := normalHost(e), []int{80, 443}
		if i := strings.LastIndexByte(e, ':'); i >= 0 {
			if n, err := strconv.Atoi(e[i+1:]); err == nil && n > 0 && n < 65536 {
				host, ports = normalHost(e[:i]), []int{n}
			}
		}
		if host == "" {
			continue
		}
		for _, p := range ports {
			if !slices.Contains(l[host], p) {
				l[host] = append(l[host], p)
			}
		}
	}
	return l
}

func (l allowList) allows(host string, port int) bool {
	ports, ok := l[normalHost(host)]
	return ok && slices.Contains(ports, port)
}

// normalHost lower-cases h and drops a trailing dot, so "PyPI.org." and "pypi.org" are one.
func normalHost(h string) string {
	return strings.TrimSuffix(strings.ToLower(strings.TrimSpace(h)), ".")
}
