// Package payment takes payments for orders and refunds them.
package payment

import (
	"errors"
	"time"
)

// Errors of Refund.
var (
	ErrExpired    = errors.New("order expired: the refund window has closed")
	ErrOverRefund = errors.New("refund exceeds the amount left to refund")
)

// RefundWindow is how long after an order expires a refund is still accepted.
const RefundWindow = 30 * 24 * time.Hour

// Order is a paid order.
type Order struct {
	ID          string
	AmountCents int64
	Refunded    int64
	ExpiresAt   time.Time
}

// Charge is the amount a new order of items costs, in cents.
func Charge(items map[string]int64) int64 {
	var total int64
	for _, cents := range items {
		total += cents
	}
	return total
}

// Refund gives back amount cents of o at time now and returns what was refunded.
func Refund(o *Order, amount int64, now time.Time) (int64, error) {
	if now.After(o.ExpiresAt) {
		return 0, ErrExpired
	}
	o.Refunded += amount
	return amount, nil
}
