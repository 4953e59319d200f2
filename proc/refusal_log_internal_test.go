package proc

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"

	"outerloop/egress"
)

func notAllowed(host string, port int) egress.Refusal {
	return egress.Refusal{Host: host, Port: port, Reason: egress.ReasonNotAllowed}
}

var metadata = egress.Refusal{Host: "169.254.169.254", Port: 80, Reason: egress.ReasonPrivateAddress}

// The case of issue 36: once a command has had maxRefusalReports destinations refused, the
// metadata address is still recorded, with how often it was tried, and so is a reported
// destination's every further refusal.
func TestARefusalPastTheReportedOnesIsCountedAndReportedWhenTheCommandEnds(t *testing.T) {
	t.Parallel()
	var l refusalLog
	for i := range maxRefusalReports {
		if !l.add(notAllowed(fmt.Sprintf("h%d.example", i), 443)) {
			t.Fatalf("destination %d was not reported as it happened", i)
		}
	}
	if l.add(notAllowed("h0.example", 443)) {
		t.Fatal("a reported destination's second refusal was reported again at once")
	}
	for range 3 {
		if l.add(metadata) {
			t.Fatal("a destination past the reported ones was reported at once")
		}
	}
	got := l.flush("curl http://169.254.169.254/")
	want := []NetworkRefusal{
		{Refusal: notAllowed("h0.example", 443), Command: "curl http://169.254.169.254/", Count: 1, Counted: true},
		{Refusal: metadata, Command: "curl http://169.254.169.254/", Count: 3, Counted: true},
	}
	if !slices.Equal(got, want) {
		t.Fatalf("flush:\n got %+v\nwant %+v", got, want)
	}
	if again := l.flush("x"); len(again) != 0 {
		t.Fatalf("a second flush repeated %+v", again)
	}
}

// Past maxRefusalDestinations a refusal is counted under its reason alone, and still reported.
func TestRefusalsPastTheDestinationsCountedOneByOneAreCountedByReason(t *testing.T) {
	t.Parallel()
	var l refusalLog
	for i := range maxRefusalDestinations {
		l.add(notAllowed(fmt.Sprintf("h%d.example", i), 443))
	}
	l.add(metadata)
	l.add(notAllowed("late.example", 443))
	l.add(notAllowed("later.example", 80))
	l.add(notAllowed("h1.example", 443)) // counted one by one: it came in time
	got := l.flush("cmd")
	if n := len(got); n != maxRefusalDestinations-maxRefusalReports+1+2 {
		t.Fatalf("%d reports, want one per counted destination, h1 again and one per reason past them: %+v", n, got)
	}
	if h1 := got[0]; h1.Refusal != notAllowed("h1.example", 443) || h1.Count != 1 || h1.Others {
		t.Errorf("first report %+v, want h1.example's second refusal", h1)
	}
	tail := got[len(got)-2:]
	if tail[0] != (NetworkRefusal{Refusal: egress.Refusal{Reason: egress.ReasonNotAllowed}, Command: "cmd", Count: 2, Counted: true, Others: true}) ||
		tail[1] != (NetworkRefusal{Refusal: egress.Refusal{Reason: egress.ReasonPrivateAddress}, Command: "cmd", Count: 1, Counted: true, Others: true}) {
		t.Errorf("reports of the others %+v", tail)
	}
}

// Whatever a command's refusals, from however many connections at once: at most
// maxRefusalReports are reported as they happen, each destination at most once so, and the
// counts of all reports add up to every refusal, per destination for those counted one by one
// and per reason for the rest.
func TestNoRefusalGoesUnrecorded(t *testing.T) {
	t.Parallel()
	for seed := range uint64(20) {
		rng := rand.New(rand.NewPCG(seed, 36))
		pool := make([]egress.Refusal, 1+rng.IntN(2*maxRefusalDestinations))
		for i := range pool {
			pool[i] = egress.Refusal{Host: fmt.Sprintf("h%d.example", rng.IntN(400)), Port: []int{80, 443}[rng.IntN(2)],
				Reason: egress.Reasons()[rng.IntN(len(egress.Reasons()))]}
		}
		var l refusalLog
		var mu sync.Mutex
		sent := map[egress.Refusal]int{}
		var now []egress.Refusal
		var wg sync.WaitGroup
		for g := range 4 {
			wg.Go(func() {
				rng := rand.New(rand.NewPCG(seed, uint64(g)))
				for range 500 {
					r := pool[rng.IntN(len(pool))]
					reported := l.add(r)
					mu.Lock()
					sent[r]++
					if reported {
						now = append(now, r)
					}
					mu.Unlock()
				}
			})
		}
		wg.Wait()
		if len(now) > maxRefusalReports {
			t.Fatalf("seed %d: %d reported as they happened", seed, len(now))
		}
		got := map[egress.Refusal]int{}
		for _, r := range now {
			if got[r]++; got[r] > 1 {
				t.Fatalf("seed %d: %+v reported at once twice", seed, r)
			}
		}
		others := map[egress.Reason]int{}
		for _, nr := range l.flush("cmd") {
			if nr.Count < 1 {
				t.Fatalf("seed %d: report %+v counts nothing", seed, nr)
			}
			if nr.Others {
				others[nr.Reason] += nr.Count
			} else {
				got[nr.Refusal] += nr.Count
			}
		}
		total := 0
		for r, n := range sent {
			total += n
			if got[r] != 0 && got[r] != n {
				t.Fatalf("seed %d: %+v refused %d times, recorded %d", seed, r, n, got[r])
			}
			if got[r] == 0 {
				others[r.Reason] -= n
			}
		}
		for reason, n := range others {
			if n != 0 {
				t.Fatalf("seed %d: refusals for %s off by %d in the others' counts", seed, reason, n)
			}
		}
		if distinct := len(got); distinct > maxRefusalDestinations {
			t.Fatalf("seed %d: %d destinations counted one by one", seed, distinct)
		}
		if total != 2000 {
			t.Fatalf("seed %d: sent %d", seed, total)
		}
	}
}
