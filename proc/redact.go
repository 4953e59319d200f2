package proc

import (
	"net/url"
	"regexp"
	"strings"
)

// Redaction: what a child process prints, and the command lines and URLs that name it, are
// recorded, logged and shown; nothing recorded may carry a credential. Redact replaces
// secret-looking text with the kind of secret; RedactURL and RedactURLError keep the credentials
// a repository URL carries out of names and error messages.

// secretPatterns are text that looks like a credential. Each names its kind; the match itself
// is never reported.
var secretPatterns = []struct {
	kind string
	re   *regexp.Regexp
}{
	{"private key", regexp.MustCompile(`-----BEGIN [A-Z0-9 ]*PRIVATE KEY( BLOCK)?-----`)},
	{"AWS access key id", regexp.MustCompile(`\b(AKIA|ASIA)[0-9A-Z]{16}\b`)},
	{"AWS secret access key", regexp.MustCompile(`(?i)aws_?secret_?access_?key\s*[:=]\s*["']?[A-Za-z0-9/+=]{40}`)},
	{"GitHub token", regexp.MustCompile(`\b(gh[pousr]_[A-Za-z0-9]{36,}|github_pat_[A-Za-z0-9_]{40,})\b`)},
	{"API secret key (sk-)", regexp.MustCompile(`\bsk-(ant-|proj-|live_|test_)?[A-Za-z0-9_\-]{20,}`)},
	{"Slack token", regexp.MustCompile(`\bxox[abprs]-[A-Za-z0-9-]{10,}`)},
	{"Google API key", regexp.MustCompile(`\bAIza[0-9A-Za-z_\-]{35}\b`)},
	{"hard-coded credential", regexp.MustCompile(`(?i)\b(password|passwd|secret|api_?key|access_?token)\s*[:=]\s*["'][^"'\s$]{16,}["']`)},
}

// SecretKind returns the kind of secret a line holds ("GitHub token", "private key", …), or ""
// when it holds none.
func SecretKind(line []byte) string {
	for _, p := range secretPatterns {
		if p.re.Match(line) {
			return p.kind
		}
	}
	return ""
}

// Redact replaces secret-looking text with the kind of secret ("[redacted GitHub token]"), so
// failure summaries, output tails, command lines and reasons never carry a credential into an
// item, its events or logs.
func Redact(s string) string {
	for _, p := range secretPatterns {
		if p.re.MatchString(s) {
			s = p.re.ReplaceAllLiteralString(s, "[redacted "+p.kind+"]")
		}
	}
	return s
}

// RedactURL removes credentials (user:password@, query strings, fragments) from a repository
// URL, so it can be recorded, logged and used in names. Anything that is not a URL with a
// scheme and a host (a local path) is returned as it is.
func RedactURL(src string) string {
	u, err := url.Parse(src)
	if err != nil || u.Scheme == "" || u.Host == "" {
		return src
	}
	u.User, u.RawQuery, u.Fragment = nil, "", ""
	return u.String()
}

// RedactURLError keeps the credentials the URL src carries out of err's text (git quotes the
// URL it failed on): the URL is replaced by RedactURL's form and its password (or token user
// name) by "***". errors.Is and As still see the original.
func RedactURLError(err error, src string) error {
	if err == nil || RedactURL(src) == src {
		return err
	}
	r := &redactedError{err: err, src: src}
	if r.Error() == err.Error() {
		return err
	}
	return r
}

type redactedError struct {
	err error
	src string
}

func (e *redactedError) Error() string {
	msg := strings.ReplaceAll(e.err.Error(), e.src, RedactURL(e.src))
	if u, err := url.Parse(e.src); err == nil && u.User != nil {
		secret, hasPassword := u.User.Password()
		if !hasPassword {
			secret = u.User.Username() // https://TOKEN@host/…
		}
		if secret != "" {
			msg = strings.ReplaceAll(msg, secret, "***")
		}
	}
	return msg
}

func (e *redactedError) Unwrap() error { return e.err }
