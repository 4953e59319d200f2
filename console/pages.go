package console

import (
	"cmp"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"

	"outerloop/api"
	"outerloop/scheduler"
	"outerloop/workitems"
	"outerloop/workitems/config"
	"outerloop/workitems/itemstore"
)

// Sort orders of the items list.
const (
	SortNewest = "newest"
	SortOldest = "oldest"
	SortSpend  = "spend"
)

type itemsPage struct {
	State, Template, Sort string
	States                []workitems.State
	Templates             []string
	Rows                  []itemRow
	Total, PageNo, Pages  int
	Prev, Next            string
	SortURL               map[string]string
	Escalations           int
}

type itemRow struct {
	*workitems.Item
	LastExit string
	Bar      bar
}

func (c *Console) items(w http.ResponseWriter, r *http.Request, v *view) (string, int) {
	q := r.URL.Query()
	p := itemsPage{State: q.Get("state"), Template: q.Get("template"), Sort: q.Get("sort"), States: workitems.AllStates()}
	v.Title, v.Nav = "Items", "items"
	if p.State != "" && !workitems.State(p.State).Valid() {
		return c.message(v, http.StatusBadRequest, "Unknown state", fmt.Sprintf("State %q is not one of %v.", p.State, workitems.AllStates()), "/")
	}
	switch p.Sort {
	case "":
		p.Sort = SortNewest
	case SortNewest, SortOldest, SortSpend:
	default:
		return c.message(v, http.StatusBadRequest, "Unknown sort", fmt.Sprintf("Sort %q: want newest, oldest or spend.", p.Sort), "/")
	}
	pageNo, ok := pageNumber(r)
	if !ok {
		return c.badPage(v, r, "/")
	}
	var err error
	// Only the page shown is read: the count from the filter's index, the page from its
	// creation or spend index (see itemstore.ListOptions).
	lo := itemstore.ListOptions{State: workitems.State(p.State), Template: p.Template, Sort: itemstore.ListSort(p.Sort)}
	if p.Total, err = c.store.Count(r.Context(), lo); err != nil {
		return c.internal(v, err)
	}
	if c.o.Queue != nil {
		for _, t := range c.o.Queue.Config().Templates {
			p.Templates = append(p.Templates, t.Name)
		}
	}
	if n, err := c.store.EscalatedCount(r.Context()); err == nil {
		p.Escalations = n
	}
	p.Pages = max(1, (p.Total+c.o.PageSize-1)/c.o.PageSize)
	p.PageNo = min(pageNo, p.Pages)
	lo.Offset, lo.Limit = (p.PageNo-1)*c.o.PageSize, c.o.PageSize
	items, err := c.store.List(r.Context(), lo)
	if err != nil {
		return c.internal(v, err)
	}
	for _, it := range items {
		row := itemRow{Item: it, Bar: spendBar(it.Spend, it.ItemBudget)}
		if a := lastExited(it); a != nil {
			row.LastExit = string(a.Exit.Reason)
		}
		p.Rows = append(p.Rows, row)
	}
	link := func(sort string, page int) string {
		u := url.Values{}
		for k, val := range map[string]string{"state": p.State, "template": p.Template, "sort": sort} {
			if val != "" {
				u.Set(k, val)
			}
		}
		if page > 1 {
			u.Set("page", strconv.Itoa(page))
		}
		if len(u) == 0 {
			return "/"
		}
		return "/?" + u.Encode()
	}
	if p.PageNo > 1 {
		p.Prev = link(p.Sort, p.PageNo-1)
	}
	if p.PageNo < p.Pages {
		p.Next = link(p.Sort, p.PageNo+1)
	}
	p.SortURL = map[string]string{SortNewest: link(SortNewest, 1), SortOldest: link(SortOldest, 1), SortSpend: link(SortSpend, 1)}
	v.Page = p
	return "items", http.StatusOK
}

// lastExited returns the latest attempt that has an exit.
func lastExited(it *workitems.Item) *workitems.Attempt {
	for i := len(it.Attempts) - 1; i >= 0; i-- {
		if it.Attempts[i].Exit != nil {
			return &it.Attempts[i]
		}
	}
	return nil
}

type itemPage struct {
	Item        *workitems.Item
	Attempts    []attemptView
	Spend       []spendRow
	Events      []workitems.Event
	LastEventID string
	Truncated   bool
	Terminal    bool
	Escalated   bool
	BudgetKinds []workitems.BudgetKind
	Delivery    *deliveryView // the latest delivery and its patch
	// Wait is what a waiting item waits for (nil unless waiting); Waits every wait the event log
	// shows, oldest first, each with what woke it; ReviewRounds the reviews that requested
	// changes and sent the item into another attempt.
	Wait         *waitView
	Waits        []waitRow
	ReviewRounds []api.ReviewRound
}

// maxTimeline is how many events the item page shows (the newest are streamed live).
const maxTimeline = 2000

func (c *Console) item(w http.ResponseWriter, r *http.Request, v *view) (string, int) {
	id := r.PathValue("id")
	it, err := c.store.Get(r.Context(), id)
	if errors.Is(err, workitems.ErrNotFound) {
		v.Nav = "items"
		return c.message(v, http.StatusNotFound, "No such item", fmt.Sprintf("There is no item %q.", id), "/")
	}
	if err != nil {
		return c.internal(v, err)
	}
	evs, truncated, err := c.timeline(r, id)
	if err != nil {
		return c.internal(v, err)
	}
	p := itemPage{Item: it, Events: evs, Truncated: truncated, Terminal: it.State.Terminal(),
		Escalated: it.State == workitems.StateEscalated, BudgetKinds: workitems.AllBudgetKinds(),
		Attempts: attemptViews(it), Spend: spendRows(c.withRunningSpend(r.Context(), it))}
	if p.Delivery, err = c.loadDelivery(r.Context(), it); err != nil {
		return c.internal(v, err)
	}
	if p.Wait, err = c.loadWait(r.Context(), it); err != nil {
		return c.internal(v, err)
	}
	p.Waits, p.ReviewRounds = waitRows(evs, v.Now), api.ReviewRounds(it)
	if len(evs) > 0 {
		p.LastEventID = evs[len(evs)-1].ID
	}
	slices.Reverse(p.Events) // newest first: live changes show at the top
	v.Title, v.Nav, v.Page = it.ID, "items", p
	return "item", http.StatusOK
}

// timeline reads an item's event log to its end and keeps the newest maxTimeline events, so
// the page's last event id is the stream's and the live stream continues from there.
func (c *Console) timeline(r *http.Request, id string) (evs []workitems.Event, truncated bool, err error) {
	const chunk = 1000
	after := ""
	for range 100 { // the store trims each log to about 2000 events; this bounds a runaway one
		batch, err := c.store.Events(r.Context(), id, after, chunk, 0)
		if err != nil {
			return nil, false, err
		}
		evs = append(evs, batch...)
		if len(evs) > maxTimeline {
			evs, truncated = evs[len(evs)-maxTimeline:], true
		}
		if len(batch) < chunk {
			break
		}
		after = batch[len(batch)-1].ID
	}
	return evs, truncated, nil
}

// escalationsPerPage bounds the escalation cards one view reads.
const escalationsPerPage = 50

type escalationsPage struct {
	Rows        []escalationRow
	Total       int
	Prev, Next  string
	BudgetKinds []workitems.BudgetKind
	// Waiting lists pull requests waiting for a person's review (paged by ?waiting=N).
	Waiting *waitingSection
}

type escalationRow struct {
	Item     *workitems.Item
	Decision *workitems.Decision
	Verified *workitems.Verdict
	Exit     *workitems.Exit
	Actions  []workitems.EscalationAction
	Summary  string // the escalation's summary, unless the test summary says the same
}

func (c *Console) escalations(w http.ResponseWriter, r *http.Request, v *view) (string, int) {
	pageNo, ok := pageNumber(r)
	if !ok {
		return c.badPage(v, r, "/escalations")
	}
	var err error
	p := escalationsPage{BudgetKinds: workitems.AllBudgetKinds()}
	if p.Total, err = c.store.EscalatedCount(r.Context()); err != nil {
		return c.internal(v, err)
	}
	waitingNo, err := strconv.Atoi(cmp.Or(r.URL.Query().Get("waiting"), "1"))
	if err != nil || waitingNo < 1 {
		return c.message(v, http.StatusBadRequest, "Bad page", fmt.Sprintf("Waiting page %q: want a number from 1.", r.URL.Query().Get("waiting")), "/escalations")
	}
	if p.Waiting, err = c.waitingForPeople(r, waitingNo); err != nil {
		return c.internal(v, err)
	}
	items, err := c.store.Escalated(r.Context(), (pageNo-1)*escalationsPerPage, escalationsPerPage)
	if err != nil {
		return c.internal(v, err)
	}
	if pageNo > 1 {
		p.Prev = "/escalations?page=" + strconv.Itoa(pageNo-1)
	}
	if pageNo*escalationsPerPage < p.Total {
		p.Next = "/escalations?page=" + strconv.Itoa(pageNo+1)
	}
	for _, it := range items {
		row := escalationRow{Item: it}
		if it.Escalation != nil {
			row.Actions = it.Escalation.Actions
		}
		if len(it.Decisions) > 0 {
			row.Decision = &it.Decisions[len(it.Decisions)-1]
		}
		if a := lastExited(it); a != nil {
			row.Verified, row.Exit = a.Verified, a.Exit
		}
		if it.Escalation != nil && (row.Verified == nil || row.Verified.Summary != it.Escalation.Summary) {
			row.Summary = it.Escalation.Summary
		}
		p.Rows = append(p.Rows, row)
	}
	v.Title, v.Nav, v.Page = "Escalations", "escalations", p
	return "escalations", http.StatusOK
}

// templatesPerPage bounds the templates one view of the templates page reads.
const templatesPerPage = 50

type templatesPage struct {
	Rows       []templateRow
	Total      int
	Prev, Next string
}

type templateRow struct {
	config.Template
	NextRun    string
	DailyCost  float64
	DailyBar   bar
	Open       int64
	LastClosed string
	Recent     []itemstore.Recent
	Paused     *scheduler.Pause
	// Fired are the template's triggers with the last firing of each one's source.
	Fired []firedTrigger
}

// firedTrigger is one of a template's triggers on the templates page: what it listens to, and
// the last firing of its source (nil: none yet).
type firedTrigger struct {
	What string
	Last *scheduler.Firing
}

// recentPerTemplate is how many last outcomes the templates page shows per template.
const recentPerTemplate = 5

func (c *Console) templates(w http.ResponseWriter, r *http.Request, v *view) (string, int) {
	v.Title, v.Nav = "Templates", "templates"
	if c.o.Queue == nil {
		v.Page = templatesPage{}
		return "templates", http.StatusOK
	}
	pageNo, ok := pageNumber(r)
	if !ok {
		return c.badPage(v, r, "/templates")
	}
	// Only the page's templates are read: their stats in one pipeline, their last outcomes in
	// one more (from the state indexes alone, no item read), their pauses in a third, their
	// triggers' last firings in a fourth.
	all := c.o.Queue.Config().Templates
	lo := min((pageNo-1)*templatesPerPage, len(all))
	page := all[lo:min(lo+templatesPerPage, len(all))]
	names := make([]string, 0, len(page))
	for _, t := range page {
		names = append(names, t.Name)
	}
	recent, err := c.store.RecentEnded(r.Context(), names, recentPerTemplate)
	if err != nil {
		return c.internal(v, err)
	}
	stats, err := c.store.TemplateStats(r.Context(), names)
	if err != nil {
		return c.internal(v, err)
	}
	pauses, err := c.o.Queue.Pauses(r.Context(), names) // one more pipeline
	if err != nil {
		return c.internal(v, err)
	}
	firings, err := c.o.Queue.LastFirings(r.Context(), names) // and one for the triggers
	if err != nil {
		return c.internal(v, err)
	}
	now := c.store.Now()
	p := templatesPage{Total: len(all)}
	if pageNo > 1 {
		p.Prev = "/templates?page=" + strconv.Itoa(pageNo-1)
	}
	if lo+templatesPerPage < len(all) {
		p.Next = "/templates?page=" + strconv.Itoa(pageNo+1)
	}
	for _, t := range page {
		row := templateRow{Template: t, NextRun: "—"}
		if t.Schedule == "" {
			row.NextRun = "manual only"
		} else if c.o.NextRun != nil {
			if at, ok := c.o.NextRun(t.Name); ok {
				row.NextRun = at.UTC().Format("2006-01-02 15:04 UTC") + " (" + until(now, at) + ")"
			}
		}
		st := stats[t.Name]
		row.DailyCost, row.Open = st.DailyCostUSD, st.Open
		row.DailyBar = fractionBar(row.DailyCost, t.DailyCostCapUSD, money)
		if !st.LastClosedAt.IsZero() {
			row.LastClosed = ago(now, st.LastClosedAt)
		}
		row.Recent = recent[t.Name]
		if p, ok := pauses[t.Name]; ok {
			row.Paused = &p
		}
		for _, tr := range t.Triggers {
			ft := firedTrigger{What: tr.String()}
			if f, ok := firings[t.Name][tr.Source()]; ok {
				ft.Last = &f
			}
			row.Fired = append(row.Fired, ft)
		}
		p.Rows = append(p.Rows, row)
	}
	v.Page = p
	return "templates", http.StatusOK
}

// internal answers a store failure without leaking details beyond the error text.
func (c *Console) internal(v *view, err error) (string, int) {
	c.o.Logger.Error("console: store", "err", err)
	return c.message(v, http.StatusInternalServerError, "Something went wrong", "The store did not answer: "+err.Error(), "/")
}

// pageNumber reads ?page= (1 when absent); ok is false for anything but a number from 1.
func pageNumber(r *http.Request) (int, bool) {
	q := r.URL.Query().Get("page")
	if q == "" {
		return 1, true
	}
	n, err := strconv.Atoi(q)
	return n, err == nil && n >= 1
}

// badPage is the answer to a ?page= that pageNumber refused, with a way back.
func (c *Console) badPage(v *view, r *http.Request, back string) (string, int) {
	return c.message(v, http.StatusBadRequest, "Bad page", fmt.Sprintf("Page %q: want a number from 1.", r.URL.Query().Get("page")), back)
}
