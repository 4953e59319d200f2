package worker

// Step events the sandbox's own doing leaves in an item's log, so that an escalation can say
// when a failure was the sandbox's (a refused connection, a limit) and name the setting that
// would allow it. Data keys are the same for every command kind.
const (
	// EventKindNetworkRefused: the egress proxy refused a connection of a command.
	// Data: host, port, reason (not_allowed | private_address | resolve_failed), command.
	EventKindNetworkRefused = "network_refused"
	// EventKindLimitExceeded: a command hit a resource limit and was stopped or refused by it.
	// Data: limit (memory | processes | cpu_time | file_size), value (the configured limit as
	// written), command.
	EventKindLimitExceeded = "limit_exceeded"
)
