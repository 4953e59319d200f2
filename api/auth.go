package api

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"
	"unicode"

	"outerloop/workitems"
)

// Auth decides who may read and who may change things. Each credential (a token) has a role:
// a viewer reads, an operator also acts (see Role). A request proves a credential with a bearer
// header (CLI, scripts, CI webhooks) or with the console's session cookie, which a mutating
// form or fetch must pair with the CSRF token of its session. With no credential configured
// nothing can be changed over HTTP. Reads are open unless ReadLogin is on; asynqmon at /queues
// needs a login whenever a credential is configured (see Protect).
//
// Failed logins (the console's form and wrong bearer tokens) are rate-limited per client IP and
// in total; the state lives in this process's memory (see LoginLimits).
type Auth struct {
	creds     []cred
	byName    map[string]*cred
	readLogin bool
	clock     workitems.Clock
	maxAge    time.Duration
	limiter   *loginLimiter
}

// cred is a credential with the SHA-256 of its token, which keys its sessions' HMACs.
type cred struct {
	Credential
	sum [sha256.Size]byte
}

// AuthOptions configures NewAuthWith.
type AuthOptions struct {
	Credentials []Credential
	// ReadLogin requires a login (any role) to read the console and GET /api/*.
	ReadLogin bool
	// Clock is the clock (default the system clock): session expiry and the login rate limit use it.
	Clock workitems.Clock
	// SessionMaxAge is how long a console login lasts (default DefaultSessionMaxAge).
	SessionMaxAge time.Duration
	// Limits bound failed logins (zero fields take DefaultLoginLimits').
	Limits LoginLimits
}

// DefaultSessionMaxAge is how long a console login lasts.
const DefaultSessionMaxAge = 12 * time.Hour

// NewAuth returns an Auth with token as the one shared operator token ("" disables mutations),
// as before roles existed.
func NewAuth(token string) *Auth {
	o := AuthOptions{}
	if token != "" {
		o.Credentials = []Credential{{Name: OperatorTokenName, Role: RoleOperator, Token: token, Shared: true}}
	}
	a, err := NewAuthWith(o)
	if err != nil { // one well-formed credential cannot fail validation
		panic(err)
	}
	return a
}

// NewAuthWith returns an Auth for o, or an error naming the bad credential.
func NewAuthWith(o AuthOptions) (*Auth, error) {
	if err := validateCredentials(o.Credentials); err != nil {
		return nil, err
	}
	if o.ReadLogin && len(o.Credentials) == 0 {
		return nil, errNoCredentials
	}
	if o.Clock == nil {
		o.Clock = workitems.SystemClock{}
	}
	if o.SessionMaxAge <= 0 {
		o.SessionMaxAge = DefaultSessionMaxAge
	}
	a := &Auth{byName: map[string]*cred{}, readLogin: o.ReadLogin, clock: o.Clock, maxAge: o.SessionMaxAge,
		limiter: newLoginLimiter(o.Limits, o.Clock)}
	for _, c := range o.Credentials {
		cr := cred{Credential: c}
		if c.Token != "" {
			cr.sum = sha256.Sum256([]byte(c.Token))
		} else {
			b, _ := hex.DecodeString(c.SHA256) // validated above
			copy(cr.sum[:], b)
		}
		a.creds = append(a.creds, cr)
	}
	for i := range a.creds {
		a.byName[a.creds[i].Name] = &a.creds[i]
	}
	return a, nil
}

// Cookie and header names of the console session.
const (
	SessionCookie = "outerloop_session"
	CSRFHeader    = "X-CSRF-Token"
	CSRFField     = "csrf_token"
	// ActorHeader names the person behind a shared token's request (ignored for personal tokens).
	ActorHeader = "X-Outerloop-Actor"
)

// Enabled reports whether any credential is configured (a login is possible).
func (a *Auth) Enabled() bool { return len(a.creds) > 0 }

// CanAct reports whether an operator credential is configured (actions are possible).
func (a *Auth) CanAct() bool {
	for _, c := range a.creds {
		if c.Role == RoleOperator {
			return true
		}
	}
	return false
}

// ReadLogin reports whether reads need a login.
func (a *Auth) ReadLogin() bool { return a.readLogin }

// SessionMaxAge is how long a console login lasts.
func (a *Auth) SessionMaxAge() time.Duration { return a.maxAge }

// match returns the credential whose token is token, comparing against every credential so the
// time taken does not tell which (or whether one) matched.
func (a *Auth) match(token string) *cred {
	if token == "" {
		return nil
	}
	sum := sha256.Sum256([]byte(token))
	var found *cred
	for i := range a.creds {
		if subtle.ConstantTimeCompare(sum[:], a.creds[i].sum[:]) == 1 {
			found = &a.creds[i]
		}
	}
	return found
}

// Principal is who a request acts as.
type Principal struct {
	// Actor is the name recorded for the request's actions.
	Actor string `json:"actor"`
	// Credential names the token that proved it (never the token).
	Credential string `json:"credential"`
	Role       Role   `json:"role"`
	// Session is true for the console's session cookie, false for a bearer token.
	Session bool `json:"session,omitempty"`
	// Shared is true for a shared token, whose actor is the name its holder gave.
	Shared bool `json:"shared,omitempty"`
}

// mac derives a value from a credential's token hash that can be handed to a browser without
// revealing the token.
func (c *cred) mac(purpose string) string {
	m := hmac.New(sha256.New, c.sum[:])
	m.Write([]byte("outerloop:" + purpose))
	return hex.EncodeToString(m.Sum(nil))
}

// CSRFFor is the anti-forgery token the pages of p's session embed in forms.
func (a *Auth) CSRFFor(p Principal) string {
	c := a.byName[p.Credential]
	if c == nil {
		return ""
	}
	return c.mac("csrf")
}

// CSRFToken is the CSRF token of OUTERLOOP_API_TOKEN's sessions ("" without it).
func (a *Auth) CSRFToken() string { return a.CSRFFor(Principal{Credential: OperatorTokenName}) }

// NewSession returns the session cookie value for p: the credential's name, the actor and the
// time of login, signed with an HMAC keyed by the credential's token hash. It reveals nothing of
// the token; changing the token ends every session of it.
func (a *Auth) NewSession(p Principal) string {
	c := a.byName[p.Credential]
	if c == nil {
		return ""
	}
	payload := base64.RawURLEncoding.EncodeToString([]byte(c.Name + "\n" + p.Actor + "\n" + strconv.FormatInt(a.clock.Now().Unix(), 10)))
	return payload + "." + c.mac("session:"+payload)
}

// session reads r's session cookie: its principal, if the cookie is genuine and not expired.
func (a *Auth) session(r *http.Request) (Principal, bool) {
	ck, err := r.Cookie(SessionCookie)
	if err != nil {
		return Principal{}, false
	}
	payload, sig, ok := strings.Cut(ck.Value, ".")
	if !ok {
		return Principal{}, false
	}
	raw, err := base64.RawURLEncoding.DecodeString(payload)
	if err != nil {
		return Principal{}, false
	}
	parts := strings.Split(string(raw), "\n")
	if len(parts) != 3 {
		return Principal{}, false
	}
	c := a.byName[parts[0]]
	if c == nil || !hmac.Equal([]byte(sig), []byte(c.mac("session:"+payload))) {
		return Principal{}, false
	}
	at, err := strconv.ParseInt(parts[2], 10, 64)
	if err != nil {
		return Principal{}, false
	}
	if age := a.clock.Now().Sub(time.Unix(at, 0)); age < -time.Minute || age > a.maxAge {
		return Principal{}, false
	}
	return Principal{Actor: parts[1], Credential: c.Name, Role: c.Role, Session: true, Shared: c.Shared}, true
}

// LoggedIn reports whether r carries a valid session cookie.
func (a *Auth) LoggedIn(r *http.Request) bool {
	_, ok := a.session(r)
	return ok
}

// SessionPrincipal returns the principal of r's session cookie, if it is valid.
func (a *Auth) SessionPrincipal(r *http.Request) (Principal, bool) { return a.session(r) }

// Errors of Authorize and Login.
var (
	// ErrLoginRequired: no valid credential came with the request (401).
	ErrLoginRequired = errors.New("a valid token is required (Authorization: Bearer …, or a console login)")
	// ErrBadToken: a token was given and it is not a configured credential's (401).
	ErrBadToken = errors.New("that token is not one of the server's tokens")
	// ErrCSRF: a session's mutating request lacks its CSRF token (401).
	ErrCSRF = errors.New("a console session's action needs its CSRF token (reload the page)")
	// ErrRole: the credential's role does not allow the request (403).
	ErrRole = errors.New("the token's role does not allow this")
	// ErrNoTokens: no credential is configured, so nobody can log in or act (403).
	ErrNoTokens = errors.New("the server has no API token (set " + EnvOperatorToken + ")")
)

// RateLimitedError refuses a login attempt while its client (or everyone) has too many recent
// failures (429 with Retry-After).
type RateLimitedError struct {
	RetryAfter time.Duration
	Global     bool
}

func (e *RateLimitedError) Error() string {
	scope := "from this address"
	if e.Global {
		scope = "on this server"
	}
	return fmt.Sprintf("too many failed logins %s: try again in %d s", scope, e.RetrySeconds())
}

// RetrySeconds is RetryAfter rounded up to whole seconds (at least 1), for Retry-After.
func (e *RateLimitedError) RetrySeconds() int {
	return max(1, int((e.RetryAfter+time.Second-1)/time.Second))
}

// StatusOf maps an error of Authorize or Login to its HTTP status.
func StatusOf(err error) int {
	var rl *RateLimitedError
	switch {
	case errors.As(err, &rl):
		return http.StatusTooManyRequests
	case errors.Is(err, ErrRole), errors.Is(err, ErrNoTokens):
		return http.StatusForbidden
	}
	return http.StatusUnauthorized
}

// identity is what a request proved: a principal, or a failed or refused attempt.
type identity struct {
	p   Principal
	ok  bool
	err error // ErrBadToken or a *RateLimitedError when a bearer token failed or was not tried
}

type identityKey struct{}

// identify reads r's credential once per request (Protect stores it in the context, so a
// wrong bearer token counts one failure however many handlers look).
func (a *Auth) identify(r *http.Request) identity {
	if id, ok := r.Context().Value(identityKey{}).(*identity); ok && id != nil {
		return *id
	}
	if bearer, found := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer "); found {
		ip := ClientIP(r)
		if rl := a.limiter.check(ip); rl != nil {
			return identity{err: rl}
		}
		c := a.match(strings.TrimSpace(bearer))
		if c == nil {
			a.limiter.fail(ip)
			return identity{err: ErrBadToken}
		}
		p := Principal{Actor: c.Name, Credential: c.Name, Role: c.Role, Shared: c.Shared}
		if c.Shared {
			p.Actor = CleanActor(r.Header.Get(ActorHeader))
			if p.Actor == "" {
				p.Actor = "api"
			}
		}
		return identity{p: p, ok: true}
	}
	if p, ok := a.session(r); ok {
		return identity{p: p, ok: true}
	}
	return identity{}
}

// withIdentity stores r's identity in its context.
func (a *Auth) withIdentity(r *http.Request) (*http.Request, identity) {
	id := a.identify(r)
	return r.WithContext(context.WithValue(r.Context(), identityKey{}, &id)), id
}

// Identify returns r's principal, if it proved one.
func (a *Auth) Identify(r *http.Request) (Principal, bool) {
	id := a.identify(r)
	return id.p, id.ok
}

// Authorize reports who r acts as when it needs role need. A session's request that is not a
// GET or HEAD must carry the session's CSRF token (header or form field). Errors map to
// statuses with StatusOf.
func (a *Auth) Authorize(r *http.Request, need Role) (Principal, error) {
	return a.authorize(r, need, true)
}

// authorize is Authorize; without csrf a session's action is let through for the caller to
// check its origin instead (asynqmon).
func (a *Auth) authorize(r *http.Request, need Role, csrf bool) (Principal, error) {
	if !a.Enabled() {
		return Principal{}, ErrNoTokens
	}
	id := a.identify(r)
	if id.err != nil {
		return Principal{}, id.err
	}
	if !id.ok {
		return Principal{}, ErrLoginRequired
	}
	if !id.p.Role.Allows(need) {
		return id.p, fmt.Errorf("%w: %s is a %s, this needs %s", ErrRole, id.p.Credential, id.p.Role, need)
	}
	if csrf && id.p.Session && r.Method != http.MethodGet && r.Method != http.MethodHead {
		csrf := r.Header.Get(CSRFHeader)
		if csrf == "" {
			csrf = r.FormValue(CSRFField)
		}
		if !hmac.Equal([]byte(csrf), []byte(a.CSRFFor(id.p))) {
			return Principal{}, ErrCSRF
		}
	}
	return id.p, nil
}

// Login checks a token typed into the console's login form from r's client. For a shared token
// the actor is name (or fallback); for a personal one the credential's own name. It returns the
// principal and its session cookie value; a wrong token counts against the rate limit.
func (a *Auth) Login(r *http.Request, token, name, fallback string) (Principal, string, error) {
	if !a.Enabled() {
		return Principal{}, "", ErrNoTokens
	}
	ip := ClientIP(r)
	if rl := a.limiter.check(ip); rl != nil {
		return Principal{}, "", rl
	}
	c := a.match(strings.TrimSpace(token))
	if c == nil {
		a.limiter.fail(ip)
		return Principal{}, "", ErrBadToken
	}
	p := Principal{Actor: c.Name, Credential: c.Name, Role: c.Role, Session: true, Shared: c.Shared}
	if c.Shared {
		p.Actor = CleanActor(name)
		if p.Actor == "" {
			p.Actor = fallback
		}
	}
	return p, a.NewSession(p), nil
}

// ClientIP is the address failed logins are counted against: the connection's peer. A proxy in
// front makes every client one address (the per-address limit then acts as a second global one).
func ClientIP(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	return host
}

// CleanActor keeps a short, printable actor name: letters, digits, spaces and .-_@ only.
func CleanActor(s string) string {
	var b strings.Builder
	for _, r := range strings.TrimSpace(s) {
		if unicode.IsLetter(r) || unicode.IsDigit(r) || strings.ContainsRune(" .-_@", r) {
			b.WriteRune(r)
		}
		if b.Len() >= 64 {
			break
		}
	}
	return strings.TrimSpace(b.String())
}
