package api

import (
	"crypto/hmac"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"net/http"
	"strings"
)

// Auth decides who may change things. Reads are open; every mutating request needs the API
// token, either as a bearer header (CLI, scripts, CI webhooks) or as the console's session
// cookie together with a matching CSRF header or form field. With no token configured nothing
// can be changed over HTTP.
type Auth struct {
	token string
}

// NewAuth returns an Auth for token ("" disables mutations).
func NewAuth(token string) *Auth { return &Auth{token: token} }

// Cookie and header names of the console session.
const (
	SessionCookie = "outerloop_session"
	CSRFHeader    = "X-CSRF-Token"
	CSRFField     = "csrf_token"
	ActorHeader   = "X-Outerloop-Actor"
)

// Enabled reports whether a token is configured.
func (a *Auth) Enabled() bool { return a.token != "" }

// Check reports whether a token is valid.
func (a *Auth) Check(token string) bool {
	return a.token != "" && subtle.ConstantTimeCompare([]byte(token), []byte(a.token)) == 1
}

// mac derives a value from the token that can be handed to a browser without revealing it.
func (a *Auth) mac(purpose string) string {
	m := hmac.New(sha256.New, []byte(a.token))
	m.Write([]byte("outerloop:" + purpose))
	return hex.EncodeToString(m.Sum(nil))
}

// SessionValue is the cookie value of a logged-in console session.
func (a *Auth) SessionValue() string { return a.mac("session") }

// CSRFToken is the anti-forgery token pages embed in forms.
func (a *Auth) CSRFToken() string { return a.mac("csrf") }

// LoggedIn reports whether r carries a valid session cookie.
func (a *Auth) LoggedIn(r *http.Request) bool {
	if !a.Enabled() {
		return false
	}
	c, err := r.Cookie(SessionCookie)
	return err == nil && hmac.Equal([]byte(c.Value), []byte(a.SessionValue()))
}

// Authorized reports whether r may mutate, and the actor to record.
func (a *Auth) Authorized(r *http.Request) (actor string, ok bool) {
	if !a.Enabled() {
		return "", false
	}
	actor = strings.TrimSpace(r.Header.Get(ActorHeader))
	if bearer, found := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer "); found {
		if !a.Check(strings.TrimSpace(bearer)) {
			return "", false
		}
		if actor == "" {
			actor = "api"
		}
		return actor, true
	}
	if a.LoggedIn(r) {
		csrf := r.Header.Get(CSRFHeader)
		if csrf == "" {
			csrf = r.FormValue(CSRFField)
		}
		if hmac.Equal([]byte(csrf), []byte(a.CSRFToken())) {
			if actor == "" {
				actor = "console"
			}
			return actor, true
		}
	}
	return "", false
}
