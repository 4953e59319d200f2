package notify

import "time"

// Backoff is how long to wait after the attempt-th failed attempt (from 1): base doubled per
// attempt up to max, with "equal jitter" — a uniform point in the upper half, r in [0, 1) — so
// that deliveries failing together do not retry in lockstep yet never retry sooner than half the
// nominal delay.
func Backoff(attempt int, base, max time.Duration, r float64) time.Duration {
	d := base
	for i := 1; i < attempt && d < max; i++ {
		d *= 2
	}
	if d > max || d <= 0 {
		d = max
	}
	if r < 0 {
		r = 0
	}
	if r > 1 {
		r = 1
	}
	return d/2 + time.Duration(r*float64(d-d/2))
}
