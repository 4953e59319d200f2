package model

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
)

// maxSSELine bounds one line of a stream (a completed event repeats the whole output).
const maxSSELine = 32 << 20

// sseEvent is one server-sent event.
type sseEvent struct {
	Event string // the "event:" field, empty when absent
	Data  []byte // the "data:" lines joined by "\n"
}

// sseReader reads server-sent events (https://html.spec.whatwg.org/multipage/server-sent-events.html):
// fields up to a blank line make one event; comments (":") and id/retry fields are ignored.
type sseReader struct {
	r *bufio.Reader
}

func newSSEReader(r io.Reader) *sseReader { return &sseReader{r: bufio.NewReaderSize(r, 64<<10)} }

// errLineTooLong means a stream line passed maxSSELine.
var errLineTooLong = errors.New("sse line too long")

// Next returns the next event. At the end of the stream it returns io.EOF; an event cut by
// the end of the stream is dropped, as the spec says.
func (s *sseReader) Next() (sseEvent, error) {
	var ev sseEvent
	var data bytes.Buffer
	hasData := false
	for {
		line, err := s.readLine()
		if err != nil {
			return sseEvent{}, err
		}
		if len(line) == 0 {
			if !hasData && ev.Event == "" {
				continue
			}
			ev.Data = data.Bytes()
			return ev, nil
		}
		if line[0] == ':' {
			continue
		}
		field, value, _ := bytes.Cut(line, []byte(":"))
		value = bytes.TrimPrefix(value, []byte(" "))
		switch string(field) {
		case "event":
			ev.Event = string(value)
		case "data":
			if hasData {
				data.WriteByte('\n')
			}
			data.Write(value)
			hasData = true
		}
	}
}

func (s *sseReader) readLine() ([]byte, error) {
	var line []byte
	for {
		chunk, isPrefix, err := s.r.ReadLine()
		if err != nil {
			return nil, err
		}
		line = append(line, chunk...)
		if len(line) > maxSSELine {
			return nil, fmt.Errorf("%w (over %d bytes)", errLineTooLong, maxSSELine)
		}
		if !isPrefix {
			return bytes.TrimSuffix(line, []byte("\r")), nil
		}
	}
}
