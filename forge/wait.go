package forge

import (
	"context"
	"slices"
	"strings"
	"time"

	"outerloop/workitems"
)

// sleep waits d on clock, or until ctx ends.
func sleep(ctx context.Context, clock workitems.Clock, d time.Duration) error {
	select {
	case <-clock.After(d):
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// backoff is the wait before try n (1-based) of a forge that is catching up: base·2^(n-1).
func backoff(base time.Duration, n int) time.Duration {
	return base << min(n-1, 10)
}

// retrying runs call up to cfg.Tries times while again(err) holds, waiting backoff between
// tries. It returns the last error.
func retrying(ctx context.Context, cfg Config, call func() error, again func(error) bool) error {
	var err error
	for n := 1; ; n++ {
		if err = call(); err == nil || !again(err) || n >= cfg.Tries {
			return err
		}
		if serr := sleep(ctx, cfg.Clock, backoff(cfg.RetryBase, n)); serr != nil {
			return err
		}
	}
}

// sortChecks orders checks by name, so results read the same every time.
func sortChecks(cs []Check) {
	slices.SortFunc(cs, func(a, b Check) int { return strings.Compare(a.Name, b.Name) })
}
