package config

import (
	"fmt"
	"time"

	"outerloop/workitems"
)

// Waits is the config's waits: section: the deployment's poller of waiting items.
type Waits struct {
	// PollEvery is how often the poller looks for waiting items whose next poll is due
	// (default 2s); each item is polled at most every 15 s at first, less often as it ages.
	PollEvery workitems.Duration `yaml:"poll_every" json:"poll_every"`
	// FirstPoll is how long after an item starts waiting the poller first looks (default 15s);
	// later polls back off with the wait's age, up to 10 minutes.
	FirstPoll workitems.Duration `yaml:"first_poll" json:"first_poll"`
	// PollRate bounds the poller's calls to each forge per second (default 2), across replicas
	// sharing the work; a forge's rate limit and Retry-After postpone its items further.
	PollRate float64 `yaml:"poll_rate" json:"poll_rate"`
	// InboxAfter: a pull request waiting for a person's review longer than this is listed in the
	// inbox (default 24h).
	InboxAfter workitems.Duration `yaml:"inbox_after" json:"inbox_after"`
}

// WithDefaults fills in what w leaves empty.
func (w Waits) WithDefaults() Waits {
	if w.PollEvery == 0 {
		w.PollEvery = workitems.Duration(2 * time.Second)
	}
	if w.FirstPoll == 0 {
		w.FirstPoll = workitems.Duration(workitems.DefaultFirstPoll)
	}
	if w.PollRate == 0 {
		w.PollRate = 2
	}
	if w.InboxAfter == 0 {
		w.InboxAfter = workitems.Duration(24 * time.Hour)
	}
	return w
}

func (w Waits) validate() error {
	switch {
	case w.PollEvery < workitems.Duration(100*time.Millisecond) || w.PollEvery > workitems.Duration(time.Hour):
		return fmt.Errorf("config: waits.poll_every: %s is not between 100ms and 1h", w.PollEvery)
	case w.FirstPoll < workitems.Duration(100*time.Millisecond) || w.FirstPoll > workitems.Duration(time.Hour):
		return fmt.Errorf("config: waits.first_poll: %s is not between 100ms and 1h", w.FirstPoll)
	case w.PollRate <= 0 || w.PollRate > 1000:
		return fmt.Errorf("config: waits.poll_rate: %g is not between 0 and 1000 calls per second", w.PollRate)
	case w.InboxAfter < 0:
		return fmt.Errorf("config: waits.inbox_after: must not be negative")
	}
	return nil
}
