package fail

import "testing"

func TestOK(t *testing.T) {}

func TestWrongSum(t *testing.T) {
	t.Log("computing")
	if got := 1 + 2; got != 4 {
		t.Errorf("sum = %d, want %d", got, 4)
	}
}

func TestTable(t *testing.T) {
	for _, c := range []struct {
		name     string
		in, want int
	}{{"one", 1, 1}, {"two", 2, 3}} {
		t.Run(c.name, func(t *testing.T) {
			if c.in != c.want {
				t.Fatalf("in %d != want %d", c.in, c.want)
			}
		})
	}
}
