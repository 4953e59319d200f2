package evals

import (
	"math"
	"math/rand/v2"
	"slices"
)

// Z95 is the standard normal quantile for a two-sided 95% interval: Φ⁻¹(0.975).
const Z95 = 1.959963984540054

// DefaultBootstrapSamples is the number of bootstrap resamples when ReportOptions leaves it unset.
const DefaultBootstrapSamples = 2000

// bootstrapStream is the PCG stream of the bootstrap's generator; the seed picks the state, so
// one seed always gives one interval.
const bootstrapStream = 0x9e3779b97f4a7c15

// Wilson returns the Wilson score interval for successes out of n trials at the normal quantile
// z (Z95 for 95%). With p̂ = successes/n:
//
//	center = (p̂ + z²/2n) / (1 + z²/n)
//	margin = z/(1 + z²/n) · √(p̂(1−p̂)/n + z²/4n²)
//	[lo, hi] = [center − margin, center + margin]
//
// clamped to [0, 1] against rounding. Unlike the normal (Wald) interval it stays inside [0, 1]
// and is not degenerate at 0 or n successes, which matters for the small n of an eval. With
// n = 0 nothing is known and the interval is [0, 1].
func Wilson(successes, n int, z float64) (lo, hi float64) {
	if n <= 0 {
		return 0, 1
	}
	nf := float64(n)
	p := float64(successes) / nf
	z2 := z * z
	denom := 1 + z2/nf
	center := (p + z2/(2*nf)) / denom
	margin := z / denom * math.Sqrt(p*(1-p)/nf+z2/(4*nf*nf))
	return max(0, center-margin), min(1, center+margin)
}

// PassAtK is the unbiased estimator of pass@k for one task (Chen et al., 2021): the probability
// that at least one of k runs drawn without replacement from its n runs, c of which closed,
// closed:
//
//	pass@k = 1 − C(n−c, k) / C(n, k)
//
// computed as the product 1 − Π_{i=n−c+1}^{n} (1 − k/i), which needs no large binomials. It is 1
// when n−c < k (every draw of k includes a closed run). It is NaN, undefined, unless
// 0 ≤ c ≤ n and 1 ≤ k ≤ n: k runs cannot be drawn from fewer; callers skip such tasks.
func PassAtK(n, c, k int) float64 {
	if k < 1 || k > n || c < 0 || c > n {
		return math.NaN()
	}
	if n-c < k {
		return 1
	}
	prod := 1.0
	for i := n - c + 1; i <= n; i++ {
		prod *= 1 - float64(k)/float64(i)
	}
	return 1 - prod
}

// McNemarExact returns the two-sided p-value of McNemar's exact test for paired outcomes with b
// pairs where only the first closed and c where only the second did. Under the null hypothesis
// each of the n = b+c discordant pairs goes either way with probability ½, so
//
//	p = min(1, 2 · Σ_{i=0}^{min(b,c)} C(n, i) / 2ⁿ)
//
// Concordant pairs carry no information about the difference and do not enter. With no
// discordant pairs there is no evidence of a difference: p = 1. Up to n = 1000 the binomials
// are summed directly (exact while they fit in 53 bits, so the small cases of an eval give
// exact dyadic values such as 0.25); past that the terms are summed in log space, so large n
// neither overflows nor loses the sum (p underflows to 0 only below ~1e-308).
func McNemarExact(b, c int) float64 {
	n := b + c
	if b < 0 || c < 0 || n == 0 {
		return 1
	}
	m := min(b, c)
	sum := 0.0
	if n <= 1000 { // C(1000, 500) ≈ 2.7e299 still fits a float64
		term := 1.0 // C(n, 0)
		for i := 0; i <= m; i++ {
			sum += term
			term = term * float64(n-i) / float64(i+1)
		}
		return min(1, math.Ldexp(sum, 1-n))
	}
	lgN, _ := math.Lgamma(float64(n + 1))
	for i := 0; i <= m; i++ {
		lgI, _ := math.Lgamma(float64(i + 1))
		lgNI, _ := math.Lgamma(float64(n - i + 1))
		sum += math.Exp(lgN - lgI - lgNI - float64(n)*math.Ln2)
	}
	return min(1, 2*sum)
}

// Percentile returns the p-th quantile (0 ≤ p ≤ 1) of xs by linear interpolation between the
// closest ranks (type 7 of Hyndman and Fan, the default of R and NumPy): with xs sorted and
// h = (len−1)·p, it is xs[⌊h⌋] + (h−⌊h⌋)·(xs[⌊h⌋+1] − xs[⌊h⌋]). So the p50 of 10, 20, 30, 40 is 25
// and its p90 is 37. It is NaN for an empty xs. xs is not modified.
func Percentile(xs []float64, p float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	return percentileSorted(s, p)
}

func percentileSorted(s []float64, p float64) float64 {
	if len(s) == 0 {
		return math.NaN()
	}
	p = min(1, max(0, p))
	h := float64(len(s)-1) * p
	lo := int(math.Floor(h))
	if lo >= len(s)-1 {
		return s[len(s)-1]
	}
	return s[lo] + (h-float64(lo))*(s[lo+1]-s[lo])
}

// TaskCost is one task's totals under one variant: the cost of all its runs and how many of them
// closed.
type TaskCost struct {
	CostUSD float64
	Closed  int
}

// PairedTask is one task's totals under the baseline and the candidate of a pair.
type PairedTask struct {
	Baseline, Candidate TaskCost
}

// CostPerClose returns the total cost over the closed runs of tasks, and false when none closed
// (the cost per close is then undefined, not infinite: nothing was bought).
func CostPerClose(tasks []TaskCost) (float64, bool) {
	var cost float64
	var closed int
	for _, t := range tasks {
		cost += t.CostUSD
		closed += t.Closed
	}
	if closed == 0 {
		return 0, false
	}
	return cost / float64(closed), true
}

// CostPerCloseDelta returns the candidate's cost per close minus the baseline's over tasks, and
// false when either closed nothing.
func CostPerCloseDelta(tasks []PairedTask) (float64, bool) {
	var bc, cc float64
	var bn, cn int
	for _, t := range tasks {
		bc += t.Baseline.CostUSD
		bn += t.Baseline.Closed
		cc += t.Candidate.CostUSD
		cn += t.Candidate.Closed
	}
	if bn == 0 || cn == 0 {
		return 0, false
	}
	return cc/float64(cn) - bc/float64(bn), true
}

// BootstrapCostPerCloseDelta returns a 95% percentile-bootstrap interval for the difference in
// cost per close, candidate − baseline, over tasks. Each of samples resamples draws len(tasks)
// tasks with replacement, keeping a task's baseline and candidate together (the runs are paired
// by task, and tasks, not runs, are the unit that varies between suites), and recomputes
// CostPerCloseDelta on the draw. The interval is the 2.5th and 97.5th Percentile of the deltas
// of the draws where both variants closed something; ok is false when no draw did (or there are
// no tasks), and the interval is then undefined. samples ≤ 0 means DefaultBootstrapSamples. The
// generator is math/rand/v2's PCG seeded with seed, so a seed always gives the same interval.
func BootstrapCostPerCloseDelta(tasks []PairedTask, samples int, seed int64) (lo, hi float64, ok bool) {
	if len(tasks) == 0 {
		return 0, 0, false
	}
	if samples <= 0 {
		samples = DefaultBootstrapSamples
	}
	rng := rand.New(rand.NewPCG(uint64(seed), bootstrapStream))
	draw := make([]PairedTask, len(tasks))
	deltas := make([]float64, 0, samples)
	for range samples {
		for i := range draw {
			draw[i] = tasks[rng.IntN(len(tasks))]
		}
		if d, ok := CostPerCloseDelta(draw); ok {
			deltas = append(deltas, d)
		}
	}
	if len(deltas) == 0 {
		return 0, 0, false
	}
	slices.Sort(deltas)
	return percentileSorted(deltas, 0.025), percentileSorted(deltas, 0.975), true
}

// MajorityClosed reports whether a task counts as closed for a variant: more than half of its
// runs closed. A tie (say 1 of 2) is not closed, so a task must close more often than not to
// count; a task with no runs is not closed.
func MajorityClosed(closed, runs int) bool {
	return 2*closed > runs
}
