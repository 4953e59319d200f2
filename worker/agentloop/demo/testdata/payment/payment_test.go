package payment

import (
	"errors"
	"testing"
	"time"
)

var now = time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)

func TestCharge(t *testing.T) {
	if got := Charge(map[string]int64{"book": 1200, "pen": 300}); got != 1500 {
		t.Fatalf("Charge = %d, want 1500", got)
	}
}

func TestRefundOpenOrder(t *testing.T) {
	o := &Order{ID: "o1", AmountCents: 1000, ExpiresAt: now.Add(24 * time.Hour)}
	if got, err := Refund(o, 400, now); err != nil || got != 400 || o.Refunded != 400 {
		t.Fatalf("Refund = %d, %v (refunded %d), want 400", got, err, o.Refunded)
	}
}

func TestRefundExpiredOrder(t *testing.T) {
	// Expired two days ago: still inside the 30-day refund window.
	o := &Order{ID: "o2", AmountCents: 1000, ExpiresAt: now.Add(-48 * time.Hour)}
	got, err := Refund(o, 600, now)
	if err != nil || got != 600 {
		t.Fatalf("first refund inside the window = %d, %v; want 600, nil", got, err)
	}
	// Only 400 is left: a second refund of 600 must be refused, nothing changed.
	if got, err := Refund(o, 600, now); !errors.Is(err, ErrOverRefund) || got != 0 || o.Refunded != 600 {
		t.Fatalf("second refund = %d, %v (refunded %d); want 0, ErrOverRefund, 600", got, err, o.Refunded)
	}
	// Past the window the order cannot be refunded at all.
	late := now.Add(RefundWindow + 72*time.Hour)
	if _, err := Refund(o, 100, late); !errors.Is(err, ErrExpired) {
		t.Fatalf("refund after the window: %v, want ErrExpired", err)
	}
}
