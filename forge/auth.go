package forge

import (
	"context"
	"encoding/base64"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"outerloop/workitems"
)

// tokenTransport puts the forge's token, read from its variable at each request, into the
// Authorization header. Without a token, reads go out anonymously (public repositories, as
// the GitHub CI source always allowed; logged once) and writes fail with ErrMissingToken
// before anything is sent.
type tokenTransport struct {
	base    http.RoundTripper
	timeout time.Duration // per request, unless the caller's context has a deadline
	getenv  func(string) string
	env     string
	scheme  string // "Bearer" (GitHub), "token" (Gitea)
	logger  *slog.Logger
	forge   string
	warned  atomic.Bool
}

func (t *tokenTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	tok := t.getenv(t.env)
	if tok != "" || (req.Method == http.MethodGet || req.Method == http.MethodHead) {
		// The timeout lives in the request's context, not in http.Client.Timeout: go-github
		// leaves error bodies unclosed, and a client timeout keeps a goroutine per such
		// request until it fires; a context's timer is no goroutine.
		if _, ok := req.Context().Deadline(); !ok && t.timeout > 0 {
			ctx, cancel := context.WithTimeout(req.Context(), t.timeout)
			resp, err := t.send(req.WithContext(ctx), tok)
			if err != nil {
				cancel()
				return nil, err
			}
			resp.Body = &cancelBody{ReadCloser: resp.Body, cancel: cancel}
			return resp, nil
		}
	}
	return t.send(req, tok)
}

type cancelBody struct {
	io.ReadCloser
	cancel context.CancelFunc
}

func (b *cancelBody) Close() error {
	err := b.ReadCloser.Close()
	b.cancel()
	return err
}

func (t *tokenTransport) send(req *http.Request, tok string) (*http.Response, error) {
	if tok == "" {
		if req.Method != http.MethodGet && req.Method != http.MethodHead {
			if req.Body != nil {
				_ = req.Body.Close()
			}
			return nil, missingToken(t.env)
		}
		if !t.warned.Swap(true) {
			t.logger.Warn("forge: token variable not set; reading anonymously (writes will fail)",
				slog.String("forge", t.forge), slog.String("env", t.env))
		}
		return t.base.RoundTrip(req)
	}
	req = req.Clone(req.Context())
	req.Header.Set("Authorization", t.scheme+" "+tok)
	return t.base.RoundTrip(req)
}

// missingToken is the error of an unset token variable; it names the variable, not a value.
type missingTokenError struct{ env string }

func (e *missingTokenError) Error() string { return fmt.Sprintf("$%s is not set", e.env) }
func (e *missingTokenError) Unwrap() error { return ErrMissingToken }

func missingToken(env string) error { return &missingTokenError{env: env} }

func authClient(cfg Config, scheme string) *http.Client {
	c := *cfg.HTTPClient
	base := c.Transport
	if base == nil {
		base = http.DefaultTransport
	}
	// The rate gate sits outside the token transport so that waiting for a limit's reset does
	// not count against the per-request timeout.
	c.Transport = &rateGate{clock: cfg.Clock, maxWait: cfg.MaxRateWait, forge: cfg.Name, shared: cfg.SharedLimits, logger: cfg.Logger,
		base: &tokenTransport{base: base, timeout: cfg.RequestTimeout, getenv: cfg.Getenv, env: cfg.TokenEnv,
			scheme: scheme, logger: cfg.Logger, forge: cfg.Name}}
	return &c
}

// GitAuth is what git needs to authenticate to one remote: an Authorization header scoped to
// the remote's origin (http.<origin>/.extraHeader), given to git through the environment, so
// the token is never in a URL, an argv or a config file. Its String hides the header.
type GitAuth struct {
	scope  string // scheme://host[:port]/
	header string // "Authorization: Basic …"
	token  string // kept to scrub it from anything git prints
}

// NewGitAuth builds the auth for remoteURL with token. The URL must be http(s) and carry no
// credentials of its own.
func NewGitAuth(remoteURL, token string) (GitAuth, error) {
	scope, err := gitScope(remoteURL)
	if err != nil {
		return GitAuth{}, err
	}
	if token == "" {
		return GitAuth{}, ErrMissingToken
	}
	// Basic with the token as password is what both GitHub ("x-access-token") and Gitea (any
	// user name; the password is taken as a token) accept for git over HTTPS.
	cred := base64.StdEncoding.EncodeToString([]byte("x-access-token:" + token))
	return GitAuth{scope: scope, header: "Authorization: Basic " + cred, token: token}, nil
}

// redact removes the token, raw or encoded, from s.
func (a GitAuth) redact(s string) string {
	if a.token == "" {
		return s
	}
	_, cred, _ := strings.Cut(a.header, "Basic ")
	return strings.NewReplacer(a.token, "[REDACTED]", cred, "[REDACTED]").Replace(s)
}

// gitScope is the origin a remote URL's credentials are scoped to.
func gitScope(remoteURL string) (string, error) {
	u, err := url.Parse(remoteURL)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
		return "", fmt.Errorf("remote %q is not an http(s) URL", redactURL(remoteURL))
	}
	if u.User != nil {
		return "", fmt.Errorf("remote %q carries credentials; give the plain URL (the token comes from token_env)", redactURL(remoteURL))
	}
	return u.Scheme + "://" + u.Host + "/", nil
}

// redactURL drops a URL's userinfo, for messages.
func redactURL(s string) string {
	u, err := url.Parse(s)
	if err != nil {
		return "(unparsable URL)"
	}
	if u.User != nil {
		u.User = url.User("REDACTED")
	}
	return u.String()
}

// Scope is the origin the credentials apply to (no secret).
func (a GitAuth) Scope() string { return a.scope }

// String describes the auth without its secret.
func (a GitAuth) String() string { return "forge.GitAuth{" + a.scope + ", header redacted}" }

// GoString hides the secret from %#v too.
func (a GitAuth) GoString() string { return a.String() }

// IsZero reports whether a carries no credentials.
func (a GitAuth) IsZero() bool { return a.header == "" }

// Env appends, to env (a git child's whole environment), the entries that make git send the
// header to the remote and nothing else: credential helpers are switched off (an ambient one
// must not answer for another identity) and git never prompts. GIT_CONFIG_COUNT entries
// already in env are kept; the new ones follow them.
func (a GitAuth) Env(env []string) []string {
	n := 0
	out := make([]string, 0, len(env)+8)
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, "GIT_CONFIG_COUNT="); ok {
			n, _ = strconv.Atoi(v)
			continue
		}
		out = append(out, kv)
	}
	add := func(k, v string) {
		out = append(out, fmt.Sprintf("GIT_CONFIG_KEY_%d=%s", n, k), fmt.Sprintf("GIT_CONFIG_VALUE_%d=%s", n, v))
		n++
	}
	add("credential.helper", "")
	if a.header != "" {
		add("http."+a.scope+".extraHeader", a.header)
	}
	return append(out, "GIT_CONFIG_COUNT="+strconv.Itoa(n), "GIT_TERMINAL_PROMPT=0", "GIT_ASKPASS=", "SSH_ASKPASS=")
}

// gitAuth is the shared GitAuth of both clients: the token is read now.
func gitAuth(cfg Config, remoteURL string) (GitAuth, error) {
	tok := cfg.Getenv(cfg.TokenEnv)
	if tok == "" {
		_, err := gitScope(remoteURL)
		if err == nil {
			err = missingToken(cfg.TokenEnv)
		}
		return GitAuth{}, &Error{Forge: cfg.Name, Op: "git auth", Class: workitems.ClassInvalidInput, Err: err}
	}
	a, err := NewGitAuth(remoteURL, tok)
	if err != nil {
		return GitAuth{}, &Error{Forge: cfg.Name, Op: "git auth", Class: workitems.ClassInvalidInput, Err: err}
	}
	return a, nil
}
