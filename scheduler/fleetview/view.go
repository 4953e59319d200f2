// Package fleetview is the fleet read model: a fleet template seen as a table of its repositories,
// each with its newest item, that item's pull request, CI and review, and spend, beside the
// template's next run and what holds its limits. The CLI (templates status), the API
// (GET /api/templates/{name}/fleet) and the console's fleet page all show it.
//
// A page costs O(page) items: the repository hash (the fleet's size, not its history) is read
// and sorted, and only the page's items are fetched, in one MGET.
//
// It reads a template through the scheduler (its queue, pause and next run) and the fleet gate,
// so it sits above both, under scheduler: fleet stays below scheduler (the scheduler imports
// the gate) and no import points back up.
package fleetview

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"sort"
	"strings"
	"time"

	"outerloop/fleet"
	"outerloop/scheduler"
	"outerloop/workitems"
	"outerloop/workitems/config"
)

// ErrNotFleet refuses the fleet view of a template with one repository.
var ErrNotFleet = errors.New("not a fleet template")

// MaxLimit bounds one page.
const MaxLimit = 1000

// DefaultLimit is a page's size when none is asked for.
const DefaultLimit = 50

// Reader builds fleet views.
type Reader struct {
	Queue *scheduler.Queue
	Gate  *fleet.Gate
	// NextRun reports a template's next scheduled run (scheduler.Scheduler.NextRun), optional.
	NextRun func(template string) (time.Time, bool)
}

// Row is one repository of a fleet.
type Row struct {
	Repo string `json:"repo"`           // as the template (or discovery) names it
	Slug string `json:"slug,omitempty"` // owner/name, when the repository is on a forge
	URL  string `json:"url,omitempty"`  // its web address, when it has one
	// Item is the repository's newest item (empty: none yet); the fields below are its.
	Item      string                 `json:"item,omitempty"`
	State     workitems.State        `json:"state,omitempty"`
	Outcome   string                 `json:"outcome,omitempty"` // the state and the latest rule, as history shows it
	PR        *workitems.PullRequest `json:"pr,omitempty"`
	CI        CI                     `json:"ci,omitzero"`
	Review    string                 `json:"review,omitempty"` // see reviewState
	CostUSD   float64                `json:"cost_usd"`
	UpdatedAt time.Time              `json:"updated_at,omitzero"`
	// Held says who holds the repository's branch (a person committed to it: outerloop pushes
	// nothing more to it until it is handed back).
	Held *workitems.BranchHold `json:"held,omitempty"`
}

// CI summarises the CI checks of an item's pushed commit.
type CI struct {
	State  workitems.CheckState `json:"state,omitempty"` // the worst check's (pending while CI is waited for)
	Passed int                  `json:"passed,omitempty"`
	Total  int                  `json:"total,omitempty"`
}

// String is the CI column: "success 3/3", "pending", "-".
func (c CI) String() string {
	switch {
	case c.State == "":
		return "-"
	case c.Total == 0:
		return string(c.State)
	}
	return fmt.Sprintf("%s %d/%d", c.State, c.Passed, c.Total)
}

// Fleet is a page of a fleet template's repositories.
type Fleet struct {
	Template string           `json:"template"`
	Paused   *scheduler.Pause `json:"paused,omitempty"`
	NextRun  time.Time        `json:"next_run,omitzero"`
	Limits   *config.Fleet    `json:"limits,omitempty"`
	Usage    fleet.Usage      `json:"usage"`
	Total    int              `json:"total"` // repositories
	Offset   int              `json:"offset"`
	Limit    int              `json:"limit"`
	Next     *int             `json:"next_offset,omitempty"` // where the next page starts (nil: last page)
	Rows     []Row            `json:"rows"`
	Totals   Totals           `json:"totals"`
}

// Totals sums the page's rows.
type Totals struct {
	CostUSD float64 `json:"cost_usd"`
	OpenPRs int     `json:"open_prs"`
	HeldPRs int     `json:"held_prs"` // open pull requests people hold

	Items int `json:"items"`
}

// Page reads a page of a fleet template's repositories, sorted by repository. An unknown
// template is scheduler.ErrUnknownTemplate, a template with one repository ErrNotFleet.
func (r *Reader) Page(ctx context.Context, template string, offset, limit int) (*Fleet, error) {
	t, ok := r.Queue.Config().Template(template)
	if !ok {
		return nil, fmt.Errorf("fleet view: template %q: %w", template, scheduler.ErrUnknownTemplate)
	}
	if !t.IsFleet() {
		return nil, fmt.Errorf("fleet view: template %q: %w: it has one repository (%s); use templates history %s",
			template, ErrNotFleet, t.Repo, template)
	}
	if limit <= 0 {
		limit = DefaultLimit
	}
	limit, offset = min(limit, MaxLimit), max(offset, 0)
	f := &Fleet{Template: template, Limits: t.Fleet, Offset: offset, Limit: limit, Rows: []Row{}}
	if r.NextRun != nil {
		f.NextRun, _ = r.NextRun(template)
	}
	var newest map[string]string
	if r.Gate != nil {
		var err error
		if newest, err = r.Gate.Repos(ctx, template); err != nil {
			return nil, err
		}
		if f.Usage, err = r.Gate.Usage(ctx, template); err != nil {
			return nil, err
		}
	}
	p, err := r.Queue.PauseOf(ctx, template)
	if err != nil {
		return nil, err
	}
	f.Paused = p
	repos := repoList(t.Repos, newest)
	f.Total = len(repos)
	if offset >= len(repos) {
		return f, nil
	}
	page := repos[offset:min(offset+limit, len(repos))]
	if next := offset + len(page); next < len(repos) {
		f.Next = &next
	}
	var ids []string
	for _, rp := range page {
		if id := newest[rp]; id != "" {
			ids = append(ids, id)
		}
	}
	items, err := r.Queue.Store().GetMany(ctx, ids)
	if err != nil {
		return nil, fmt.Errorf("fleet view: template %q: items: %w", template, err)
	}
	for _, rp := range page {
		row := newRow(rp)
		if it := items[newest[rp]]; it != nil {
			fill(&row, it)
			f.Totals.CostUSD += row.CostUSD
			f.Totals.Items++
			if row.PR != nil && row.PR.State == workitems.PROpen {
				f.Totals.OpenPRs++
				if row.Held != nil {
					f.Totals.HeldPRs++
				}
			}
		} else {
			row.Item = newest[rp] // recorded but gone (collected): shown, not fetched
		}
		f.Rows = append(f.Rows, row)
	}
	return f, nil
}

// repoList is the fleet's repositories, sorted: the configured ones (shown before their first
// item) and every one the gate recorded (repos_from's discovered ones), once each.
func repoList(configured []string, newest map[string]string) []string {
	seen := make(map[string]bool, len(newest)+len(configured))
	var out []string
	for rp := range newest {
		seen[key(rp)] = true
		out = append(out, rp)
	}
	for _, rp := range configured {
		if !seen[key(rp)] {
			seen[key(rp)] = true
			out = append(out, rp)
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if a, b := key(out[i]), key(out[j]); a != b {
			return a < b
		}
		return out[i] < out[j]
	})
	return out
}

// key is a repository's identity whatever its spelling.
func key(r string) string { return workitems.RepoKey(r) }

func newRow(repo string) Row {
	row := Row{Repo: repo}
	row.Slug, _ = workitems.RepoSlugFromURL(repo)
	if u, err := url.Parse(repo); err == nil && (u.Scheme == "https" || u.Scheme == "http") && u.Host != "" {
		u.User = nil // never show credentials embedded in a remote
		u.Path = strings.TrimSuffix(strings.TrimRight(u.Path, "/"), ".git")
		row.URL = u.String()
	}
	return row
}
