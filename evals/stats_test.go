package evals

import (
	"math"
	"testing"
)

// near reports whether got is within tol of want.
func near(got, want, tol float64) bool { return math.Abs(got-want) <= tol }

func TestWilson(t *testing.T) {
	// z = 1.959964, z² = 3.841459 throughout.
	tests := []struct {
		name      string
		s, n      int
		wantLo    float64
		wantHi    float64
		tolerance float64
	}{
		// 8/10: p̂ = 0.8, z²/n = 0.3841459, denominator 1 + 0.3841459 = 1.3841459.
		// center = (0.8 + z²/20) / 1.3841459 = (0.8 + 0.1920729) / 1.3841459 = 0.7167402
		// margin = (1.959964 / 1.3841459) · √(0.8·0.2/10 + z²/400)
		//        = 1.4160088 · √(0.016 + 0.0096036) = 1.4160088 · 0.1600113 = 0.2265777
		// [0.7167402 − 0.2265777, 0.7167402 + 0.2265777] = [0.4902, 0.9433]
		{"8 of 10", 8, 10, 0.4902, 0.9433, 5e-5},
		// 5/10: center = (0.5 + 0.1920729) / 1.3841459 = 0.5 exactly (symmetric);
		// margin = 1.4160088 · √(0.025 + 0.0096036) = 1.4160088 · 0.1860204 = 0.2634069
		// [0.2366, 0.7634]
		{"5 of 10", 5, 10, 0.2366, 0.7634, 5e-5},
		// 0/10: center = 0.1920729 / 1.3841459 = 0.1387664; margin = 1.4160088 · √(0.0096036)
		// = 1.4160088 · 0.0979980 = 0.1387664, so lo = 0 and hi = z²/(n + z²) = 3.841459/13.841459
		// = 0.2775
		{"0 of 10", 0, 10, 0, 0.2775, 5e-5},
		// 10/10 mirrors 0/10: [1 − 0.2775, 1].
		{"10 of 10", 10, 10, 0.7225, 1, 5e-5},
		// 1/1: denominator 1 + z² = 4.841459; center = (1 + z²/2)/4.841459 = 2.9207294/4.841459
		// = 0.6032747; margin = (1.959964/4.841459)·√(z²/4) = 0.4048291 · 0.979982 = 0.3967253
		// [0.2065, 1]
		{"1 of 1", 1, 1, 0.2065, 1, 5e-5},
		// n = 0: nothing is known.
		{"no runs", 0, 0, 0, 1, 0},
	}
	for _, tt := range tests {
		lo, hi := Wilson(tt.s, tt.n, Z95)
		if !near(lo, tt.wantLo, tt.tolerance) || !near(hi, tt.wantHi, tt.tolerance) {
			t.Errorf("%s: Wilson(%d, %d) = [%.6f, %.6f], want [%.4f, %.4f]", tt.name, tt.s, tt.n, lo, hi, tt.wantLo, tt.wantHi)
		}
		if lo < 0 || hi > 1 || lo > hi {
			t.Errorf("%s: Wilson(%d, %d) = [%v, %v], not inside [0, 1]", tt.name, tt.s, tt.n, lo, hi)
		}
	}
}

func TestPassAtK(t *testing.T) {
	tests := []struct {
		n, c, k int
		want    float64
		why     string
	}{
		{5, 2, 2, 0.7, "1 − C(3,2)/C(5,2) = 1 − 3/10"},
		{10, 3, 1, 0.3, "1 − C(7,1)/C(10,1) = 1 − 7/10 = c/n"},
		{10, 5, 3, 11.0 / 12, "1 − C(5,3)/C(10,3) = 1 − 10/120"},
		{4, 1, 2, 0.5, "1 − C(3,2)/C(4,2) = 1 − 3/6"},
		{10, 8, 3, 1, "n − c = 2 < k = 3: every draw of 3 holds a closed run"},
		{4, 0, 2, 0, "c = 0: 1 − C(4,2)/C(4,2)"},
		{3, 3, 3, 1, "c = n"},
		{1, 1, 1, 1, "1 of 1"},
		{1, 0, 1, 0, "0 of 1"},
	}
	for _, tt := range tests {
		if got := PassAtK(tt.n, tt.c, tt.k); !near(got, tt.want, 1e-12) {
			t.Errorf("PassAtK(%d, %d, %d) = %v, want %v (%s)", tt.n, tt.c, tt.k, got, tt.want, tt.why)
		}
	}
	// Undefined: k runs cannot be drawn from fewer, and counts must make sense.
	for _, a := range [][3]int{{0, 0, 1}, {2, 1, 3}, {2, 0, 3}, {3, 1, 0}, {3, 4, 1}, {3, -1, 1}} {
		if got := PassAtK(a[0], a[1], a[2]); !math.IsNaN(got) {
			t.Errorf("PassAtK(%d, %d, %d) = %v, want NaN", a[0], a[1], a[2], got)
		}
	}
}

func TestMcNemarExact(t *testing.T) {
	tests := []struct {
		b, c int
		want float64
		why  string
	}{
		{3, 0, 0.25, "n = 3: 2·C(3,0)/2³ = 2/8"},
		{0, 3, 0.25, "symmetric in b and c"},
		{5, 1, 0.21875, "n = 6: 2·(C(6,0) + C(6,1))/2⁶ = 2·(1 + 6)/64 = 14/64"},
		{10, 0, 0.001953125, "n = 10: 2·1/1024"},
		{1, 9, 0.021484375, "n = 10: 2·(1 + 10)/1024 = 22/1024"},
		{6, 2, 0.2890625, "n = 8: 2·(1 + 8 + 28)/256 = 74/256"},
		{2, 2, 1, "n = 4: 2·(1 + 4 + 6)/16 = 22/16 > 1, so 1"},
		{1, 0, 1, "n = 1: 2·1/2 = 1"},
		{0, 0, 1, "no discordant pairs: no evidence"},
	}
	for _, tt := range tests {
		// Dyadic rationals: the sum is exact, so the p-value must be too.
		if got := McNemarExact(tt.b, tt.c); got != tt.want {
			t.Errorf("McNemarExact(%d, %d) = %v, want %v (%s)", tt.b, tt.c, got, tt.want, tt.why)
		}
	}
	// Large n stays a probability: no overflow to Inf or NaN.
	for _, a := range [][2]int{{600, 600}, {1500, 1400}, {3000, 0}} {
		if got := McNemarExact(a[0], a[1]); math.IsNaN(got) || got < 0 || got > 1 {
			t.Errorf("McNemarExact(%d, %d) = %v, want a probability", a[0], a[1], got)
		}
	}
	if got := McNemarExact(600, 600); got != 1 {
		t.Errorf("McNemarExact(600, 600) = %v, want 1", got)
	}
	// Both sides of n = 1000, against the exact rational sums (too long for a comment; computed
	// with Python's fractions.Fraction and math.comb): b = 480, c = 520 is summed directly,
	// b = 480, c = 521 in log space.
	if got := McNemarExact(480, 520); !near(got, 0.21744829320414094, 1e-12) {
		t.Errorf("McNemarExact(480, 520) = %v, want 0.21744829320414094", got)
	}
	if got := McNemarExact(480, 521); !near(got, 0.20610731083295322, 1e-9) {
		t.Errorf("McNemarExact(480, 521) = %v, want 0.20610731083295322", got)
	}
}

func TestPercentile(t *testing.T) {
	xs := []float64{40, 10, 30, 20} // unsorted on purpose
	tests := []struct {
		p, want float64
		why     string
	}{
		{0.5, 25, "h = 3·0.5 = 1.5: 20 + 0.5·(30 − 20)"},
		{0.9, 37, "h = 3·0.9 = 2.7: 30 + 0.7·(40 − 30)"},
		{0, 10, "minimum"},
		{1, 40, "maximum"},
	}
	for _, tt := range tests {
		if got := Percentile(xs, tt.p); !near(got, tt.want, 1e-12) {
			t.Errorf("Percentile(%v, %v) = %v, want %v (%s)", xs, tt.p, got, tt.want, tt.why)
		}
	}
	if xs[0] != 40 {
		t.Errorf("Percentile sorted its argument: %v", xs)
	}
	if got := Percentile([]float64{7}, 0.9); got != 7 {
		t.Errorf("Percentile of one value = %v, want 7", got)
	}
	if got := Percentile(nil, 0.5); !math.IsNaN(got) {
		t.Errorf("Percentile(nil) = %v, want NaN", got)
	}
}

func TestMajorityClosed(t *testing.T) {
	tests := []struct {
		closed, runs int
		want         bool
	}{
		{1, 1, true}, {0, 1, false}, {2, 3, true}, {1, 3, false},
		{1, 2, false}, // a tie is not closed
		{2, 4, false}, {3, 4, true}, {0, 0, false},
	}
	for _, tt := range tests {
		if got := MajorityClosed(tt.closed, tt.runs); got != tt.want {
			t.Errorf("MajorityClosed(%d, %d) = %v, want %v", tt.closed, tt.runs, got, tt.want)
		}
	}
}

func TestCostPerClose(t *testing.T) {
	// (0.12 + 0.12 + 0.12 + 0.30) / (1 + 1 + 0 + 1) = 0.66 / 3 = 0.22.
	got, ok := CostPerClose([]TaskCost{{0.12, 1}, {0.12, 1}, {0.12, 0}, {0.30, 1}})
	if !ok || !near(got, 0.22, 1e-12) {
		t.Errorf("CostPerClose = %v, %v; want 0.22, true", got, ok)
	}
	if _, ok := CostPerClose([]TaskCost{{0.5, 0}}); ok {
		t.Error("CostPerClose with no closes is defined")
	}
}

func TestBootstrapCostPerCloseDelta(t *testing.T) {
	// Every task closes once under each variant; the baseline costs 1.00 and the candidate 1.50
	// per task, so every resample's delta is 1.50 − 1.00 = 0.50 and so is the interval.
	var same []PairedTask
	for range 8 {
		same = append(same, PairedTask{TaskCost{1, 1}, TaskCost{1.5, 1}})
	}
	lo, hi, ok := BootstrapCostPerCloseDelta(same, 500, 1)
	if !ok || !near(lo, 0.5, 1e-12) || !near(hi, 0.5, 1e-12) {
		t.Errorf("constant delta: [%v, %v] %v, want [0.5, 0.5] true", lo, hi, ok)
	}

	// Varying tasks: the point estimate is (0.9/5) − (1.2/8) = 0.18 − 0.15 = 0.03 with the
	// costs below (baseline 10 × 0.12 = 1.20 over 8 closes, candidate 10 × 0.09 = 0.90 over 5).
	var tasks []PairedTask
	for i := range 10 {
		b := TaskCost{CostUSD: 0.12}
		c := TaskCost{CostUSD: 0.09}
		if i < 8 {
			b.Closed = 1
		}
		if i < 5 {
			c.Closed = 1
		}
		tasks = append(tasks, PairedTask{b, c})
	}
	point, ok := CostPerCloseDelta(tasks)
	if !ok || !near(point, 0.03, 1e-12) {
		t.Fatalf("CostPerCloseDelta = %v, %v; want 0.03, true", point, ok)
	}
	lo, hi, ok = BootstrapCostPerCloseDelta(tasks, 2000, 42)
	if !ok || !(lo < point && point < hi) {
		t.Errorf("interval [%v, %v] (ok %v) does not contain the point estimate %v", lo, hi, ok, point)
	}
	// Determinism: the same seed gives the same interval, bit for bit.
	lo2, hi2, _ := BootstrapCostPerCloseDelta(tasks, 2000, 42)
	if lo != lo2 || hi != hi2 {
		t.Errorf("seed 42 twice: [%v, %v] then [%v, %v]", lo, hi, lo2, hi2)
	}
	lo3, hi3, _ := BootstrapCostPerCloseDelta(tasks, 2000, 43)
	if lo == lo3 && hi == hi3 {
		t.Errorf("seeds 42 and 43 gave the same interval [%v, %v]", lo, hi)
	}
	// samples ≤ 0 means the default.
	lo4, hi4, _ := BootstrapCostPerCloseDelta(tasks, 0, 42)
	if lo4 != lo || hi4 != hi {
		t.Errorf("samples 0: [%v, %v], want the default's [%v, %v]", lo4, hi4, lo, hi)
	}

	// Undefined: no tasks, or a variant that never closes in any resample.
	if _, _, ok := BootstrapCostPerCloseDelta(nil, 100, 1); ok {
		t.Error("no tasks: interval defined")
	}
	never := []PairedTask{{TaskCost{1, 1}, TaskCost{1, 0}}, {TaskCost{1, 0}, TaskCost{1, 0}}}
	if _, _, ok := BootstrapCostPerCloseDelta(never, 100, 1); ok {
		t.Error("candidate never closes: interval defined")
	}
}
