package pass

import "testing"

func TestAdd(t *testing.T) {
	if 1+1 != 2 {
		t.Fatal("math")
	}
}

func TestSub(t *testing.T) {
	t.Run("small", func(t *testing.T) {})
	t.Run("large", func(t *testing.T) {})
}

func TestSkipped(t *testing.T) { t.Skip("not on this platform") }
