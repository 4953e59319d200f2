package bench

import "testing"

func TestAdd(t *testing.T) {
	if 1+1 != 2 {
		t.Fatal("arithmetic")
	}
}

func BenchmarkAdd(b *testing.B) {
	for b.Loop() {
		_ = 1 + 1
	}
}
