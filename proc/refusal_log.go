package proc

import (
	"maps"
	"slices"
	"sync"

	"outerloop/egress"
)

// Bounds of one command's refusal reports (refusalLog).
const (
	// maxRefusalReports is how many destinations (host, port, reason) are reported as they are
	// first refused: a tool retrying in a loop must not flood the item's events.
	maxRefusalReports = 20
	// maxRefusalDestinations is how many destinations, those reported included, are counted one
	// by one; refusals to destinations past it are counted by reason alone (the proxy's memory
	// must not grow with the names a command makes up).
	maxRefusalDestinations = 200
)

// refusalLog records every refusal of one command, reported or counted: nothing it is given
// goes unrecorded. The first refusal of each of the first maxRefusalReports destinations is
// reported at once (add says so); every other refusal is counted, per destination for the
// first maxRefusalDestinations, past them per reason, and flush returns the counts when the
// command has ended (per reason in the reasons' order). Safe for concurrent use.
type refusalLog struct {
	mu       sync.Mutex
	counts   map[egress.Refusal]int // refusals counted and not yet flushed, per destination
	order    []egress.Refusal       // every destination seen, in order
	reported int                    // destinations reported at once
	others   map[egress.Reason]int  // refusals to destinations past maxRefusalDestinations
}

// add records r and reports whether it is to be reported now, alone.
func (l *refusalLog) add(r egress.Refusal) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.counts == nil {
		l.counts, l.others = map[egress.Refusal]int{}, map[egress.Reason]int{}
	}
	if _, seen := l.counts[r]; seen {
		l.counts[r]++
		return false
	}
	now := false
	switch {
	case l.reported < maxRefusalReports:
		l.reported++
		l.counts[r], now = 0, true
	case len(l.order) < maxRefusalDestinations:
		l.counts[r] = 1
	default:
		l.others[r.Reason]++
		return false
	}
	l.order = append(l.order, r)
	return now
}

// flush returns what add counted and not reported, as the command's reports, and forgets it:
// one per destination with its count, in the order they were first refused, then one per
// reason for the destinations past maxRefusalDestinations.
func (l *refusalLog) flush(command string) []NetworkRefusal {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []NetworkRefusal
	for _, r := range l.order {
		if n := l.counts[r]; n > 0 {
			out = append(out, NetworkRefusal{Refusal: r, Command: command, Count: n, Counted: true})
			l.counts[r] = 0
		}
	}
	for _, reason := range slices.Sorted(maps.Keys(l.others)) {
		out = append(out, NetworkRefusal{Refusal: egress.Refusal{Reason: reason}, Command: command, Count: l.others[reason], Counted: true, Others: true})
		delete(l.others, reason)
	}
	return out
}
