package worker

import (
	"context"
	"errors"
	"io"
	"net"
	"net/url"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"
)

// RedisBlipRetryDelay is when asynq tries a task again whose handler failed because Redis was
// unreachable or not serving for a moment (a restart, an outage, a Sentinel failover). It is
// short and does not grow: the failure is not the attempt's, and asynq's default backoff
// (15–44 s after the first failure, 16–74 s after the second) left the item waiting, since a
// task asynq is about to deliver is one the recovery pass leaves alone.
const RedisBlipRetryDelay = 2 * time.Second

// redisUnavailable reports whether err is Redis being unreachable or not serving for a moment:
// a refused, reset or closed connection, a network timeout, a server loading its data after a
// restart, or a failover's read-only, master-down or try-again window. A context's end is not
// (asynq's timeout, a cancel): those keep their own handling.
func redisUnavailable(err error) bool {
	if err == nil || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return false
	}
	// An HTTP client's error (a forge, a model provider) is a net.Error too, but never Redis's:
	// it is the attempt's, with asynq's backoff and a count against MaxRetry.
	var ue *url.Error
	if errors.As(err, &ue) {
		return false
	}
	var ne net.Error
	switch {
	case errors.As(err, &ne),
		errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF),
		errors.Is(err, syscall.ECONNREFUSED), errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.EPIPE),
		errors.Is(err, redis.ErrPoolTimeout), errors.Is(err, redis.ErrPoolExhausted), errors.Is(err, redis.ErrClosed):
		return true
	}
	return redis.IsLoadingError(err) || redis.IsReadOnlyError(err) || redis.IsMasterDownError(err) ||
		redis.IsTryAgainError(err) || redis.IsNoReplicasError(err)
}

// storeUnavailableError is a store call that failed because Redis was not answering. Only the
// store's own calls are marked (at the call), so a git remote's EOF or a forge's timeout while
// the workspace is prepared stays the attempt's error.
type storeUnavailableError struct{ err error }

func (e *storeUnavailableError) Error() string { return e.err.Error() }
func (e *storeUnavailableError) Unwrap() error { return e.err }

// fromStore marks err as Redis being unavailable when it is (see redisUnavailable).
func fromStore(err error) error {
	if redisUnavailable(err) {
		return &storeUnavailableError{err}
	}
	return err
}

// storeUnavailable reports whether err is a store call marked by fromStore.
func storeUnavailable(err error) bool {
	var su *storeUnavailableError
	return errors.As(err, &su)
}
