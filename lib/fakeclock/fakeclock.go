// Package fakeclock is a manually advanced workitems.Clock for tests: waiters are released by
// Advance, and BlockUntil lets a test wait until the code under test is waiting, instead of
// sleeping.
package fakeclock

import (
	"sync"
	"time"
)

// Clock is a fake clock.
type Clock struct {
	mu      sync.Mutex
	now     time.Time
	waiters []waiter
	changed chan struct{}
}

type waiter struct {
	at time.Time
	ch chan time.Time
}

// New returns a clock reading t.
func New(t time.Time) *Clock { return &Clock{now: t, changed: make(chan struct{})} }

// Now returns the fake time.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// After returns a channel that receives when the clock is advanced past d from now.
func (c *Clock) After(d time.Duration) <-chan time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	ch := make(chan time.Time, 1)
	if d <= 0 {
		ch <- c.now
		return ch
	}
	c.waiters = append(c.waiters, waiter{at: c.now.Add(d), ch: ch})
	c.signalLocked()
	return ch
}

func (c *Clock) signalLocked() {
	close(c.changed)
	c.changed = make(chan struct{})
}

// Advance moves the clock and releases every waiter whose time has come.
func (c *Clock) Advance(d time.Duration) { c.Set(c.Now().Add(d)) }

// Set moves the clock to t.
func (c *Clock) Set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = t
	kept := c.waiters[:0]
	for _, w := range c.waiters {
		if !w.at.After(t) {
			w.ch <- t
		} else {
			kept = append(kept, w)
		}
	}
	c.waiters = kept
	c.signalLocked()
}

// Waiters returns how many After channels are pending.
func (c *Clock) Waiters() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.waiters)
}

// BlockUntil waits until at least n After channels are pending (or done is closed).
func (c *Clock) BlockUntil(n int, done <-chan struct{}) bool {
	for {
		c.mu.Lock()
		if len(c.waiters) >= n {
			c.mu.Unlock()
			return true
		}
		ch := c.changed
		c.mu.Unlock()
		select {
		case <-ch:
		case <-done:
			return false
		}
	}
}
