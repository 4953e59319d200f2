package benchmark

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"outerloop/api"
	"outerloop/console"
	"outerloop/scheduler"
	"outerloop/workitems"
	"outerloop/workitems/itemstore"
)

// ScaleRead is one read measured by Scale: the median time of its requests and the bytes the
// process allocated per request (server and client share the process, so this bounds the
// server's share from above).
type ScaleRead struct {
	Name     string
	Path     string
	Median   time.Duration
	AllocMB  float64
	Relative float64 // Median / the plain first page's median
}

// ScaleFill is what Fill made.
type ScaleFill struct {
	Items     int
	Templates int
	Took      time.Duration
}

// Fill creates n items over templates templates through the store's own code path (Create,
// then one Update that moves the item through its states as a worker would: queued → running →
// verifying → an end), with spend, concurrently. The mix: 90% closed, 4% failed, 3% cancelled,
// 2% escalated, 1% left queued.
func Fill(ctx context.Context, st *itemstore.Store, n, templates int, progress io.Writer) (ScaleFill, error) {
	start := wall.Now()
	var next atomic.Int64
	var firstErr error
	var mu sync.Mutex
	var wg sync.WaitGroup
	goal := strings.Repeat("Fix the flaky test in the payments package and keep the others green. ", 12)
	for range 32 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1)) - 1
				if i >= n || ctx.Err() != nil {
					return
				}
				if err := fillOne(ctx, st, i, templates, goal); err != nil {
					mu.Lock()
					if firstErr == nil {
						firstErr = err
					}
					mu.Unlock()
					return
				}
				if progress != nil && i > 0 && i%100000 == 0 {
					fmt.Fprintf(progress, "  filled %d items (%s)\n", i, wall.Now().Sub(start).Round(time.Second))
				}
			}
		}()
	}
	wg.Wait()
	return ScaleFill{Items: n, Templates: templates, Took: wall.Now().Sub(start)}, firstErr
}

func fillOne(ctx context.Context, st *itemstore.Store, i, templates int, goal string) error {
	tmpl := fmt.Sprintf("t%03d", i%templates)
	id := fmt.Sprintf("%s@%d", tmpl, i)
	it := &workitems.Item{ID: id, Template: tmpl, Goal: goal, MaxAttempts: 3,
		Origin: workitems.Origin{Kind: workitems.OriginManual, Actor: "bench"}}
	if err := st.Create(ctx, it, itemstore.CreateLimits{}); err != nil {
		return err
	}
	r := i % 100
	var end workitems.State
	switch {
	case r < 90:
		end = workitems.StateClosed
	case r < 94:
		end = workitems.StateFailed
	case r < 97:
		end = workitems.StateCancelled
	case r < 99:
		end = workitems.StateEscalated
	default:
		return nil
	}
	_, err := st.Update(ctx, id, nil, func(it *workitems.Item) ([]workitems.Event, error) {
		it.Spend = workitems.Spend{CostUSD: float64(rand.IntN(500)) / 100, WallTime: workitems.Duration(time.Duration(rand.IntN(600)) * time.Second)}
		if end == workitems.StateEscalated {
			it.Escalation = &workitems.Escalation{At: st.Now(), Reason: "bench", Summary: "escalated by the benchmark"}
			return nil, it.SetState(end)
		}
		for _, s := range []workitems.State{workitems.StateRunning, workitems.StateVerifying} {
			if err := it.SetState(s); err != nil {
				return nil, err
			}
		}
		if end == workitems.StateCancelled {
			return nil, it.SetState(workitems.StateCancelled)
		}
		return nil, it.SetState(end)
	})
	return err
}

// Scale measures every list of the API and the console against GET /api/items (the plain
// first page) on the store of q holding n items, in-process over real HTTP, rounds requests
// each. The reads take turns within each round, so a load spike on the machine hits them alike.
func Scale(ctx context.Context, q *scheduler.Queue, n, rounds int) ([]ScaleRead, error) {
	mux := http.NewServeMux()
	log := slog.New(slog.DiscardHandler)
	api.New(api.Options{Queue: q, Logger: log}).Register(mux)
	con := console.New(console.Options{Queue: q, Logger: log})
	con.Register(mux)
	defer con.Close()
	srv := httptest.NewServer(mux)
	defer srv.Close()
	reads := []ScaleRead{
		{Name: "api items, first page (baseline)", Path: "/api/items"},
		{Name: "api items, middle page", Path: fmt.Sprintf("/api/items?offset=%d", n/2)},
		{Name: "api items by spend", Path: "/api/items?sort=spend"},
		{Name: "api state=closed", Path: "/api/items?state=closed"},
		{Name: "api state=closed, middle page", Path: fmt.Sprintf("/api/items?state=closed&offset=%d", n*9/20)},
		{Name: "api state=failed", Path: "/api/items?state=failed"},
		{Name: "api template", Path: "/api/items?template=t007"},
		{Name: "api template+state", Path: "/api/items?template=t007&state=closed"},
		{Name: "api template+state by spend", Path: "/api/items?template=t007&state=closed&sort=spend"},
		{Name: "api escalations", Path: "/api/escalations"},
		{Name: "api templates (first 100)", Path: "/api/templates"},
		{Name: "console /", Path: "/"},
		{Name: "console state=closed by spend", Path: "/?state=closed&sort=spend"},
		{Name: "console oldest, middle page", Path: fmt.Sprintf("/?sort=oldest&page=%d", max(1, n/50))},
		{Name: "console escalations", Path: "/escalations"},
		{Name: "console templates", Path: "/templates"},
	}
	times := make([][]time.Duration, len(reads))
	allocs := make([]uint64, len(reads))
	for range rounds {
		for i := range reads {
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			t0 := wall.Now()
			resp, err := http.Get(srv.URL + reads[i].Path)
			if err != nil {
				return nil, err
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			times[i] = append(times[i], wall.Now().Sub(t0))
			runtime.ReadMemStats(&after)
			allocs[i] += after.TotalAlloc - before.TotalAlloc
			if resp.StatusCode != http.StatusOK {
				return nil, fmt.Errorf("%s: status %d", reads[i].Path, resp.StatusCode)
			}
		}
	}
	for i := range reads {
		slices.Sort(times[i])
		reads[i].Median = times[i][len(times[i])/2]
		reads[i].AllocMB = float64(allocs[i]) / float64(rounds) / (1 << 20)
	}
	for i := range reads {
		reads[i].Relative = float64(reads[i].Median) / float64(reads[0].Median)
	}
	return reads, nil
}
