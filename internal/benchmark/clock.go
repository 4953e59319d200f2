package benchmark

import "outerloop/workitems"

// wall is the benchmarks' clock: what they measure is real elapsed time, so it is the system
// clock (the code under test gets its own, often fake, clock).
var wall workitems.Clock = workitems.SystemClock{}
