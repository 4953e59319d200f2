// Package fleet owns the limits of a fleet template — one template over many repositories —
// across every worker and scheduler replica: how many of its items run at once (concurrency),
// how many pull requests it has open (max_open_prs) and opens per hour (prs_per_hour), and the
// circuit breaker that pauses it after consecutive failures (pause_after_failures).
//
// The limits are a gate in Redis, per template:
//
//	held      zset  items waiting their turn, by creation (µs); ties by id
//	running   set   items holding a slot: admitted and not yet out of running/verifying
//	reserved  set   running items that may still open a pull request (no open one yet)
//	prs       hash  the template's open pull requests: "<repo>#<n>" → item
//	opened    zset  pull requests opened, by when (ms): the sliding hour of prs_per_hour
//	streak    int   consecutive items ended failed or escalated (a close resets it)
//	repos     hash  repository → its newest item (the fleet view)
//
// An item's attempt asks the gate before it starts (Gate.Acquire, in the worker): a free slot
// with nobody ahead takes it; otherwise the item joins held and its task ends, holding no
// worker. The Admitter (a periodic round in the scheduler process) grants held items in order
// as slots free — an attempt ending, a pull request closing, the hour rolling — and enqueues
// their tasks again. Slots and pull requests are released by the store's TransitionHook, in the
// MULTI of the transition that ends them, so no crash between the two can leak a slot.
//
// An item that may open a pull request counts against max_open_prs and prs_per_hour from the
// moment it starts (reserved): limits hold however many run at once.
package fleet
