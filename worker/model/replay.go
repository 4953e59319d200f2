package model

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"time"

	"outerloop/workitems"
)

// replayLine is one line of a recording.
type replayLine struct {
	Response *Response  `json:"response"`
	Error    *replayErr `json:"error"`
	Deltas   []string   `json:"deltas"`
}

type replayErr struct {
	Class                 workitems.ErrorClass `json:"class"`
	Message               string               `json:"message"`
	Status                int                  `json:"status"`
	RetryAfter            json.RawMessage      `json:"retry_after"` // "3s" or seconds
	ContextWindowExceeded bool                 `json:"context_window_exceeded"`
	QuotaExceeded         bool                 `json:"quota_exceeded"`
}

// parseRetryAfterJSON reads retry_after: a Go duration string ("3s", "1.5s") or a number of
// seconds.
func parseRetryAfterJSON(raw json.RawMessage) (time.Duration, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return 0, nil
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		if d, err := time.ParseDuration(s); err == nil {
			return d, nil
		}
		if f, err := strconv.ParseFloat(s, 64); err == nil {
			return time.Duration(f * float64(time.Second)), nil
		}
		return 0, fmt.Errorf("retry_after %q is not a duration", s)
	}
	var f float64
	if err := json.Unmarshal(raw, &f); err != nil {
		return 0, fmt.Errorf("retry_after %s is not a duration or a number of seconds", raw)
	}
	return time.Duration(f * float64(time.Second)), nil
}

// LoadRecording parses a recording (see the package doc for the format) into script steps.
// name is the provider name put into recorded errors.
func LoadRecording(name string, r io.Reader) ([]ScriptStep, error) {
	var steps []ScriptStep
	br := bufio.NewReader(r)
	for n := 1; ; n++ {
		line, err := br.ReadBytes('\n')
		if err != nil && !errors.Is(err, io.EOF) {
			return nil, fmt.Errorf("read recording: %w", err)
		}
		trimmed := bytes.TrimSpace(line)
		if len(trimmed) > 0 && trimmed[0] != '#' {
			step, perr := parseReplayLine(name, trimmed)
			if perr != nil {
				return nil, fmt.Errorf("recording line %d: %w", n, perr)
			}
			steps = append(steps, step)
		}
		if errors.Is(err, io.EOF) {
			return steps, nil
		}
	}
}

func parseReplayLine(name string, line []byte) (ScriptStep, error) {
	dec := json.NewDecoder(bytes.NewReader(line))
	dec.DisallowUnknownFields()
	var l replayLine
	if err := dec.Decode(&l); err != nil {
		return ScriptStep{}, err
	}
	switch {
	case l.Response != nil && l.Error != nil:
		return ScriptStep{}, errors.New(`a line holds "response" or "error", not both`)
	case l.Response != nil:
		// An omitted end_turn means "the turn ends unless the model called a tool", so a
		// hand-written recording need not spell it out.
		var presence struct {
			Response struct {
				EndTurn *bool `json:"end_turn"`
			} `json:"response"`
		}
		if json.Unmarshal(line, &presence) == nil && presence.Response.EndTurn == nil {
			l.Response.EndTurn = len(l.Response.ToolCalls()) == 0
		}
		return ScriptStep{Response: l.Response, Deltas: l.Deltas}, nil
	case l.Error != nil:
		if !slices.Contains(workitems.AllErrorClasses(), l.Error.Class) {
			return ScriptStep{}, fmt.Errorf("error class %q is not one of %v", l.Error.Class, workitems.AllErrorClasses())
		}
		d, err := parseRetryAfterJSON(l.Error.RetryAfter)
		if err != nil {
			return ScriptStep{}, err
		}
		return ScriptStep{Deltas: l.Deltas, Err: &Error{Provider: name, Class: l.Error.Class, StatusCode: l.Error.Status,
			RetryAfter: d, ContextWindowExceeded: l.Error.ContextWindowExceeded, QuotaExceeded: l.Error.QuotaExceeded,
			Message: l.Error.Message}}, nil
	}
	return ScriptStep{}, errors.New(`a line needs "response" or "error"`)
}

// NewReplay returns a provider playing the recording at path, one line per request, in
// order; a request past the end is an invariant_violation (ErrScriptExhausted). Each
// provider value has its own position in the recording.
func NewReplay(name, path string) (*Scripted, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("model provider %q: open recording: %w", name, err)
	}
	defer f.Close()
	steps, err := LoadRecording(name, f)
	if err != nil {
		return nil, fmt.Errorf("model provider %q: %s: %w", name, path, err)
	}
	return NewScripted(name, steps...), nil
}
