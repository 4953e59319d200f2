package model

import (
	"errors"
	"time"
)

// MaxRetries is the default number of times the loop retries a transient model error.
const MaxRetries = 5

// BaseBackoff is the delay before the first retry, before jitter.
const BaseBackoff = 200 * time.Millisecond

// maxBackoffExp bounds the exponent so a runaway retry count cannot overflow.
const maxBackoffExp = 20

// Backoff returns the delay before retry n (from 1): 200ms·2^(n-1)·jitter. The caller draws
// jitter from [0.9, 1.1) so the function stays pure; values outside are clamped to it.
func Backoff(n int, jitter float64) time.Duration {
	if n < 1 {
		n = 1
	}
	exp := min(n-1, maxBackoffExp)
	jitter = min(max(jitter, 0.9), 1.1)
	return time.Duration(float64(BaseBackoff) * float64(int64(1)<<exp) * jitter)
}

// RetryDelay returns the delay before retry n of err: the server-given delay when err carries
// one (an *Error with RetryAfter > 0), else Backoff(n, jitter).
func RetryDelay(n int, err error, jitter float64) time.Duration {
	var me *Error
	if errors.As(err, &me) && me.RetryAfter > 0 {
		return me.RetryAfter
	}
	return Backoff(n, jitter)
}
