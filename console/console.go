// Package console is outerloop's web console: server-rendered pages (html/template, assets
// embedded with go:embed, a little vanilla JS and no build step) that show items, their
// attempts, evidence and delivered change (changed files, the unified diff, the pull request
// and its CI checks), what a waiting item waits for (CI, a review) and what woke its past waits,
// its review rounds, the templates, the experiments of the eval namespace with their reports
// and a chart, and an inbox: escalations a person resolves, and pull
// requests that have waited longer than waits.inbox_after for a person's review.
//
// The console owns its pages, its login form and its form actions. It owns no operations: an
// action turns a form into an api.ResolveRequest and calls scheduler.Queue.Resolve, exactly as
// POST /api/items/{id}/resolve does, so the console, the JSON API and the CLI share one code
// path. Authentication is api.Auth's: a login with the API token sets the session cookie, and
// every form carries the CSRF token. Without a login the console is read-only.
//
// Item pages follow the item's event stream live through server-sent events
// (GET /items/{id}/events, built on itemstore.Store.Events with a blocking read).
package console

import (
	"bytes"
	"embed"
	"encoding/base64"
	"html/template"
	"io/fs"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"outerloop/api"
	"outerloop/fleet"
	"outerloop/scheduler"
	"outerloop/workitems/itemstore"
)

//go:embed templates/*.html
var templateFS embed.FS

//go:embed static
var staticFS embed.FS

// Cookie names the console sets besides api.SessionCookie.
const (
	// ActorCookie held the name typed at login before sessions carried it; logout still
	// clears it from browsers that have one.
	ActorCookie = "outerloop_actor"
	// FlashCookie carries a one-shot message across a POST → redirect → GET.
	FlashCookie = "outerloop_flash"
)

// DefaultActor is the actor recorded when a person logged in without a name.
const DefaultActor = "console"

// Options configures the console.
type Options struct {
	Store  *itemstore.Store
	Queue  *scheduler.Queue
	Auth   *api.Auth
	Logger *slog.Logger
	// NextRun reports a template's next scheduled run (scheduler.Scheduler.NextRun), optional.
	NextRun func(template string) (time.Time, bool)
	// Fleet is the gate of fleet templates (the fleet page reads its repositories and usage),
	// optional: without it a fleet shows its configured repositories.
	Fleet *fleet.Gate
	// EventBlock is how long one blocking read of an item's event stream waits before the
	// live stream sends a keep-alive (default 5s). It bounds how long a stream outlives its
	// client or Close, since a blocking Redis read does not notice either.
	EventBlock time.Duration
	// MaxStreams caps concurrent live streams (default 64): each holds a Redis connection
	// while it waits, and the worker and the API need the pool too. Beyond it a stream is
	// refused with 503 and the page retries later.
	MaxStreams int
	// PageSize is the number of rows per page on the items, experiments and fleet lists
	// (default 25).
	PageSize int
	// Audit is the audit list shown at /audit, optional.
	Audit *api.AuditLog
	// Experiments serves /experiments and /experiments/{id} (experiments.go), optional:
	// without it those pages and their nav link are absent.
	Experiments api.Experiments
}

// Console serves the web console.
type Console struct {
	o       Options
	store   *itemstore.Store
	pages   map[string]*template.Template
	streams chan struct{} // a slot per open live stream
	closed  chan struct{}
	once    sync.Once
}

// New returns the console. Store defaults to the queue's store; a nil Auth disables actions.
func New(o Options) *Console {
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.Auth == nil {
		o.Auth = api.NewAuth("")
	}
	if o.Store == nil && o.Queue != nil {
		o.Store = o.Queue.Store()
	}
	if o.EventBlock <= 0 {
		o.EventBlock = 5 * time.Second
	}
	if o.MaxStreams <= 0 {
		o.MaxStreams = 64
	}
	if o.PageSize <= 0 {
		o.PageSize = 25
	}
	return &Console{o: o, store: o.Store, pages: parsePages(), streams: make(chan struct{}, o.MaxStreams), closed: make(chan struct{})}
}

// Close ends the live streams (each within EventBlock), so that http.Server.Shutdown, which
// waits for running handlers, is not held up by open item pages: register it with
// srv.RegisterOnShutdown. Pages keep working; browsers reconnect to the next server.
func (c *Console) Close() { c.once.Do(func() { close(c.closed) }) }

// parsePages builds one template set per page: the shared layout plus the page's own file.
// The templates are embedded, so a parse error is a build defect and panics at startup.
func parsePages() map[string]*template.Template {
	pages := map[string]*template.Template{}
	for _, name := range []string{"items", "item", "escalations", "templates", "template", "fleet", "login", "message", "audit", "experiments", "experiment"} {
		t := template.New("layout.html").Funcs(funcs())
		t = template.Must(t.ParseFS(templateFS, "templates/layout.html", "templates/partials.html", "templates/"+name+".html"))
		pages[name] = t
	}
	return pages
}

// Register adds the console's routes to mux (shared with api.Server.Register).
func (c *Console) Register(mux *http.ServeMux) {
	static, _ := fs.Sub(staticFS, "static")
	mux.Handle("GET /static/", http.StripPrefix("/static/", http.FileServerFS(static)))
	mux.HandleFunc("GET /{$}", c.page(c.items))
	mux.HandleFunc("GET /items/{id}", c.page(c.item))
	mux.HandleFunc("GET /items/{id}/events", c.events)
	mux.HandleFunc("POST /items/{id}/resolve", c.action(c.resolve))
	mux.HandleFunc("GET /escalations", c.page(c.escalations))
	mux.HandleFunc("GET /templates", c.page(c.templates))
	c.registerTemplates(mux)   // templates_history.go
	c.registerExperiments(mux) // experiments.go
	mux.HandleFunc("GET /login", c.page(c.loginForm))
	mux.HandleFunc("POST /login", c.page(c.login))
	mux.HandleFunc("POST /logout", c.logout)
	if c.o.Audit != nil {
		mux.HandleFunc("GET /audit", c.page(c.audit))
	}
}

// view is what every page template gets: the layout's fields plus the page's own data.
type view struct {
	Title string
	Nav   string // the highlighted nav entry
	// LoggedIn: a session that may act (the operator role), so the pages show action forms.
	LoggedIn bool
	// SignedIn: any session (a viewer's too); Role is its role.
	SignedIn bool
	Role     api.Role
	Enabled  bool // a token is configured
	Audit    bool // the audit list is served
	// Experiments: the experiment pages are served.
	Experiments bool
	Actor       string
	CSRF        string
	Flash       *flash
	Now         time.Time
	Page        any
}

// flash is a one-shot message shown at the top of the next page.
type flash struct {
	Error bool   `json:"e,omitempty"`
	Text  string `json:"t"`
}

// pageFunc renders one page: it returns the template name, the view to fill and a status.
type pageFunc func(w http.ResponseWriter, r *http.Request, v *view) (name string, status int)

// page wraps a pageFunc with the common view fields, security headers and rendering.
func (c *Console) page(f pageFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		v := &view{Enabled: c.o.Auth.Enabled(), Audit: c.o.Audit != nil, Experiments: c.o.Experiments != nil, Now: c.store.Now()}
		if p, ok := c.o.Auth.SessionPrincipal(r); ok {
			v.SignedIn, v.Actor, v.Role = true, p.Actor, p.Role
			if p.Role.Allows(api.RoleOperator) {
				v.LoggedIn, v.CSRF = true, c.o.Auth.CSRFFor(p)
			}
		}
		v.Flash = takeFlash(w, r)
		name, status := f(w, r, v)
		if name == "" {
			return // f answered itself (a redirect)
		}
		c.render(w, status, name, v)
	}
}

func (c *Console) render(w http.ResponseWriter, status int, name string, v *view) {
	var buf bytes.Buffer
	if err := c.pages[name].Execute(&buf, v); err != nil {
		c.o.Logger.Error("console: render", "page", name, "err", err)
		http.Error(w, "the page could not be rendered", http.StatusInternalServerError)
		return
	}
	secure(w)
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_, _ = w.Write(buf.Bytes())
}

// secure sets the headers every console answer carries. The CSP allows only the console's own
// script and style files, so even text that escaped escaping could not run.
func secure(w http.ResponseWriter) {
	h := w.Header()
	h.Set("Content-Security-Policy", "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "+
		"connect-src 'self'; frame-ancestors 'none'; form-action 'self'; base-uri 'none'")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "same-origin")
	h.Set("X-Frame-Options", "DENY")
}

// message renders a page with just a message (errors, refusals).
func (c *Console) message(v *view, status int, title, text string, back string) (string, int) {
	v.Title = title
	v.Page = struct{ Title, Text, Back string }{title, text, back}
	return "message", status
}

// setFlash stores a message for the next page the browser loads.
func setFlash(w http.ResponseWriter, r *http.Request, f flash) {
	b := []byte{'0'}
	if f.Error {
		b[0] = '1'
	}
	b = append(b, f.Text...)
	http.SetCookie(w, &http.Cookie{Name: FlashCookie, Value: base64.RawURLEncoding.EncodeToString(b), Path: "/",
		HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: isTLS(r), MaxAge: 60})
}

// takeFlash reads and clears the flash cookie.
func takeFlash(w http.ResponseWriter, r *http.Request) *flash {
	ck, err := r.Cookie(FlashCookie)
	if err != nil {
		return nil
	}
	http.SetCookie(w, &http.Cookie{Name: FlashCookie, Value: "", Path: "/", MaxAge: -1, HttpOnly: true,
		SameSite: http.SameSiteStrictMode, Secure: isTLS(r)})
	b, err := base64.RawURLEncoding.DecodeString(ck.Value)
	if err != nil || len(b) < 2 {
		return nil
	}
	return &flash{Error: b[0] == '1', Text: string(b[1:])}
}

// isTLS reports whether the browser reached us over HTTPS (directly or through a proxy), so
// cookies get the Secure flag there and still work on plain-HTTP localhost.
func isTLS(r *http.Request) bool {
	return r.TLS != nil || r.Header.Get("X-Forwarded-Proto") == "https"
}
