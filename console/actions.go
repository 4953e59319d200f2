package console

import (
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
	"unicode"

	"outerloop/api"
	"outerloop/workitems"
)

// SessionMaxAge is how long a console login lasts in the browser.
const SessionMaxAge = 12 * time.Hour

// actionFunc handles an authorised form post for actor.
type actionFunc func(w http.ResponseWriter, r *http.Request, v *view, actor string) (name string, status int)

// action guards a mutating form post: body size, a configured token, and a session with its
// CSRF token (or a bearer token). A refused post changes nothing.
func (c *Console) action(f actionFunc) http.HandlerFunc {
	return c.page(func(w http.ResponseWriter, r *http.Request, v *view) (string, int) {
		r.Body = http.MaxBytesReader(w, r.Body, api.MaxBody)
		if !c.o.Auth.Enabled() {
			return c.message(v, http.StatusForbidden, "Actions are disabled",
				"The server has no API token, so the console is read-only. Set OUTERLOOP_API_TOKEN and restart it.", "/")
		}
		actor, ok := c.o.Auth.Authorized(r)
		if !ok {
			return c.message(v, http.StatusUnauthorized, "Not allowed",
				"This action needs a login (and the form's CSRF token). Log in with the API token and try again.", "/login")
		}
		if actor == DefaultActor && c.o.Auth.LoggedIn(r) {
			actor = actorName(r)
		}
		return f(w, r, v, actor)
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
	case errors.Is(err, workitems.ErrNoChange):
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

// login checks the API token typed into the form and, when it is right, sets the session
// cookie (HttpOnly, SameSite=Strict) and the actor's name. A wrong token sets nothing.
func (c *Console) login(w http.ResponseWriter, r *http.Request, v *view) (string, int) {
	r.Body = http.MaxBytesReader(w, r.Body, api.MaxBody)
	p := loginPage{Next: localPath(r.PostFormValue("next")), Name: cleanName(r.PostFormValue("name"))}
	v.Title = "Log in"
	if !c.o.Auth.Enabled() {
		p.Error = "The server has no API token (OUTERLOOP_API_TOKEN), so nobody can log in and the console is read-only."
		v.Page = p
		return "login", http.StatusForbidden
	}
	if !c.o.Auth.Check(strings.TrimSpace(r.PostFormValue("token"))) {
		p.Error = "That token is not the server's API token."
		v.Page = p
		c.o.Logger.Warn("console: login refused", "remote", r.RemoteAddr)
		return "login", http.StatusUnauthorized
	}
	age := int(SessionMaxAge.Seconds())
	http.SetCookie(w, &http.Cookie{Name: api.SessionCookie, Value: c.o.Auth.SessionValue(), Path: "/", MaxAge: age,
		HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: isTLS(r)})
	name := p.Name
	if name == "" {
		name = DefaultActor
	}
	http.SetCookie(w, &http.Cookie{Name: ActorCookie, Value: base64.RawURLEncoding.EncodeToString([]byte(name)), Path: "/",
		MaxAge: age, HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: isTLS(r)})
	setFlash(w, r, flash{Text: "Logged in as " + name + "."})
	next := p.Next
	if next == "" {
		next = "/escalations"
	}
	http.Redirect(w, r, next, http.StatusSeeOther)
	return "", 0
}

// logout clears the session. It needs no CSRF token: ending a session harms nobody.
func (c *Console) logout(w http.ResponseWriter, r *http.Request) {
	for _, name := range []string{api.SessionCookie, ActorCookie} {
		http.SetCookie(w, &http.Cookie{Name: name, Value: "", Path: "/", MaxAge: -1, HttpOnly: true,
			SameSite: http.SameSiteStrictMode, Secure: isTLS(r)})
	}
	setFlash(w, r, flash{Text: "Logged out. The console is read-only."})
	http.Redirect(w, r, "/", http.StatusSeeOther)
}

// actorName is the name typed at login, or DefaultActor.
func actorName(r *http.Request) string {
	ck, err := r.Cookie(ActorCookie)
	if err != nil {
		return DefaultActor
	}
	b, err := base64.RawURLEncoding.DecodeString(ck.Value)
	if err != nil {
		return DefaultActor
	}
	if n := cleanName(string(b)); n != "" {
		return n
	}
	return DefaultActor
}

// cleanName keeps a short, printable actor name: letters, digits, spaces and .-_@ only.
func cleanName(s string) string {
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

// localPath accepts only a path on this site as a redirect target (no open redirects).
func localPath(p string) string {
	if !strings.HasPrefix(p, "/") || strings.HasPrefix(p, "//") || strings.HasPrefix(p, "/\\") || strings.ContainsAny(p, "\r\n") {
		return ""
	}
	return p
}
