package parallel

import (
	"testing"
	"time"
)

func TestGroup(t *testing.T) {
	for _, name := range []string{"a", "b", "c"} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			time.Sleep(10 * time.Millisecond)
			t.Logf("done %s", name)
			if name == "b" {
				t.Error("b failed")
			}
		})
	}
}

func TestTop1(t *testing.T) { t.Parallel(); time.Sleep(5 * time.Millisecond) }
func TestTop2(t *testing.T) { t.Parallel(); time.Sleep(5 * time.Millisecond) }
