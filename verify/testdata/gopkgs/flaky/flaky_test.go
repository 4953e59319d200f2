package flaky

import (
	"os"
	"path/filepath"
	"testing"
)

// TestSometimes fails on the first run and passes once its marker file exists (FLAKY_DIR).
func TestSometimes(t *testing.T) {
	dir := os.Getenv("FLAKY_DIR")
	if dir == "" {
		t.Skip("FLAKY_DIR not set")
	}
	marker := filepath.Join(dir, "ran")
	if _, err := os.Stat(marker); err != nil {
		_ = os.WriteFile(marker, nil, 0o644)
		t.Fatal("race: connection reset by peer")
	}
}

func TestStable(t *testing.T) {}
