package testwait_test

import (
	"testing"
	"time"

	"outerloop/lib/testwait"
)

// TestDeadlineIsBeforeTheBinarysDeadline: a wait gives up before the binary's deadline (so its
// own failure, naming what it awaited, is what the run reports) and not long before it.
func TestDeadlineIsBeforeTheBinarysDeadline(t *testing.T) {
	got := testwait.Deadline(t)
	binary, ok := t.Deadline()
	if !ok {
		if left := time.Until(got); left < testwait.NoDeadline-time.Minute || left > testwait.NoDeadline {
			t.Fatalf("no binary deadline: wait bound %v from now, want about %v", left, testwait.NoDeadline)
		}
		return
	}
	if !got.Before(binary) {
		t.Fatalf("wait bound %v is not before the binary's deadline %v", got, binary)
	}
	if margin := binary.Sub(got); margin > time.Minute {
		t.Fatalf("wait bound %v ends %v before the binary's deadline, want at most a minute", got, margin)
	}
}

// TestAfterFiresAtTheDeadline: the channel does not fire before the bound.
func TestAfterFiresAtTheDeadline(t *testing.T) {
	select {
	case <-testwait.After(t):
		t.Fatal("After fired at once")
	default:
	}
	if left := testwait.Left(t); left <= 0 {
		t.Fatalf("Left = %v, want > 0", left)
	}
}
