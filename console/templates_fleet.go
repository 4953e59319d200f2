package console

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"

	"outerloop/scheduler"
	"outerloop/scheduler/fleetview"
)

// The fleet page (/templates/{name}/fleet): a fleet template's repositories, sorted and paged,
// each with its newest item, pull request, CI, review and spend, beside the next run, the
// pause and the gate's usage (package scheduler/fleetview, as templates status and the API show it).

type fleetPage struct {
	Name       string
	Fleet      *fleetview.Fleet
	NextRun    string
	Prev, Next string
	PageNo     int
}

func (c *Console) templateFleet(w http.ResponseWriter, r *http.Request, v *view) (string, int) {
	name := r.PathValue("name")
	back := "/templates/" + url.PathEscape(name)
	v.Title, v.Nav = "Fleet "+name, "templates"
	if c.o.Queue == nil {
		return c.message(v, http.StatusNotFound, "No such template", "This console has no queue configured.", "/templates")
	}
	pageNo, ok := pageNumber(r)
	if !ok {
		return c.badPage(v, r, back+"/fleet")
	}
	rd := &fleetview.Reader{Queue: c.o.Queue, Gate: c.o.Fleet, NextRun: c.o.NextRun}
	f, err := rd.Page(r.Context(), name, (pageNo-1)*c.o.PageSize, c.o.PageSize)
	switch {
	case errors.Is(err, fleetview.ErrNotFleet):
		return c.message(v, http.StatusBadRequest, "Not a fleet", fmt.Sprintf("Template %q has one repository: its history is on its page.", name), back)
	case errors.Is(err, scheduler.ErrUnknownTemplate):
		return c.message(v, http.StatusNotFound, "No such template", fmt.Sprintf("There is no template %q in the configuration.", name), "/templates")
	case err != nil:
		return c.internal(v, err)
	}
	p := fleetPage{Name: name, Fleet: f, PageNo: pageNo, NextRun: "none (no schedule)"}
	if !f.NextRun.IsZero() {
		p.NextRun = f.NextRun.UTC().Format("2006-01-02 15:04 UTC") + " (" + until(v.Now, f.NextRun) + ")"
	}
	base := back + "/fleet?page="
	if pageNo > 1 {
		p.Prev = base + strconv.Itoa(pageNo-1)
	}
	if f.Next != nil {
		p.Next = base + strconv.Itoa(pageNo+1)
	}
	v.Page = p
	return "fleet", http.StatusOK
}
