package execloop

import (
	"encoding/json"
	"strconv"
	"strings"

	"outerloop/workitems"
	"outerloop/workitems/config"
)

// codexEvent is one line of `codex exec --json`.
type codexEvent struct {
	Type     string     `json:"type"`
	ThreadID string     `json:"thread_id"`
	Item     *codexItem `json:"item"`
	Usage    *struct {
		InputTokens           int64 `json:"input_tokens"`
		CachedInputTokens     int64 `json:"cached_input_tokens"`
		OutputTokens          int64 `json:"output_tokens"`
		ReasoningOutputTokens int64 `json:"reasoning_output_tokens"`
	} `json:"usage"`
	Error   *struct{ Message string } `json:"error"`
	Message string                    `json:"message"`
}

type codexItem struct {
	ID               string `json:"id"`
	Type             string `json:"type"`
	Text             string `json:"text"`
	Message          string `json:"message"`
	Command          string `json:"command"`
	AggregatedOutput string `json:"aggregated_output"`
	ExitCode         *int   `json:"exit_code"`
	Status           string `json:"status"`
	Changes          []struct {
		Path string `json:"path"`
		Kind string `json:"kind"`
	} `json:"changes"`
	Server string `json:"server"`
	Tool   string `json:"tool"`
	Query  string `json:"query"`
}

// codexParser reads `codex exec --json`. Codex reports tokens only at turn.completed and no
// cost: cost is usage × prices (the provider's price table), and a turn counts as one model call.
type codexParser struct {
	prices      config.Prices
	lastMessage string
	lastError   string
	final       *workitems.Exit
}

func (p *codexParser) Line(line []byte) (step, bool) {
	var ev codexEvent
	if err := json.Unmarshal(line, &ev); err != nil || ev.Type == "" {
		return step{Kind: workitems.KindMalformed, Warning: true, Message: "codex: malformed line: " + clip(string(line), 120)}, true
	}
	switch ev.Type {
	case "thread.started":
		return step{Kind: workitems.KindThreadStarted, Session: ev.ThreadID, Message: "codex thread " + ev.ThreadID,
			Data: map[string]string{"thread_id": ev.ThreadID}}, true
	case "turn.started":
		return step{Kind: workitems.KindTurnStarted, Message: "turn started", Spend: workitems.Spend{ModelCalls: 1}}, true
	case "turn.completed":
		s := step{Kind: workitems.KindTurnCompleted, Message: "turn completed"}
		if u := ev.Usage; u != nil {
			s.Spend.InputTokens = u.InputTokens
			s.Spend.CachedInputTokens = u.CachedInputTokens
			s.Spend.OutputTokens = u.OutputTokens
			s.Spend.CostUSD = cost(p.prices, s.Spend)
			s.Data = map[string]string{"input_tokens": strconv.FormatInt(u.InputTokens, 10),
				"cached_input_tokens": strconv.FormatInt(u.CachedInputTokens, 10),
				"output_tokens":       strconv.FormatInt(u.OutputTokens, 10)}
		}
		p.final = &workitems.Exit{Reason: workitems.ExitCompleted, LastMessage: p.lastMessage}
		return s, true
	case "turn.failed":
		msg := ev.Message
		if ev.Error != nil {
			msg = ev.Error.Message
		}
		e := classifyMessage("codex turn failed: " + msg)
		p.final = &e
		return step{Kind: workitems.KindTurnFailed, Message: clip("turn failed: "+msg, maxField)}, true
	case "error":
		p.lastError = ev.Message
		return step{Kind: workitems.KindError, Message: clip("codex error: "+ev.Message, maxField)}, true
	case "item.started", "item.updated", "item.completed":
		if ev.Item != nil {
			return p.item(ev.Type, ev.Item), true
		}
	}
	return step{Kind: workitems.KindUnknown, Message: "codex event " + clip(ev.Type, 60),
		Data: map[string]string{"event_type": clip(ev.Type, 60), "raw": clip(string(line), maxField)}}, true
}

func (p *codexParser) item(evType string, it *codexItem) step {
	done := evType == "item.completed"
	phase := strings.TrimPrefix(evType, "item.")
	s := step{Kind: workitems.KindUnknown, Data: map[string]string{"item_id": it.ID, "phase": phase}}
	switch it.Type {
	case "agent_message":
		s.Kind = workitems.KindAgentMessage
		if done {
			p.lastMessage = it.Text
		}
		s.Message = clip(it.Text, maxField)
	case "reasoning":
		s.Kind = workitems.KindReasoning
		s.Message = clip(it.Text, maxField)
	case "command_execution":
		s.Kind = workitems.KindCommand
		s.Message = clip(it.Command, maxField)
		s.Data["status"] = it.Status
		if it.ExitCode != nil {
			s.Data["exit_code"] = strconv.Itoa(*it.ExitCode)
		}
		if done {
			s.Spend.ToolCalls = 1
			s.Data["output_tail"] = clip(lastLines(it.AggregatedOutput, 3), maxField)
		}
	case "file_change":
		s.Kind = workitems.KindFileChange
		var paths []string
		for _, c := range it.Changes {
			paths = append(paths, c.Kind+" "+c.Path)
		}
		s.Message = clip(strings.Join(paths, ", "), maxField)
		s.Data["status"] = it.Status
	case "mcp_tool_call", "web_search":
		s.Kind = workitems.KindMCPToolCall
		if it.Type == "web_search" {
			s.Kind = workitems.KindWebSearch
		}
		s.Message = clip(strings.TrimSpace(it.Server+" "+it.Tool+" "+it.Query), maxField)
		s.Data["status"] = it.Status
		if done {
			s.Spend.ToolCalls = 1
		}
	case "error":
		s.Kind = workitems.KindItemError
		s.Message = clip(it.Message, maxField)
	default: // an item type outerloop does not know (todo_list, …): kind unknown, named in item_type
		s.Message = "codex item " + clip(it.Type, 60)
		s.Data["item_type"] = clip(it.Type, 60)
	}
	return s
}

func (p *codexParser) Exit(code int, stderrTail string) workitems.Exit {
	if p.final != nil {
		return *p.final
	}
	if p.lastError != "" {
		e := classifyMessage("codex: " + p.lastError)
		e.LastMessage = p.lastMessage
		return e
	}
	e := noFinal("codex", code, stderrTail)
	e.LastMessage = p.lastMessage
	return e
}

func (p *codexParser) Last() string { return p.lastMessage }
