package execloop

import (
	"encoding/json"
	"strconv"
	"strings"

	"outerloop/workitems"
)

// UsageFDEnv names the environment variable that tells a `command` agent which file
// descriptor takes its usage reports: JSON lines, each a delta, e.g.
//
//	{"model_calls":1,"input_tokens":1200,"cached_input_tokens":800,"output_tokens":90,"cost_usd":0.004}
//	{"tool_calls":1,"message":"ran go test"}
//
// Writing them is optional; wall time is always measured. The descriptor is 3.
const UsageFDEnv = "OUTERLOOP_USAGE_FD"

// ExitTempFail is the exit status (EX_TEMPFAIL) by which a command says its failure is
// transient; any other non-zero status is failed.
const ExitTempFail = 75

// commandUsage is one line of the usage side channel.
type commandUsage struct {
	ModelCalls        int64   `json:"model_calls"`
	ToolCalls         int64   `json:"tool_calls"`
	InputTokens       int64   `json:"input_tokens"`
	CachedInputTokens int64   `json:"cached_input_tokens"`
	OutputTokens      int64   `json:"output_tokens"`
	CostUSD           float64 `json:"cost_usd"`
	Message           string  `json:"message"`
}

// commandParser reads any program: stdout is kept as the final claim's tail; usage comes from
// the side channel.
type commandParser struct {
	tail []string
}

func (p *commandParser) Line(line []byte) (step, bool) {
	l := strings.TrimRight(string(line), "\r")
	if strings.TrimSpace(l) != "" {
		p.tail = append(p.tail, l)
		if len(p.tail) > 20 {
			p.tail = p.tail[len(p.tail)-20:]
		}
	}
	return step{}, false
}

// usage parses one side-channel line.
func (p *commandParser) usage(line []byte) step {
	var u commandUsage
	dec := json.NewDecoder(strings.NewReader(string(line)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&u); err != nil {
		return step{Kind: workitems.KindMalformed, Warning: true, Message: "command: malformed usage line: " + clip(string(line), 120)}
	}
	if u.InputTokens < 0 || u.OutputTokens < 0 || u.CostUSD < 0 || u.ModelCalls < 0 || u.ToolCalls < 0 || u.CachedInputTokens < 0 {
		return step{Kind: workitems.KindMalformed, Warning: true, Message: "command: negative usage ignored: " + clip(string(line), 120)}
	}
	msg := u.Message
	if msg == "" {
		msg = "usage"
	}
	return step{Kind: workitems.KindUsage, Message: clip(msg, maxField), Spend: workitems.Spend{
		ModelCalls: u.ModelCalls, ToolCalls: u.ToolCalls, InputTokens: u.InputTokens,
		CachedInputTokens: u.CachedInputTokens, OutputTokens: u.OutputTokens, CostUSD: u.CostUSD}}
}

func (p *commandParser) Exit(code int, stderrTail string) workitems.Exit {
	last := strings.Join(p.tail, "\n")
	switch code {
	case 0:
		return workitems.Exit{Reason: workitems.ExitCompleted, LastMessage: last}
	case ExitTempFail:
		return workitems.Exit{Reason: workitems.ExitTransientError, Class: workitems.ClassTransient,
			Message: "command exited with status 75 (temporary failure): " + clip(stderrGist(stderrTail), 500), LastMessage: last}
	}
	return workitems.Exit{Reason: workitems.ExitFailed, Class: workitems.ClassUnknown,
		Message: "command exited with status " + strconv.Itoa(code) + ": " + clip(stderrGist(stderrTail), 500), LastMessage: last}
}

func (p *commandParser) Last() string { return strings.Join(p.tail, "\n") }
