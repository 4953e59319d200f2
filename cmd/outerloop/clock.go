package main

import "outerloop/workitems"

// clock is the command line's one clock: ages in listings, shutdown stage times, the demo's
// and the benchmarks' elapsed time. The commands that open the app pass the app its own
// clock (app.Options.Clock); this one is for what the CLI itself times.
var clock workitems.Clock = workitems.SystemClock{}
