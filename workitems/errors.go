package workitems

import "errors"

// Sentinel errors of the store.
var (
	// ErrLeaseLost means another worker holds a newer lease (fencing epoch) on the attempt; the
	// caller must stop without writing.
	ErrLeaseLost = errors.New("attempt lease lost")
	// ErrLeaseHeld means a live lease of another worker covers the attempt; try later.
	ErrLeaseHeld = errors.New("attempt lease held by another worker")
	// ErrNotFound means no item has that id.
	ErrNotFound = errors.New("item not found")
	// ErrExists means an item with that id exists already (a duplicate cron tick).
	ErrExists = errors.New("item exists")
	// ErrStale means the request is about an attempt the item has moved past.
	ErrStale = errors.New("stale attempt")
)
