package config

import (
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strconv"
	"strings"
)

// mergeAllow returns base's hosts followed by more's, each once: a template's allow list
// extends the deployment's, and merging twice changes nothing.
func mergeAllow(base, more []string) []string {
	if len(base) == 0 && len(more) == 0 {
		return nil
	}
	var out []string
	for _, h := range append(append([]string(nil), base...), more...) {
		h = strings.ToLower(strings.TrimSpace(h))
		if !slices.Contains(out, h) {
			out = append(out, h)
		}
	}
	return out
}

// validateAllow checks the allow list (each entry a DNS host name, optionally with :port) and
// that network registries is not asked of an unconfined sandbox.
func (s Sandbox) validateAllow() error {
	if s.Mode == "off" && s.Network == "registries" {
		return errors.New("network registries needs the sandbox (mode off has the host's network)")
	}
	for _, h := range s.Allow {
		if err := ValidateAllowEntry(h); err != nil {
			return fmt.Errorf("allow entry %q: %w", h, err)
		}
	}
	return nil
}

// ValidateAllowEntry checks one allow-list entry: a host name (letters, digits, hyphens, dots;
// no IP address: the proxy never reaches an address it has not resolved from a listed name)
// with an optional :port.
func ValidateAllowEntry(entry string) error {
	host, port := entry, ""
	if i := strings.LastIndexByte(entry, ':'); i >= 0 {
		host, port = entry[:i], entry[i+1:]
		if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
			return fmt.Errorf("port %q is not a number from 1 to 65535", port)
		}
	}
	if _, err := netip.ParseAddr(strings.Trim(host, "[]")); err == nil {
		return errors.New("is an IP address; list a host name")
	}
	if host == "" || len(host) > 253 {
		return errors.New("host name is empty or too long")
	}
	for _, label := range strings.Split(strings.TrimSuffix(host, "."), ".") {
		if label == "" || len(label) > 63 || label[0] == '-' || label[len(label)-1] == '-' {
			return fmt.Errorf("label %q is not a host name label", label)
		}
		for _, c := range label {
			if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
				return fmt.Errorf("%q is not allowed in a host name", c)
			}
		}
	}
	return nil
}
