package execloop

import (
	"regexp"
	"strconv"
	"strings"

	"outerloop/workitems"
)

// aider prints, after each model reply, a line like
//
//	Tokens: 4.2k sent, 1.1k cache write, 2.0k cache hit, 173 received. Cost: $0.0073 message, $0.0210 session.
//
// (older versions leave out the cache parts). The session cost is a running total.
var (
	aiderTokens  = regexp.MustCompile(`Tokens:\s*([\d.]+[kM]?) sent(?:,\s*([\d.]+[kM]?) cache write)?(?:,\s*([\d.]+[kM]?) cache hit)?,\s*([\d.]+[kM]?) received`)
	aiderCost    = regexp.MustCompile(`Cost:\s*\$([\d.]+) message,\s*\$([\d.]+) session`)
	aiderApplied = regexp.MustCompile(`^Applied edit to (.+)$`)
	aiderCommit  = regexp.MustCompile(`^Commit ([0-9a-f]{7,40}) (.*)$`)
	aiderErrors  = regexp.MustCompile(`(?i)(litellm\.\w*Error|APIError|RateLimitError|AuthenticationError|servers are down or overloaded|BadRequestError)`)
)

// aiderParser reads aider's plain output (`--message … --yes-always --no-pretty`). Aider exits
// 0 even when the tests it was asked to fix still fail, so "completed" is only a claim; the
// verifier decides.
type aiderParser struct {
	sessionCost float64
	tail        []string // last lines of ordinary output, for the final claim
	lastError   string
	edits       int
}

// aiderCount parses "4.2k", "173", "1.1M".
func aiderCount(s string) int64 {
	mult := 1.0
	switch {
	case strings.HasSuffix(s, "k"):
		mult, s = 1e3, strings.TrimSuffix(s, "k")
	case strings.HasSuffix(s, "M"):
		mult, s = 1e6, strings.TrimSuffix(s, "M")
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return 0
	}
	return int64(f*mult + 0.5)
}

func (p *aiderParser) Line(line []byte) (step, bool) {
	l := strings.TrimRight(string(line), "\r ")
	if strings.TrimSpace(l) == "" {
		return step{}, false
	}
	if m := aiderCost.FindStringSubmatch(l); m != nil {
		s := step{Kind: workitems.KindUsage, Message: clip(l, maxField), Spend: workitems.Spend{ModelCalls: 1},
			Data: map[string]string{"session_cost_usd": m[2]}}
		if session, err := strconv.ParseFloat(m[2], 64); err == nil && session >= p.sessionCost {
			s.Spend.CostUSD = session - p.sessionCost
			p.sessionCost = session
		}
		if t := aiderTokens.FindStringSubmatch(l); t != nil {
			write, hit := aiderCount(t[2]), aiderCount(t[3])
			s.Spend.InputTokens = aiderCount(t[1]) + write + hit
			s.Spend.CachedInputTokens = hit
			s.Spend.OutputTokens = aiderCount(t[4])
		}
		return s, true
	}
	if aiderTokens.MatchString(l) {
		return step{Kind: workitems.KindUsage, Message: clip(l, maxField)}, true
	}
	if m := aiderApplied.FindStringSubmatch(l); m != nil {
		p.edits++
		return step{Kind: workitems.KindFileChange, Message: clip(m[1], maxField)}, true
	}
	if m := aiderCommit.FindStringSubmatch(l); m != nil {
		return step{Kind: workitems.KindCommit, Message: clip(m[2], maxField), Data: map[string]string{"commit": m[1]}}, true
	}
	if aiderErrors.MatchString(l) {
		p.lastError = l
		return step{Kind: workitems.KindError, Message: clip(l, maxField)}, true
	}
	p.tail = append(p.tail, l)
	if len(p.tail) > 20 {
		p.tail = p.tail[len(p.tail)-20:]
	}
	return step{}, false
}

func (p *aiderParser) Exit(code int, stderrTail string) workitems.Exit {
	last := strings.Join(p.tail, "\n")
	if code == 0 && (p.lastError == "" || p.edits > 0) {
		return workitems.Exit{Reason: workitems.ExitCompleted, LastMessage: last}
	}
	if p.lastError != "" {
		e := classifyMessage("aider: " + p.lastError)
		e.LastMessage = last
		return e
	}
	e := noFinal("aider", code, stderrTail)
	e.LastMessage = last
	return e
}

func (p *aiderParser) Last() string { return strings.Join(p.tail, "\n") }
