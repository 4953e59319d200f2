package execloop

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"outerloop/workitems"
	"outerloop/workitems/config"
)

// claudeUsage is the usage block of a Claude Code message or result.
type claudeUsage struct {
	InputTokens              int64 `json:"input_tokens"`
	OutputTokens             int64 `json:"output_tokens"`
	CacheCreationInputTokens int64 `json:"cache_creation_input_tokens"`
	CacheReadInputTokens     int64 `json:"cache_read_input_tokens"`
}

// spend returns u as our spend: input tokens include cache reads and writes.
func (u claudeUsage) spend() workitems.Spend {
	return workitems.Spend{
		InputTokens:       u.InputTokens + u.CacheCreationInputTokens + u.CacheReadInputTokens,
		CachedInputTokens: u.CacheReadInputTokens,
		OutputTokens:      u.OutputTokens,
	}
}

// claudeEvent is one line of `claude -p --output-format stream-json --verbose`.
type claudeEvent struct {
	Type           string `json:"type"`
	Subtype        string `json:"subtype"`
	SessionID      string `json:"session_id"`
	Model          string `json:"model"`
	PermissionMode string `json:"permissionMode"`
	Message        *struct {
		ID      string          `json:"id"`
		Content json.RawMessage `json:"content"`
		Usage   *claudeUsage    `json:"usage"`
	} `json:"message"`
	// result
	IsError           bool            `json:"is_error"`
	Result            string          `json:"result"`
	TotalCostUSD      *float64        `json:"total_cost_usd"`
	NumTurns          int             `json:"num_turns"`
	Usage             *claudeUsage    `json:"usage"`
	APIErrorStatus    json.RawMessage `json:"api_error_status"`
	Errors            []string        `json:"errors"`
	PermissionDenials []struct {
		ToolName  string          `json:"tool_name"`
		ToolInput json.RawMessage `json:"tool_input"`
	} `json:"permission_denials"`
}

type claudeBlock struct {
	Type    string          `json:"type"`
	Text    string          `json:"text"`
	Name    string          `json:"name"`
	Input   json.RawMessage `json:"input"`
	IsError bool            `json:"is_error"`
}

// claudeParser reads Claude Code's stream-json. While the run goes on it charges each
// message's usage once (and, when the provider has prices, their cost); the final result's
// totals and total_cost_usd then replace those estimates.
type claudeParser struct {
	prices      config.Prices
	seen        map[string]claudeUsage // usage charged per message id
	charged     workitems.Spend        // tokens and cost charged so far
	lastMessage string
	final       *workitems.Exit
}

func (p *claudeParser) Line(line []byte) (step, bool) {
	var ev claudeEvent
	if err := json.Unmarshal(line, &ev); err != nil || ev.Type == "" {
		return step{Kind: workitems.KindMalformed, Warning: true, Message: "claude: malformed line: " + clip(string(line), 120)}, true
	}
	switch ev.Type {
	case "system":
		s := step{Kind: workitems.KindSystem, Session: ev.SessionID, Message: "claude " + clip(ev.Subtype, 60),
			Data: map[string]string{"subtype": clip(ev.Subtype, 60)}}
		if ev.Subtype == "init" {
			s.Kind = workitems.KindInit
			s.Data["session_id"] = ev.SessionID
			s.Data["model"] = clip(ev.Model, 80)
			s.Data["permission_mode"] = clip(ev.PermissionMode, 40)
		}
		return s, true
	case "assistant":
		return p.assistant(ev), true
	case "user":
		return p.user(ev), true
	case "result":
		return p.result(ev), true
	}
	return step{Kind: workitems.KindUnknown, Session: ev.SessionID, Message: "claude event " + clip(ev.Type, 60),
		Data: map[string]string{"event_type": clip(ev.Type, 60), "raw": clip(string(line), maxField)}}, true
}

func (p *claudeParser) blocks(ev claudeEvent) []claudeBlock {
	if ev.Message == nil {
		return nil
	}
	var bs []claudeBlock
	if json.Unmarshal(ev.Message.Content, &bs) != nil {
		// A plain string content (a user prompt echo).
		var s string
		if json.Unmarshal(ev.Message.Content, &s) == nil {
			bs = []claudeBlock{{Type: "text", Text: s}}
		}
	}
	return bs
}

func (p *claudeParser) assistant(ev claudeEvent) step {
	s := step{Kind: workitems.KindAssistant, Session: ev.SessionID, Data: map[string]string{}}
	var parts []string
	var text []string
	for _, b := range p.blocks(ev) {
		switch b.Type {
		case "text":
			text = append(text, b.Text)
			parts = append(parts, b.Text)
		case "tool_use":
			parts = append(parts, b.Name+" "+string(b.Input))
			s.Kind = workitems.KindToolUse
			s.Data["tool"] = clip(b.Name, 60)
		case "thinking":
			s.Kind = workitems.KindThinking
		}
	}
	if len(text) > 0 {
		p.lastMessage = strings.Join(text, "\n")
		if s.Kind == workitems.KindAssistant {
			s.Kind = workitems.KindAgentMessage
		}
	}
	s.Message = clip(strings.Join(parts, " | "), maxField)
	// One API message arrives as several lines (one per content block), each repeating the
	// message's usage so far: charge only what grew.
	if m := ev.Message; m != nil && m.Usage != nil {
		if p.seen == nil {
			p.seen = map[string]claudeUsage{}
		}
		prev, known := p.seen[m.ID]
		if !known {
			s.Spend.ModelCalls = 1
		}
		cur := *m.Usage
		cur.InputTokens = max(cur.InputTokens, prev.InputTokens)
		cur.OutputTokens = max(cur.OutputTokens, prev.OutputTokens)
		cur.CacheCreationInputTokens = max(cur.CacheCreationInputTokens, prev.CacheCreationInputTokens)
		cur.CacheReadInputTokens = max(cur.CacheReadInputTokens, prev.CacheReadInputTokens)
		p.seen[m.ID] = cur
		d := cur.spend().Sub(prev.spend())
		d.CostUSD = cost(p.prices, d)
		s.Spend = s.Spend.Add(d)
		p.charged = p.charged.Add(workitems.Spend{InputTokens: d.InputTokens,
			CachedInputTokens: d.CachedInputTokens, OutputTokens: d.OutputTokens, CostUSD: d.CostUSD})
	}
	return s
}

func (p *claudeParser) user(ev claudeEvent) step {
	s := step{Kind: workitems.KindUser, Session: ev.SessionID, Data: map[string]string{}}
	var parts []string
	for _, b := range p.blocks(ev) {
		if b.Type == "tool_result" {
			s.Kind = workitems.KindToolResult
			s.Spend.ToolCalls++
			if b.IsError {
				s.Data["is_error"] = "true"
			}
			parts = append(parts, "tool result")
		} else if b.Text != "" {
			parts = append(parts, b.Text)
		}
	}
	s.Message = clip(strings.Join(parts, " | "), maxField)
	return s
}

func (p *claudeParser) result(ev claudeEvent) step {
	s := step{Kind: workitems.KindResult, Session: ev.SessionID, Message: clip(ev.Subtype+": "+ev.Result, maxField),
		Data: map[string]string{"subtype": clip(ev.Subtype, 60), "is_error": strconv.FormatBool(ev.IsError),
			"num_turns": strconv.Itoa(ev.NumTurns)}}
	// The result's totals are authoritative: charge the difference to what was estimated.
	total := p.charged
	if ev.Usage != nil {
		u := ev.Usage.spend()
		total.InputTokens, total.CachedInputTokens, total.OutputTokens = u.InputTokens, u.CachedInputTokens, u.OutputTokens
	}
	if ev.TotalCostUSD != nil {
		total.CostUSD = *ev.TotalCostUSD
		s.Data["total_cost_usd"] = strconv.FormatFloat(*ev.TotalCostUSD, 'f', -1, 64)
	}
	s.Spend = total.Sub(p.charged)
	p.charged = total
	if ev.Result != "" {
		p.lastMessage = ev.Result
	}
	e := p.judge(ev)
	e.LastMessage = p.lastMessage
	p.final = &e
	return s
}

// judge maps a result to an exit: the subtype and is_error decide, never the exit code.
func (p *claudeParser) judge(ev claudeEvent) workitems.Exit {
	switch ev.Subtype {
	case "error_max_turns":
		return workitems.Exit{Reason: workitems.ExitBudgetExhausted, Budget: workitems.BudgetModelCalls,
			Message: fmt.Sprintf("claude stopped at its turn cap after %d turns", ev.NumTurns)}
	case "error_max_budget_usd":
		return workitems.Exit{Reason: workitems.ExitBudgetExhausted, Budget: workitems.BudgetCostUSD,
			Message: "claude stopped at its cost cap (--max-budget-usd)"}
	case "success":
		if ev.IsError {
			return classifyAPIError(ev.APIErrorStatus, "claude: "+ev.Result)
		}
		if len(ev.PermissionDenials) > 0 {
			var tools []string
			needsInput := false
			for _, d := range ev.PermissionDenials {
				tools = append(tools, d.ToolName)
				if d.ToolName == "AskUserQuestion" {
					needsInput = true
				}
			}
			if needsInput {
				return workitems.Exit{Reason: workitems.ExitNeedsInput,
					Message: "claude asked a question: " + clip(string(ev.PermissionDenials[0].ToolInput), 400)}
			}
			return workitems.Exit{Reason: workitems.ExitNeedsApproval,
				Message: "claude was denied permission for: " + clip(strings.Join(tools, ", "), 400)}
		}
		return workitems.Exit{Reason: workitems.ExitCompleted}
	case "error_during_execution":
		msg := strings.Join(ev.Errors, "; ")
		if msg == "" {
			msg = ev.Result
		}
		return classifyMessage("claude error during execution: " + msg)
	}
	return workitems.Exit{Reason: workitems.ExitFailed, Class: workitems.ClassUnknown,
		Message: "claude result " + clip(ev.Subtype, 60) + ": " + clip(ev.Result, 400)}
}

func (p *claudeParser) Exit(code int, stderrTail string) workitems.Exit {
	if p.final != nil {
		return *p.final
	}
	e := noFinal("claude", code, stderrTail)
	e.LastMessage = p.lastMessage
	return e
}

func (p *claudeParser) Last() string { return p.lastMessage }

// classifyAPIError maps the HTTP status Claude Code reports for a failed API call (when it
// gives one) to an exit, falling back to the message text.
func classifyAPIError(status json.RawMessage, msg string) workitems.Exit {
	var code int
	if json.Unmarshal(status, &code) != nil || code == 0 {
		return classifyMessage(msg)
	}
	msg = clip(fmt.Sprintf("%s (HTTP %d)", msg, code), 500)
	switch {
	case code == 401 || code == 403:
		return workitems.Exit{Reason: workitems.ExitFailed, Class: workitems.ClassPermission, Message: msg}
	case code == 408 || code == 409 || code == 429 || code >= 500:
		return workitems.Exit{Reason: workitems.ExitTransientError, Class: workitems.ClassTransient, Message: msg}
	case code == 404:
		return workitems.Exit{Reason: workitems.ExitFailed, Class: workitems.ClassNotFound, Message: msg}
	}
	return workitems.Exit{Reason: workitems.ExitFailed, Class: workitems.ClassInvalidInput, Message: msg}
}
