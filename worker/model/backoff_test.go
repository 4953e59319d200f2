package model_test

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"outerloop/worker/model"
	"outerloop/workitems"
)

func TestBackoff(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		n      int
		jitter float64
		want   time.Duration
	}{
		{"first retry waits 200ms", 1, 1.0, 200 * time.Millisecond},
		{"second retry doubles", 2, 1.0, 400 * time.Millisecond},
		{"fifth retry waits 3.2s", 5, 1.0, 3200 * time.Millisecond},
		{"low jitter shortens", 1, 0.9, 180 * time.Millisecond},
		{"high jitter lengthens", 3, 1.05, 840 * time.Millisecond},
		{"jitter below range is clamped", 1, 0.1, 180 * time.Millisecond},
		{"jitter above range is clamped", 1, 5, 220 * time.Millisecond},
		{"n below 1 counts as the first retry", 0, 1.0, 200 * time.Millisecond},
		{"a huge n does not overflow", 1000, 1.0, 200 * time.Millisecond << 20},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := model.Backoff(tt.n, tt.jitter); got != tt.want {
				t.Errorf("Backoff(%d, %v) = %v, want %v", tt.n, tt.jitter, got, tt.want)
			}
		})
	}
}

func TestRetryDelay(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		err  error
		want time.Duration
	}{
		{"server-given delay wins", &model.Error{Class: workitems.ClassTransient, RetryAfter: 3 * time.Second}, 3 * time.Second},
		{"wrapped server-given delay wins", fmt.Errorf("sampling: %w", &model.Error{RetryAfter: time.Second}), time.Second},
		{"no server delay uses backoff", &model.Error{Class: workitems.ClassTransient}, 400 * time.Millisecond},
		{"a plain error uses backoff", errors.New("boom"), 400 * time.Millisecond},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := model.RetryDelay(2, tt.err, 1.0); got != tt.want {
				t.Errorf("RetryDelay = %v, want %v", got, tt.want)
			}
		})
	}
	if model.MaxRetries != 5 {
		t.Errorf("MaxRetries = %d, want 5", model.MaxRetries)
	}
}

func TestErrorClassIsVisibleToWorkitems(t *testing.T) {
	t.Parallel()
	err := fmt.Errorf("sampling: %w", &model.Error{Provider: "p", Class: workitems.ClassPermission, QuotaExceeded: true})
	if got := workitems.ClassOf(err); got != workitems.ClassPermission {
		t.Errorf("workitems.ClassOf = %s, want permission", got)
	}
	var me *model.Error
	if !errors.As(err, &me) || !me.QuotaExceeded {
		t.Errorf("errors.As *model.Error failed: %v", err)
	}
	if got := workitems.ClassOf(errors.New("plain")); got != workitems.ClassUnknown {
		t.Errorf("ClassOf(plain) = %s", got)
	}
}
