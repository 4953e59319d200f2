package console

import (
	"fmt"
	"net/http"
	"net/url"
	"strconv"

	"outerloop/api"
	"outerloop/scheduler"
)

// The per-template page (/templates/{name}): the template's pause, its last items newest first
// with outcome, spend and pull request, its control log, and — after a login — the forms to
// pause, resume, run now and re-run an ended item. The forms go through scheduler.Queue, as
// the JSON API's /api/templates/{name}/… do.

// registerTemplates adds the per-template page and its actions to mux.
func (c *Console) registerTemplates(mux *http.ServeMux) {
	mux.HandleFunc("GET /templates/{name}", c.page(c.templateHistory))
	mux.HandleFunc("GET /templates/{name}/fleet", c.page(c.templateFleet)) // templates_fleet.go
	mux.HandleFunc("POST /templates/{name}/pause", c.action(c.pauseTemplate))
	mux.HandleFunc("POST /templates/{name}/resume", c.action(c.resumeTemplate))
	mux.HandleFunc("POST /templates/{name}/run", c.action(c.runTemplate))
	mux.HandleFunc("POST /items/{id}/rerun", c.action(c.rerunItem))
}

// historyPerPage is how many items one view of a template's history shows.
const historyPerPage = 25

// controlsShown is how many control records the template page shows.
const controlsShown = 10

type historyPage struct {
	Name       string
	Schedule   string
	Goal       string
	Fleet      bool // many repositories: the fleet page is linked
	History    scheduler.History
	Controls   []scheduler.ControlRecord
	Prev, Next string
	PageNo     int
}

func (c *Console) templateHistory(w http.ResponseWriter, r *http.Request, v *view) (string, int) {
	name := r.PathValue("name")
	v.Title, v.Nav = "Template "+name, "templates"
	if c.o.Queue == nil {
		return c.message(v, http.StatusNotFound, "No such template", "This console has no queue configured.", "/templates")
	}
	t, ok := c.o.Queue.Config().Template(name)
	if !ok {
		return c.message(v, http.StatusNotFound, "No such template", fmt.Sprintf("There is no template %q in the configuration.", name), "/templates")
	}
	pageNo, ok := pageNumber(r)
	if !ok {
		return c.badPage(v, r, "/templates/"+url.PathEscape(name))
	}
	h, err := c.o.Queue.History(r.Context(), name, (pageNo-1)*historyPerPage, historyPerPage)
	if err != nil {
		return c.internal(v, err)
	}
	recs, err := c.o.Queue.Controls(r.Context(), name, controlsShown)
	if err != nil {
		return c.internal(v, err)
	}
	p := historyPage{Name: name, Schedule: t.Schedule, Goal: t.Goal, Fleet: t.IsFleet(), History: h, Controls: recs, PageNo: pageNo}
	base := "/templates/" + url.PathEscape(name) + "?page="
	if pageNo > 1 {
		p.Prev = base + strconv.Itoa(pageNo-1)
	}
	if h.Offset+len(h.Items) < h.Total {
		p.Next = base + strconv.Itoa(pageNo+1)
	}
	v.Page = p
	return "template", http.StatusOK
}

// controlDone flashes what a control did and redirects to where its result shows.
func (c *Console) controlDone(w http.ResponseWriter, r *http.Request, text, to string) (string, int) {
	setFlash(w, r, flash{Text: text})
	http.Redirect(w, r, to, http.StatusSeeOther)
	return "", 0
}

// controlRefused explains a refused control; nothing was changed.
func (c *Console) controlRefused(v *view, err error, back string) (string, int) {
	status := api.ControlStatus(err)
	if status == http.StatusInternalServerError {
		c.o.Logger.Error("console: template control", "err", err)
	}
	return c.message(v, status, "Nothing was changed", err.Error(), back)
}

func (c *Console) pauseTemplate(w http.ResponseWriter, r *http.Request, v *view, actor string) (string, int) {
	name := r.PathValue("name")
	back := "/templates/" + url.PathEscape(name)
	p, err := c.o.Queue.Pause(r.Context(), name, actor, r.PostFormValue("reason"))
	if err != nil {
		return c.controlRefused(v, err, back)
	}
	return c.controlDone(w, r, fmt.Sprintf("%s paused by %s: its cron ticks are skipped until resumed.", p.Template, p.Actor), back)
}

func (c *Console) resumeTemplate(w http.ResponseWriter, r *http.Request, v *view, actor string) (string, int) {
	name := r.PathValue("name")
	back := "/templates/" + url.PathEscape(name)
	p, err := c.o.Queue.Resume(r.Context(), name, actor)
	if err != nil {
		return c.controlRefused(v, err, back)
	}
	return c.controlDone(w, r, fmt.Sprintf("%s resumed by %s (%d ticks were skipped while paused).", name, actor, p.Skipped), back)
}

func (c *Console) runTemplate(w http.ResponseWriter, r *http.Request, v *view, actor string) (string, int) {
	name := r.PathValue("name")
	it, err := c.o.Queue.RunNow(r.Context(), name, actor, r.PostFormValue("input"), r.PostFormValue("force") == "1")
	if err != nil {
		return c.controlRefused(v, err, "/templates/"+url.PathEscape(name))
	}
	return c.controlDone(w, r, fmt.Sprintf("%s: run now by %s, queued as %s.", name, actor, it.ID), "/items/"+url.PathEscape(it.ID))
}

func (c *Console) rerunItem(w http.ResponseWriter, r *http.Request, v *view, actor string) (string, int) {
	id := r.PathValue("id")
	it, err := c.o.Queue.Rerun(r.Context(), id, actor)
	if err != nil {
		return c.controlRefused(v, err, "/items/"+url.PathEscape(id))
	}
	return c.controlDone(w, r, fmt.Sprintf("%s re-run by %s as %s.", id, actor, it.ID), "/items/"+url.PathEscape(it.ID))
}
