package depbuild

import (
	"testing"

	"fixtures/depbuild/broken"
)

func TestValue(t *testing.T) {
	if broken.Value() != 1 {
		t.Fatal("wrong")
	}
}
