package console

import (
	"errors"
	"net/http"
	"net/url"
	"strconv"

	"outerloop/api"
)

// auditPageSize is how many audit entries one page of /audit shows.
const auditPageSize = 50

type auditPage struct {
	Entries []api.AuditEntry
	Next    string // link to the next (older) page
	First   bool
}

// audit shows the audit list, newest first, a page at a time (a cursor per page, so a page
// costs one read whatever the list's length). It needs a login, so with no token configured
// it is refused, like GET /api/audit (api.Protect guards the route too; this check keeps the
// page safe without it).
func (c *Console) audit(w http.ResponseWriter, r *http.Request, v *view) (string, int) {
	v.Title, v.Nav = "Audit", "audit"
	if !c.o.Auth.Enabled() {
		return c.message(v, http.StatusForbidden, "Audit needs a login",
			"The server has no token, so nobody can log in to read the audit list here; use outerloop audit.", "/")
	}
	if !v.SignedIn {
		http.Redirect(w, r, "/login?next="+url.QueryEscape(r.URL.RequestURI()), http.StatusSeeOther)
		return "", 0
	}
	cursor := r.URL.Query().Get("cursor")
	entries, next, err := c.o.Audit.List(r.Context(), cursor, auditPageSize)
	if errors.Is(err, api.ErrBadCursor) {
		return c.message(v, http.StatusBadRequest, "Bad cursor", "Cursor "+strconv.Quote(cursor)+": "+err.Error()+".", "/audit")
	}
	if err != nil {
		return c.internal(v, err)
	}
	p := auditPage{Entries: entries, First: cursor == ""}
	if next != "" {
		p.Next = "/audit?cursor=" + url.QueryEscape(next)
	}
	v.Page = p
	return "audit", http.StatusOK
}
