package forge

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"outerloop/workitems"
	"outerloop/workitems/config"
)

// Reading a template's repo: the worker's mirror fetches it, and validate checks it, with the
// credential of the forge the repo belongs to, the same GitAuth the push uses. A repo belongs
// to the forge whose git origin (scheme://host[:port] of its clone URLs) is the repo URL's.

// GitOrigin returns the origin of the git URLs of a forge's repositories, "" when fc has no
// usable base_url: a gitea's base_url is its server; a github's is its API root, whose git
// host is github.com for api.github.com and the same host for GitHub Enterprise
// (https://HOST/api/v3).
func GitOrigin(fc config.ForgeConfig) string {
	base := fc.BaseURL
	if base == "" && fc.Kind == workitems.ForgeGitHub {
		base = config.DefaultGitHubAPI
	}
	u, err := url.Parse(base)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
		return ""
	}
	host := strings.ToLower(u.Host)
	if fc.Kind == workitems.ForgeGitHub && host == "api.github.com" {
		host = "github.com"
	}
	return strings.ToLower(u.Scheme) + "://" + host
}

// repoOrigin is an http(s) repo URL's origin, "" for anything else (ssh, local paths).
func repoOrigin(repoURL string) string {
	u, err := url.Parse(repoURL)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
		return ""
	}
	return strings.ToLower(u.Scheme) + "://" + strings.ToLower(u.Host)
}

// ForRepo returns the key of the forge repoURL belongs to: among the forges whose git origin
// is the URL's, the first of prefer (a template's deliver.forge and CI forge), else the first
// by key. ok is false when none matches (an ssh URL, a local path, another host): the repo is
// then read without credentials.
func ForRepo(forges map[string]config.ForgeConfig, repoURL string, prefer ...string) (name string, ok bool) {
	origin := repoOrigin(repoURL)
	if origin == "" {
		return "", false
	}
	match := func(k string) bool {
		fc, ok := forges[k]
		return ok && GitOrigin(fc) == origin
	}
	for _, k := range prefer {
		if match(k) {
			return k, true
		}
	}
	keys := make([]string, 0, len(forges))
	for k := range forges {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		if match(k) {
			return k, true
		}
	}
	return "", false
}

// TemplateForges are the forges a template names, in the order ForRepo prefers them.
func TemplateForges(t *config.Template) []string {
	var out []string
	if t.Deliver.Forge != "" {
		out = append(out, t.Deliver.Forge)
	}
	if t.DoneCheck.CI != nil && t.DoneCheck.CI.Forge != "" && t.DoneCheck.CI.Forge != t.Deliver.Forge {
		out = append(out, t.DoneCheck.CI.Forge)
	}
	return out
}

// Redact removes the credential, raw or encoded, from s (git's output, an error's text).
func (a GitAuth) Redact(s string) string { return a.redact(s) }

// ReadCheck is the outcome of CheckRead.
type ReadCheck struct {
	OK bool
	// Status is what the remote's smart-HTTP endpoint answered the same credential when git
	// failed (0 when it could not be asked or answered nothing).
	Status int
	// Message is git's last lines, the credential removed.
	Message string
}

// CheckRead runs `git ls-remote --heads <url>` with auth (zero: anonymously) in env (the
// child's whole environment before auth's entries; nil: proc.BaseEnv()) and, when git fails,
// asks the remote's upload-pack endpoint with the same header for the HTTP status.
func CheckRead(ctx context.Context, repoURL string, auth GitAuth, env []string, timeout time.Duration) ReadCheck {
	r := PushRequest{URL: repoURL, Auth: auth, Env: env, Timeout: cmp.Or(timeout, 30*time.Second)}
	res, out := runGit(ctx, &r, []string{"ls-remote", "--heads", "--", repoURL})
	if res.ExitCode == 0 && res.Err == nil && !res.TimedOut && !res.Canceled {
		return ReadCheck{OK: true}
	}
	c := ReadCheck{Message: clip(lastLines(out, 3), 300)}
	switch {
	case res.TimedOut:
		c.Message = fmt.Sprintf("no answer within %s", r.Timeout)
		return c
	case res.Err != nil:
		c.Message = auth.redact(res.Err.Error())
		return c
	}
	if code, err := readProbe(ctx, repoURL, auth, r.Timeout); err == nil {
		c.Status = code
	}
	return c
}

// readProbe asks the smart-HTTP endpoint git fetches from whether the credential may read.
func readProbe(ctx context.Context, repoURL string, auth GitAuth, timeout time.Duration) (int, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimSuffix(repoURL, "/")+"/info/refs?service=git-upload-pack", nil)
	if err != nil {
		return 0, err
	}
	if name, value, ok := strings.Cut(auth.header, ": "); ok {
		req.Header.Set(name, value)
	}
	// No redirects: a credential scoped to one origin is not sent on to another.
	c := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := c.Do(req)
	if err != nil {
		return 0, errors.New(auth.redact(err.Error()))
	}
	_ = resp.Body.Close()
	return resp.StatusCode, nil
}

// ReadAdvice says what a failed read's HTTP status means for the operator: which credential
// to fix and how (never the credential). withToken says whether a token was sent.
func ReadAdvice(status int, withToken bool, tokenEnv string) string {
	switch {
	case status == http.StatusUnauthorized && withToken:
		return fmt.Sprintf("HTTP 401: the forge refused the token in $%s (wrong, expired or revoked): set a valid token", tokenEnv)
	case status == http.StatusUnauthorized:
		return fmt.Sprintf("HTTP 401: the repository needs credentials: set $%s to a token that can read it", tokenEnv)
	case status == http.StatusForbidden:
		return fmt.Sprintf("HTTP 403: the token in $%s may not read this repository: give it read access (scope read:repository / contents: read)", tokenEnv)
	case status == http.StatusNotFound && withToken:
		return fmt.Sprintf("HTTP 404: no such repository, or the token in $%s cannot see it (forges answer 404 for private repositories a token may not read): check the URL and the token's access", tokenEnv)
	case status == http.StatusNotFound:
		return fmt.Sprintf("HTTP 404: no such repository, or it is private and $%s is not set: set it to a token that can read it", tokenEnv)
	case status != 0:
		return fmt.Sprintf("HTTP %d", status)
	}
	return ""
}
