package workitems

import (
	"errors"
	"fmt"
	"net/url"
	"regexp"
	"strings"
)

// CheckBranchName reports why name is not a valid git branch name (git-check-ref-format's
// rules for refs/heads/NAME), or nil.
func CheckBranchName(name string) error {
	switch {
	case name == "":
		return errors.New("empty branch name")
	case name == "@":
		return errors.New(`"@" is not a branch name`)
	case strings.HasPrefix(name, "/") || strings.HasSuffix(name, "/") || strings.Contains(name, "//"):
		return fmt.Errorf("%q: empty path component", name)
	case strings.HasSuffix(name, "."):
		return fmt.Errorf("%q ends with '.'", name)
	case strings.Contains(name, ".."):
		return fmt.Errorf("%q contains '..'", name)
	case strings.Contains(name, "@{"):
		return fmt.Errorf("%q contains '@{'", name)
	case strings.HasPrefix(name, "-"):
		return fmt.Errorf("%q starts with '-'", name)
	}
	for _, r := range name {
		if r < 0x20 || r == 0x7f || strings.ContainsRune(" ~^:?*[\\", r) {
			return fmt.Errorf("%q contains %q, which git refuses in a ref", name, r)
		}
	}
	for c := range strings.SplitSeq(name, "/") {
		if strings.HasPrefix(c, ".") || strings.HasSuffix(c, ".lock") {
			return fmt.Errorf("%q: a component starts with '.' or ends with '.lock'", name)
		}
	}
	return nil
}

// repoPartRE is one part of owner/name.
var repoPartRE = regexp.MustCompile(`^[A-Za-z0-9_.-]+$`)

// ParseRepoSlug splits "owner/name" and checks both parts.
func ParseRepoSlug(s string) (owner, name string, err error) {
	owner, name, ok := strings.Cut(s, "/")
	if !ok || !repoPartRE.MatchString(owner) || !repoPartRE.MatchString(name) ||
		owner == "." || owner == ".." || name == "." || name == ".." {
		return "", "", fmt.Errorf("%q is not owner/name", s)
	}
	return owner, name, nil
}

// RepoSlugFromURL derives owner/name from a git remote URL: https://host/acme/payments.git,
// git@host:acme/payments.git, ssh://git@host/acme/payments (the last two path segments, so a
// forge served under a sub-path works too). A local path has none.
func RepoSlugFromURL(remote string) (string, error) {
	var path string
	switch {
	case strings.Contains(remote, "://"):
		u, err := url.Parse(remote)
		if err != nil || u.Host == "" || u.Scheme == "file" {
			return "", fmt.Errorf("%q is not a forge URL", remote)
		}
		path = u.Path
	case strings.Contains(remote, ":") && !strings.HasPrefix(remote, "/") && !strings.HasPrefix(remote, "."):
		// scp-like syntax: [user@]host:owner/name.git
		_, path, _ = strings.Cut(remote, ":")
	default:
		return "", fmt.Errorf("%q is a local path, not a forge URL", remote)
	}
	parts := strings.Split(strings.Trim(strings.TrimSuffix(strings.TrimSuffix(path, "/"), ".git"), "/"), "/")
	if len(parts) < 2 {
		return "", fmt.Errorf("%q has no owner/name path", remote)
	}
	slug := parts[len(parts)-2] + "/" + parts[len(parts)-1]
	if _, _, err := ParseRepoSlug(slug); err != nil {
		return "", fmt.Errorf("%q: %w", remote, err)
	}
	return slug, nil
}
