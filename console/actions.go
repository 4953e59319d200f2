package console

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"outerloop/api"
	"outerloop/workitems"
	"outerloop/workitems/itemstore"
)

// SessionMaxAge is how long a console login lasts by default (api.DefaultSessionMaxAge).
const SessionMaxAge = api.DefaultSessionMaxAge

// actionFunc handles an authorised form post for actor.
type actionFunc func(w http.ResponseWriter, r *http.Request, v *view, actor string) (name string, status int)

// action guards a mutating form post: body size, an operator credential configured, and a
// session with the operator role and its CSRF token (or a bearer token). A refused post
// changes nothing.
func (c *Console) action(f actionFunc) http.HandlerFunc {
	return c.page(func(w http.ResponseWriter, r *http.Request, v *view) (string, int) {
		r.Body = http.MaxBytesReader(w, r.Body, api.MaxBody)
		if !c.o.Auth.CanAct() {
			return c.message(v, http.StatusForbidden, "Actions are disabled",
				"The server has no operator token, so the console is read-only. Set OUTERLOOP_API_TOKEN (or an operator in OUTERLOOP_TOKENS_FILE) and restart it.", "/")
		}
		p, err := c.o.Auth.Authorize(r, api.RoleOperator)
		var rl *api.RateLimitedError
		switch {
		case errors.Is(err, api.ErrRole):
			return c.message(v, http.StatusForbidden, "Not allowed",
				"You are logged in as a viewer: viewers read, operators act. Log in with an operator's token to do this.", "/login")
		case errors.As(err, &rl):
			w.Header().Set("Retry-After", strconv.Itoa(rl.RetrySeconds()))
			return c.message(v, http.StatusTooManyRequests, "Too many failed logins", rl.Error(), "/")
		case err != nil:
			return c.message(v, http.StatusUnauthorized, "Not allowed",
				"This action needs a login (and the form's CSRF token). Log in with an operator's token and try again.", "/login")
		}
		return f(w, r, v, p.Actor)
	})
}

// resolve applies a person's decision to an item through the same path as the JSON API:
// api.ResolveRequest → Resolution → scheduler.Queue.Resolve. The store refuses a second
// resolution of the same escalation (the item is no longer escalated), so a double submit
// applies once and the second answers 409 with a clear message.
func (c *Console) resolve(w http.ResponseWriter, r *http.Request, v *view, actor string) (string, int) {
	id := r.PathValue("id")
	back := "/items/" + id
	req, err := resolveRequest(r)
	if err != nil {
		return c.message(v, http.StatusBadRequest, "Nothing was changed", err.Error(), back)
	}
	res, err := req.Resolution(actor)
	if err != nil {
		return c.message(v, http.StatusBadRequest, "Nothing was changed", err.Error(), back)
	}
	api.AuditDetail(r.Context(), string(res.Action))
	it, err := c.o.Queue.Resolve(r.Context(), id, res)
	if err != nil {
		status, text := c.resolveError(r, id, string(res.Action), err)
		return c.message(v, status, "Nothing was changed", text, back)
	}
	c.o.Logger.Info("item resolved", "item", it.ID, "action", res.Action, "actor", res.Actor, "state", it.State, "via", "console")
	text := fmt.Sprintf("%s: %s by %s; the item is %s.", it.ID, res.Action, res.Actor, it.State)
	if res.Action == workitems.ResolveRetry {
		text = fmt.Sprintf("%s: retry queued by %s as attempt %d (changed: %s).", it.ID, res.Actor, it.Attempt,
			strings.Join(it.Current().Changed, ", "))
	}
	setFlash(w, r, flash{Text: text})
	http.Redirect(w, r, back, http.StatusSeeOther)
	return "", 0
}

// resolveError explains a refused resolution in words a person can act on.
func (c *Console) resolveError(r *http.Request, id, action string, err error) (int, string) {
	switch {
	case errors.Is(err, workitems.ErrNotFound):
		return http.StatusNotFound, fmt.Sprintf("There is no item %q.", id)
	case errors.Is(err, workitems.ErrInvalidTransition):
		state := "no longer escalated"
		if it, gerr := c.store.Get(r.Context(), id); gerr == nil {
			state = "now " + string(it.State)
		}
		return http.StatusConflict, fmt.Sprintf("Item %s is %s, so %s was not applied: it was probably resolved already "+
			"(a second submit of the same form changes nothing). Reload the item to see who resolved it.", id, state, action)
	case errors.Is(err, itemstore.ErrNoChange):
		return http.StatusUnprocessableEntity, "A retry must change something: give input text or raise a budget."
	}
	c.o.Logger.Error("console: resolve", "item", id, "err", err)
	return http.StatusInternalServerError, "The action failed: " + err.Error()
}

// resolveRequest reads the resolve forms into the JSON API's request. Actions: close, cancel,
// retry (with input text) and raise (a retry with a raised budget of one kind, per attempt or
// for the whole item, and optional input).
func resolveRequest(r *http.Request) (api.ResolveRequest, error) {
	action := r.PostFormValue("action")
	req := api.ResolveRequest{Action: action, Input: r.PostFormValue("input")}
	switch action {
	case string(workitems.ResolveClose), string(workitems.ResolveCancel), string(workitems.ResolveRetry):
		return req, nil
	case "raise":
		req.Action = string(workitems.ResolveRetry)
	default:
		return req, fmt.Errorf("action %q: want close, retry, raise or cancel", action)
	}
	kind := workitems.BudgetKind(r.PostFormValue("kind"))
	val, err := budgetValue(kind, r.PostFormValue("value"))
	if err != nil {
		return req, err
	}
	m := map[string]float64{string(kind): val}
	switch r.PostFormValue("scope") {
	case "attempt", "":
		req.Budget = m
	case "item":
		req.ItemBudget = m
	default:
		return req, fmt.Errorf("scope %q: want attempt or item", r.PostFormValue("scope"))
	}
	return req, nil
}

// budgetValue parses a budget value typed in a form; wall time takes a duration ("20m") or
// seconds.
func budgetValue(kind workitems.BudgetKind, s string) (float64, error) {
	s = strings.TrimSpace(s)
	known := false
	for _, k := range workitems.AllBudgetKinds() {
		known = known || k == kind
	}
	if !known {
		return 0, fmt.Errorf("budget kind %q: want one of %v", kind, workitems.AllBudgetKinds())
	}
	if kind == workitems.BudgetWallTime {
		if d, err := time.ParseDuration(s); err == nil {
			s = strconv.FormatFloat(d.Seconds(), 'f', -1, 64)
		}
	}
	v, err := strconv.ParseFloat(s, 64)
	if err != nil || v <= 0 {
		return 0, fmt.Errorf("budget %s: %q is not a positive number", kind, s)
	}
	return v, nil
}

type loginPage struct {
	Error string
	Next  string
	Name  string
}

func (c *Console) loginForm(w http.ResponseWriter, r *http.Request, v *view) (string, int) {
	v.Title, v.Page = "Log in", loginPage{Next: localPath(r.URL.Query().Get("next"))}
	return "login", http.StatusOK
}

// login checks the token typed into the form and, when it is one of the server's, sets the
// session cookie (HttpOnly, SameSite=Strict): an HMAC-signed record of the credential's name,
// the actor and the login time, never the token. A shared token's actor is the name typed; a
// personal token's is its own name. A wrong token sets nothing and counts against the
// rate limit of failed logins (429 with Retry-After past it). Success and failure are both
// recorded in the audit list.
func (c *Console) login(w http.ResponseWriter, r *http.Request, v *view) (string, int) {
	r.Body = http.MaxBytesReader(w, r.Body, api.MaxBody)
	p := loginPage{Next: localPath(r.PostFormValue("next")), Name: cleanName(r.PostFormValue("name"))}
	v.Title = "Log in"
	api.AuditAction(r.Context(), "login", "")
	who, session, err := c.o.Auth.Login(r, r.PostFormValue("token"), p.Name, DefaultActor)
	var rl *api.RateLimitedError
	switch {
	case errors.Is(err, api.ErrNoTokens):
		p.Error = "The server has no API token (OUTERLOOP_API_TOKEN), so nobody can log in and the console is read-only."
		v.Page = p
		return "login", http.StatusForbidden
	case errors.As(err, &rl):
		p.Error = "Too many failed logins: " + rl.Error() + "."
		v.Page = p
		w.Header().Set("Retry-After", strconv.Itoa(rl.RetrySeconds()))
		c.o.Logger.Warn("console: login rate-limited", "remote", api.ClientIP(r), "retry_after_s", rl.RetrySeconds())
		return "login", http.StatusTooManyRequests
	case err != nil:
		p.Error = "That token is not the server's API token (nor any other token it accepts)."
		v.Page = p
		attempted := p.Name
		if attempted == "" {
			attempted = "anonymous"
		}
		api.AuditPrincipal(r.Context(), api.Principal{Actor: attempted})
		api.AuditDetail(r.Context(), "wrong token")
		c.o.Logger.Warn("console: login refused", "remote", api.ClientIP(r))
		return "login", http.StatusUnauthorized
	}
	api.AuditPrincipal(r.Context(), who)
	age := int(c.o.Auth.SessionMaxAge().Seconds())
	http.SetCookie(w, &http.Cookie{Name: api.SessionCookie, Value: session, Path: "/", MaxAge: age,
		HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: isTLS(r)})
	setFlash(w, r, flash{Text: fmt.Sprintf("Logged in as %s (%s).", who.Actor, who.Role)})
	next := p.Next
	if next == "" {
		next = "/escalations"
	}
	http.Redirect(w, r, next, http.StatusSeeOther)
	return "", 0
}

// logout clears the session. It needs no CSRF token: ending a session harms nobody.
func (c *Console) logout(w http.ResponseWriter, r *http.Request) {
	if p, ok := c.o.Auth.SessionPrincipal(r); ok {
		api.AuditPrincipal(r.Context(), p)
	}
	for _, name := range []string{api.SessionCookie, ActorCookie} {
		http.SetCookie(w, &http.Cookie{Name: name, Value: "", Path: "/", MaxAge: -1, HttpOnly: true,
			SameSite: http.SameSiteStrictMode, Secure: isTLS(r)})
	}
	setFlash(w, r, flash{Text: "Logged out. The console is read-only."})
	http.Redirect(w, r, "/", http.StatusSeeOther)
}

// cleanName keeps a short, printable actor name (api.CleanActor).
func cleanName(s string) string { return api.CleanActor(s) }

// localPath accepts only a path on this site as a redirect target (no open redirects).
func localPath(p string) string {
	if !strings.HasPrefix(p, "/") || strings.HasPrefix(p, "//") || strings.HasPrefix(p, "/\\") || strings.ContainsAny(p, "\r\n") {
		return ""
	}
	return p
}
