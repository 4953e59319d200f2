package api

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// ProtectOptions configures Protect.
type ProtectOptions struct {
	Auth *Auth
	// Audit records every action; nil records nothing.
	Audit  *AuditLog
	Logger *slog.Logger
}

// QueuesPath is where asynqmon is mounted.
const QueuesPath = "/queues"

// Protect is the access gate in front of the whole server (API, console and asynqmon): one
// place that decides reads and asynqmon, and records every action in the audit list.
//
//   - Reads (GET, HEAD) of the console and /api/* need a login of any role when ReadLogin is on;
//     /healthz, /metrics, /static/ and the login page stay open. A browser is sent to /login.
//   - The audit list (/audit, /api/audit) needs a login whenever a credential is configured.
//   - asynqmon at /queues: reading needs a login whenever a credential is configured, anything
//     else needs the operator role, and with a session cookie a same-origin request (its SPA
//     cannot send our CSRF token; the browser's Origin / Sec-Fetch-Site header stands in for it,
//     on top of the SameSite=Strict cookie). With no credential asynqmon is read-only.
//   - Other mutating requests are decided by their handlers (Auth.Authorize), so their
//     refusals keep their own words. A template's trigger endpoint is authenticated by the
//     template's own secret (trigger.go): its bearer token is not looked up among the API's.
//
// Every request other than GET and HEAD that proved a credential, presented a wrong one, or
// is a login is recorded after it is answered: actor, credential, role, door, action, target,
// result. Anonymous requests with no credential at all and refusals by the login rate limit are
// not recorded: they name nobody, and a flood of them would push real entries out of the capped
// list.
func Protect(next http.Handler, o ProtectOptions) http.Handler {
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	a := o.Auth
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var id identity
		if !isTriggerPath(r) {
			// A trigger's bearer token is its template's secret: read as one of the API's, it
			// would count as a failed login (and rate-limit the caller).
			r, id = a.withIdentity(r)
		}
		path := r.URL.Path
		read := r.Method == http.MethodGet || r.Method == http.MethodHead
		queues := path == QueuesPath || strings.HasPrefix(path, QueuesPath+"/")
		var need Role
		switch {
		case queues && !read:
			need = RoleOperator
		case queues, path == "/audit", path == "/api/audit":
			if a.Enabled() {
				need = RoleViewer
			}
		case read && a.ReadLogin() && !openPath(path):
			need = RoleViewer
		}
		if queues && !read && !a.Enabled() {
			refuse(w, ErrNoTokens)
			return
		}
		if need != "" {
			p, err := a.authorize(r, need, !queues)
			if err == nil && queues && !read && p.Session && !sameOrigin(r) {
				err = ErrCSRF
			}
			if err != nil {
				if read && !strings.HasPrefix(path, "/api/") && !queuesAPI(path) && errors.Is(err, ErrLoginRequired) {
					http.Redirect(w, r, "/login?next="+url.QueryEscape(r.URL.RequestURI()), http.StatusSeeOther)
					return
				}
				if !read {
					sw := &statusWriter{ResponseWriter: w}
					refuse(sw, err)
					o.record(r, id, &auditNote{}, sw.code())
					return
				}
				refuse(w, err)
				return
			}
		}
		if read {
			next.ServeHTTP(w, r)
			return
		}
		note := &auditNote{}
		r = r.WithContext(context.WithValue(r.Context(), auditNoteKey{}, note))
		sw := &statusWriter{ResponseWriter: w}
		next.ServeHTTP(sw, r)
		o.record(r, id, note, sw.code())
	})
}

// openPath is a read that needs no login even with ReadLogin on.
func openPath(p string) bool {
	return p == "/healthz" || p == "/metrics" || p == "/login" || strings.HasPrefix(p, "/static/")
}

// queuesAPI is asynqmon's JSON API (its SPA's fetches), answered with JSON, not a redirect.
func queuesAPI(p string) bool { return strings.HasPrefix(p, QueuesPath+"/api/") }

// sameOrigin reports whether a browser says the request comes from this site's own pages. A
// client that sends neither header is not a browser's cross-site request.
func sameOrigin(r *http.Request) bool {
	if s := r.Header.Get("Sec-Fetch-Site"); s != "" {
		return s == "same-origin"
	}
	if o := r.Header.Get("Origin"); o != "" {
		u, err := url.Parse(o)
		return err == nil && u.Host == r.Host
	}
	return true
}

// refuse answers an access refusal as JSON, with WWW-Authenticate or Retry-After as it calls for.
func refuse(w http.ResponseWriter, err error) {
	code := StatusOf(err)
	if rl, ok := err.(*RateLimitedError); ok {
		w.Header().Set("Retry-After", strconv.Itoa(rl.RetrySeconds()))
	}
	if code == http.StatusUnauthorized {
		w.Header().Set("WWW-Authenticate", `Bearer realm="outerloop"`)
	}
	writeErr(w, code, "%v", err)
}

// record writes the audit entry of an answered action.
func (o ProtectOptions) record(r *http.Request, id identity, n *auditNote, status int) {
	if o.Audit == nil || n.skip {
		return
	}
	p, known := id.p, id.ok
	if n.p != nil {
		p, known = *n.p, true
	}
	login := r.URL.Path == "/login"
	if !known && !login && id.err != ErrBadToken {
		return // anonymous, or refused by the rate limit: see Protect
	}
	if status == http.StatusTooManyRequests && !id.ok && n.p == nil {
		return
	}
	e := AuditEntry{Actor: p.Actor, Credential: p.Credential, Role: p.Role, Via: via(r.URL.Path), Status: status,
		Result: resultOf(status), Detail: n.detail, Remote: ClientIP(r), Route: r.Pattern}
	if e.Actor == "" {
		e.Actor = "anonymous"
	}
	if e.Route == "" {
		e.Route = r.Method + " " + r.URL.Path
	}
	e.Action, e.Target = actionOf(r)
	if n.action != "" {
		e.Action, e.Target = n.action, n.target
	}
	if id.err == ErrBadToken && n.p == nil {
		e.Detail = "wrong bearer token"
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), 2*time.Second)
	defer cancel()
	if err := o.Audit.Record(ctx, e); err != nil {
		o.Logger.Error("audit: the entry was not recorded", "action", e.Action, "actor", e.Actor, "err", err)
	}
}

func via(path string) AuditVia {
	switch {
	case strings.HasPrefix(path, "/api/"):
		return ViaAPI
	case path == QueuesPath || strings.HasPrefix(path, QueuesPath+"/"):
		return ViaQueues
	}
	return ViaConsole
}

func resultOf(status int) AuditResult {
	switch {
	case status >= 500:
		return AuditError
	case status >= 400:
		return AuditRefused
	}
	return AuditOK
}

// actionNames renames a route's last literal segment where it is not a verb.
var actionNames = map[string]string{"items": "enqueue", "evidence": "ci-evidence"}

// actionOf derives the action and target from the route: the last literal segment of the
// pattern is the action ("POST /api/items/{id}/resolve" → resolve), its wildcards' values the
// target. asynqmon's routes end in a verb after a colon (…/queues/outerloop:pause →
// queues:pause, target queues/outerloop) or are a method on a resource.
func actionOf(r *http.Request) (action, target string) {
	path := r.URL.Path
	if via(path) == ViaQueues {
		rest := strings.TrimPrefix(strings.TrimPrefix(path, QueuesPath), "/api/")
		rest = strings.Trim(rest, "/")
		if i := strings.LastIndex(rest, ":"); i >= 0 && !strings.Contains(rest[i:], "/") {
			return "queues:" + rest[i+1:], rest[:i]
		}
		return "queues:" + strings.ToLower(r.Method), rest
	}
	pattern := r.Pattern
	if _, p, ok := strings.Cut(pattern, " "); ok {
		pattern = p
	}
	if pattern == "" {
		return strings.ToLower(r.Method), path
	}
	var targets []string
	for _, seg := range strings.Split(strings.Trim(pattern, "/"), "/") {
		if strings.HasPrefix(seg, "{") {
			name := strings.TrimSuffix(strings.TrimSuffix(strings.Trim(seg, "{}"), "..."), "$")
			if v := r.PathValue(name); v != "" {
				targets = append(targets, v)
			}
			continue
		}
		action = seg
	}
	if n, ok := actionNames[action]; ok {
		action = n
	}
	return action, strings.Join(targets, "/")
}

// statusWriter remembers the status of an answer.
type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach the real writer (flush, deadlines).
func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

func (w *statusWriter) code() int {
	if w.status == 0 {
		return http.StatusOK
	}
	return w.status
}
