package metrics_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"outerloop/lib/fakeclock"
	"outerloop/lib/redistest"
	"outerloop/metrics"
	"outerloop/workitems"
	"outerloop/workitems/config"
	"outerloop/workitems/itemstore"
)

const waitGaugesHelp = `# HELP outerloop_items_waiting Waiting items (their change pushed, no worker held) by what they wait for (kind: ci, review).
# TYPE outerloop_items_waiting gauge
outerloop_items_waiting{kind="ci"} %d
outerloop_items_waiting{kind="review"} %d
# HELP outerloop_wait_poll_lag_seconds How far the earliest due poll of a waiting item is behind (0: none due); it grows while no poller runs or keeps up.
# TYPE outerloop_wait_poll_lag_seconds gauge
outerloop_wait_poll_lag_seconds %g
`

func TestWaitingItemsAndThePollLagAreReadOnScrape(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name       string
		waiting    map[workitems.WaitKind]int64
		firstPoll  time.Time
		ci, review int
		lag        float64
	}{
		{"CountsEveryKindAndTheLagOfAPollOverdue", map[workitems.WaitKind]int64{workitems.WaitCI: 2, workitems.WaitReview: 1}, statsNow.Add(-400 * time.Second), 2, 1, 400},
		{"HasNoLagWhileTheFirstPollIsStillToCome", map[workitems.WaitKind]int64{workitems.WaitReview: 3}, statsNow.Add(time.Minute), 0, 3, 0},
		{"ShowsEveryKindAtZeroWhenNothingWaits", nil, time.Time{}, 0, 0, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			m := metrics.New(metrics.WithClock(fakeclock.New(statsNow)))
			st := sampleStats()
			st.Waiting, st.FirstPollAt = tt.waiting, tt.firstPoll
			m.SetStatsSource(fakeSource(st, nil))
			want := fmt.Sprintf(waitGaugesHelp, tt.ci, tt.review, tt.lag)
			if err := testutil.GatherAndCompare(m.Registry(), strings.NewReader(want), "outerloop_items_waiting", "outerloop_wait_poll_lag_seconds"); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// Through the real store: an item parked for CI shows as one CI wait, and once its first poll
// is overdue the lag is how long.
func TestTheStoresWaitingItemsReachTheScrape(t *testing.T) {
	t.Parallel()
	env := redistest.New(t)
	s := itemstore.NewStore(env.Client, env.Prefix)
	ctx := context.Background()
	it := &workitems.Item{ID: "w@1", Template: "t", Goal: "g", Origin: workitems.Origin{Kind: "manual"}, MaxAttempts: 2,
		Budget: workitems.Budget{WallTime: workitems.Duration(time.Minute)}}
	if err := s.Create(ctx, it, itemstore.CreateLimits{}); err != nil {
		t.Fatal(err)
	}
	f, err := s.AcquireLease(ctx, it.ID, 1, "w", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.StartAttempt(ctx, f, "w"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.RecordExit(ctx, f, workitems.Exit{Reason: workitems.ExitCompleted}, workitems.Spend{}, "", false); err != nil {
		t.Fatal(err)
	}
	del := &workitems.Delivery{Mode: workitems.DeliverPullRequest, Outcome: workitems.DeliveryPROpened, Commit: "5ha", Tree: "t", PushedSHA: "5ha",
		PR: &workitems.PullRequest{Number: 7, State: workitems.PROpen}}
	d := workitems.Decision{Outcome: workitems.OutcomeWait, Rule: "ci_pending", Actor: "verifier",
		Wait: &workitems.WaitPlan{Kind: workitems.WaitCI, Deadline: time.Now().Add(time.Hour), Forge: "tea", Repo: "o/r"}}
	if _, err := s.RecordDelivery(ctx, f, d, nil, del, nil); err != nil {
		t.Fatal(err)
	}
	np, err := s.NextPoll(ctx, it.ID)
	if err != nil || np.IsZero() {
		t.Fatalf("next poll %v %v", np, err)
	}
	clock := fakeclock.New(np.Add(90 * time.Second))
	m := metrics.New(metrics.WithClock(clock))
	m.SetStatsSource(s.Stats)
	want := fmt.Sprintf(waitGaugesHelp, 1, 0, 90.0)
	if err := testutil.GatherAndCompare(m.Registry(), strings.NewReader(want), "outerloop_items_waiting", "outerloop_wait_poll_lag_seconds"); err != nil {
		t.Fatal(err)
	}
}

func TestWakesAndPollsAreCountedWithinFixedLabelSets(t *testing.T) {
	t.Parallel()
	m := metrics.New()
	m.SetConfig(&config.Config{Forges: map[string]config.ForgeConfig{"tea": {}}})
	m.Woken(workitems.WaitCI, workitems.WakeWebhook, 45*time.Second)
	m.Woken(workitems.WaitReview, workitems.WakeDeadline, 30*time.Hour)
	m.Woken("nap", "alarm", -time.Second) // folded into other, never negative
	m.Polled("tea", metrics.PollPending)
	m.Polled("tea", metrics.PollPending)
	m.Polled("github-of-someone-else", metrics.PollRateLimited)
	m.Polled("tea", "exploded")

	if n := testutil.CollectAndCount(m.Registry(), "outerloop_wait_duration_seconds"); n != len(workitems.AllWaitKinds())*len(workitems.AllWakeReasons())+1 {
		t.Fatalf("%d wait duration series, want every kind × reason from the start and the other one", n)
	}
	// tea's and other's series exist at zero from the start; plus tea's "other" result.
	if n := testutil.CollectAndCount(m.Registry(), "outerloop_wait_polls_total"); n != 2*len(metrics.PollResults())+1 {
		t.Fatalf("%d poll series", n)
	}
	want := `# HELP outerloop_wait_polls_total Polls of waiting items by forge (a key of forges:) and result (decided, pending, rate_limited, error, deadline).
# TYPE outerloop_wait_polls_total counter
outerloop_wait_polls_total{forge="other",result="deadline"} 0
outerloop_wait_polls_total{forge="other",result="decided"} 0
outerloop_wait_polls_total{forge="other",result="error"} 0
outerloop_wait_polls_total{forge="other",result="pending"} 0
outerloop_wait_polls_total{forge="other",result="rate_limited"} 1
outerloop_wait_polls_total{forge="tea",result="deadline"} 0
outerloop_wait_polls_total{forge="tea",result="decided"} 0
outerloop_wait_polls_total{forge="tea",result="error"} 0
outerloop_wait_polls_total{forge="tea",result="other"} 1
outerloop_wait_polls_total{forge="tea",result="pending"} 2
outerloop_wait_polls_total{forge="tea",result="rate_limited"} 0
`
	if err := testutil.GatherAndCompare(m.Registry(), strings.NewReader(want), "outerloop_wait_polls_total"); err != nil {
		t.Fatal(err)
	}
	fams, err := m.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	counts := map[string]uint64{}
	for _, f := range fams {
		if f.GetName() != "outerloop_wait_duration_seconds" {
			continue
		}
		for _, mt := range f.GetMetric() {
			var ls []string
			for _, l := range mt.GetLabel() {
				ls = append(ls, l.GetValue())
			}
			if h := mt.GetHistogram(); h.GetSampleCount() > 0 {
				counts[strings.Join(ls, "/")] = h.GetSampleCount()
				if strings.Join(ls, "/") == "deadline/review" && h.GetSampleSum() != 30*3600 {
					t.Errorf("review/deadline sum %g", h.GetSampleSum())
				}
			}
		}
	}
	if fmt.Sprint(counts) != "map[deadline/review:1 other/other:1 webhook/ci:1]" {
		t.Fatalf("observed %v", counts)
	}
	if problems, err := testutil.GatherAndLint(m.Registry(), "outerloop_wait_polls_total", "outerloop_wait_duration_seconds"); err != nil || len(problems) > 0 {
		t.Fatalf("lint: %v %v", problems, err)
	}
}

func TestNilMetricsIgnoreWakesAndPolls(t *testing.T) {
	t.Parallel()
	var m *metrics.Metrics
	m.Woken(workitems.WaitCI, workitems.WakePoll, time.Second)
	m.Polled("tea", metrics.PollDecided)
	// The poller's interface, as it declares it.
	var _ interface {
		Woken(kind workitems.WaitKind, by workitems.WakeReason, waited time.Duration)
		Polled(forge string, result string)
	} = m
}

func TestTheWebhookCounterExistsBeforeAnyHandler(t *testing.T) {
	t.Parallel()
	m := metrics.New()
	if n := testutil.CollectAndCount(m.Registry(), "outerloop_webhook_deliveries_total"); n != 1 {
		t.Fatalf("%d series, want the unknown_forge one", n)
	}
	metrics.NewWebhooks(m, []string{"tea"}).Delivery("tea", "", "bad_signature")
	fams, err := m.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, f := range fams {
		if f.GetName() != "outerloop_webhook_deliveries_total" {
			continue
		}
		for _, mt := range f.GetMetric() {
			if v := mt.GetCounter().GetValue(); v > 0 {
				var ls []string
				for _, l := range mt.GetLabel() {
					ls = append(ls, l.GetValue())
				}
				got[strings.Join(ls, "/")] = v
			}
		}
	}
	if fmt.Sprint(got) != "map[other/tea/bad_signature:1]" {
		t.Fatalf("counted %v", got)
	}
}
