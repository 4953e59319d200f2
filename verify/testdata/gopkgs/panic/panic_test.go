package panic

import (
	"testing"
	"time"
)

func TestFirst(t *testing.T) {}

func TestParallelWaiting(t *testing.T) {
	t.Parallel()
	time.Sleep(2 * time.Second)
}

func TestBoom(t *testing.T) {
	var m map[string]int
	m["x"] = 1 // nil map write panics
}
