package bigoutput

import (
	"strings"
	"testing"
)

func TestLongLine(t *testing.T) {
	t.Log(strings.Repeat("x", 5000))
	t.Error("expected short output, got " + strings.Repeat("y", 2000))
}

func TestManyLines(t *testing.T) {
	for i := 0; i < 200; i++ {
		t.Logf("line %d", i)
	}
}
