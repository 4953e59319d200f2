package verify

import (
	"errors"
	"strconv"
	"unicode/utf16"
	"unicode/utf8"
)

// A small decoder for the flat JSON objects go test -json writes, one per line. It reads only the
// fields the parser uses and returns strings as slices of the line (or of a scratch buffer when
// they hold escapes), so a stream of millions of events costs no allocation per event. It is
// strict about syntax: anything that is not one well-formed object is an error, and the caller
// treats the line as non-JSON output.

var errBadJSON = errors.New("not a JSON object")

type eventAction uint8

const (
	actOther eventAction = iota
	actStart
	actRun
	actPause
	actCont
	actPass
	actFail
	actSkip
	actOutput
	actBench
	actBuildOutput
	actBuildFail
)

// actionOf maps a test2json action name to its constant (a switch on string(b) does not allocate).
func actionOf(b []byte) eventAction {
	switch string(b) {
	case "start":
		return actStart
	case "run":
		return actRun
	case "pause":
		return actPause
	case "cont":
		return actCont
	case "pass":
		return actPass
	case "fail":
		return actFail
	case "skip":
		return actSkip
	case "output":
		return actOutput
	case "bench":
		return actBench
	case "build-output":
		return actBuildOutput
	case "build-fail":
		return actBuildFail
	}
	return actOther
}

// rawEvent is one go test -json event; byte slices alias the line or the scanner's scratch space
// and are valid until the next decode.
type rawEvent struct {
	Action      eventAction
	ActionSeen  bool
	Package     []byte
	Test        []byte
	Output      []byte
	FailedBuild []byte
	ImportPath  []byte
	Elapsed     float64
}

type jsonScanner struct {
	scratch [6][]byte // one per string field that may need unescaping, and one for keys
}

func (s *jsonScanner) decode(line []byte, ev *rawEvent) error {
	*ev = rawEvent{}
	i := skipWS(line, 0)
	if i >= len(line) || line[i] != '{' {
		return errBadJSON
	}
	i = skipWS(line, i+1)
	if i < len(line) && line[i] == '}' {
		return s.end(line, i+1)
	}
	for {
		if i >= len(line) || line[i] != '"' {
			return errBadJSON
		}
		key, next, err := s.str(line, i, 5)
		if err != nil {
			return err
		}
		i = skipWS(line, next)
		if i >= len(line) || line[i] != ':' {
			return errBadJSON
		}
		i = skipWS(line, i+1)
		if i >= len(line) {
			return errBadJSON
		}
		slot := -1
		switch string(key) {
		case "Action":
			slot = 0
		case "Package":
			slot = 1
		case "Test":
			slot = 2
		case "Output":
			slot = 3
		case "FailedBuild", "ImportPath":
			slot = 4
		case "Elapsed":
			if line[i] == '-' || (line[i] >= '0' && line[i] <= '9') {
				j := numEnd(line, i)
				f, err := strconv.ParseFloat(string(line[i:j]), 64)
				if err != nil {
					return errBadJSON
				}
				ev.Elapsed = f
				i = j
				goto next
			}
		}
		if slot >= 0 && line[i] == '"' {
			// FailedBuild and ImportPath share a slot: they are copied out below.
			v, j, err := s.str(line, i, slot)
			if err != nil {
				return err
			}
			switch string(key) {
			case "Action":
				ev.Action = actionOf(v)
				ev.ActionSeen = true
			case "Package":
				ev.Package = v
			case "Test":
				ev.Test = v
			case "Output":
				ev.Output = v
			case "FailedBuild":
				ev.FailedBuild = append([]byte(nil), v...)
			case "ImportPath":
				ev.ImportPath = append([]byte(nil), v...)
			}
			i = j
		} else {
			j, err := skipValue(line, i, 0)
			if err != nil {
				return err
			}
			i = j
		}
	next:
		i = skipWS(line, i)
		if i >= len(line) {
			return errBadJSON
		}
		switch line[i] {
		case ',':
			i = skipWS(line, i+1)
		case '}':
			return s.end(line, i+1)
		default:
			return errBadJSON
		}
	}
}

func (s *jsonScanner) end(line []byte, i int) error {
	if skipWS(line, i) != len(line) {
		return errBadJSON
	}
	return nil
}

func skipWS(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\r' || b[i] == '\n') {
		i++
	}
	return i
}

func numEnd(b []byte, i int) int {
	for i < len(b) {
		c := b[i]
		if (c >= '0' && c <= '9') || c == '-' || c == '+' || c == '.' || c == 'e' || c == 'E' {
			i++
			continue
		}
		break
	}
	return i
}

// str decodes the JSON string starting at b[i] == '"'. Without escapes it returns a slice of b.
func (s *jsonScanner) str(b []byte, i, slot int) ([]byte, int, error) {
	i++
	start := i
	for i < len(b) {
		c := b[i]
		if c == '"' {
			return b[start:i], i + 1, nil
		}
		if c == '\\' {
			break
		}
		if c < 0x20 {
			return nil, 0, errBadJSON
		}
		i++
	}
	if i >= len(b) {
		return nil, 0, errBadJSON
	}
	out := append(s.scratch[slot][:0], b[start:i]...)
	for i < len(b) {
		c := b[i]
		switch {
		case c == '"':
			s.scratch[slot] = out
			return out, i + 1, nil
		case c < 0x20:
			return nil, 0, errBadJSON
		case c != '\\':
			out = append(out, c)
			i++
			continue
		}
		if i+1 >= len(b) {
			return nil, 0, errBadJSON
		}
		switch b[i+1] {
		case '"', '\\', '/':
			out = append(out, b[i+1])
		case 'b':
			out = append(out, '\b')
		case 'f':
			out = append(out, '\f')
		case 'n':
			out = append(out, '\n')
		case 'r':
			out = append(out, '\r')
		case 't':
			out = append(out, '\t')
		case 'u':
			r, n, ok := hexRune(b, i)
			if !ok {
				return nil, 0, errBadJSON
			}
			out = utf8.AppendRune(out, r)
			i += n
			continue
		default:
			return nil, 0, errBadJSON
		}
		i += 2
	}
	return nil, 0, errBadJSON
}

// hexRune reads \uXXXX (and a following low surrogate) at b[i]; n is the bytes consumed.
func hexRune(b []byte, i int) (rune, int, bool) {
	r1, ok := hex4(b, i+2)
	if !ok {
		return 0, 0, false
	}
	if utf16.IsSurrogate(r1) {
		if i+12 <= len(b) && b[i+6] == '\\' && b[i+7] == 'u' {
			if r2, ok := hex4(b, i+8); ok {
				if r := utf16.DecodeRune(r1, r2); r != utf8.RuneError {
					return r, 12, true
				}
			}
		}
		return utf8.RuneError, 6, true
	}
	return r1, 6, true
}

func hex4(b []byte, i int) (rune, bool) {
	if i+4 > len(b) {
		return 0, false
	}
	var r rune
	for _, c := range b[i : i+4] {
		r <<= 4
		switch {
		case c >= '0' && c <= '9':
			r |= rune(c - '0')
		case c >= 'a' && c <= 'f':
			r |= rune(c - 'a' + 10)
		case c >= 'A' && c <= 'F':
			r |= rune(c - 'A' + 10)
		default:
			return 0, false
		}
	}
	return r, true
}

// skipValue skips any JSON value at b[i]; depth bounds nesting.
func skipValue(b []byte, i, depth int) (int, error) {
	if depth > 64 || i >= len(b) {
		return 0, errBadJSON
	}
	switch c := b[i]; {
	case c == '"':
		i++
		for i < len(b) {
			switch b[i] {
			case '\\':
				i += 2
				continue
			case '"':
				return i + 1, nil
			}
			i++
		}
		return 0, errBadJSON
	case c == '{' || c == '[':
		closer := byte('}')
		if c == '[' {
			closer = ']'
		}
		i = skipWS(b, i+1)
		if i < len(b) && b[i] == closer {
			return i + 1, nil
		}
		for {
			if c == '{' {
				if i >= len(b) || b[i] != '"' {
					return 0, errBadJSON
				}
				j, err := skipValue(b, i, depth+1)
				if err != nil {
					return 0, err
				}
				i = skipWS(b, j)
				if i >= len(b) || b[i] != ':' {
					return 0, errBadJSON
				}
				i = skipWS(b, i+1)
			}
			j, err := skipValue(b, i, depth+1)
			if err != nil {
				return 0, err
			}
			i = skipWS(b, j)
			if i >= len(b) {
				return 0, errBadJSON
			}
			if b[i] == closer {
				return i + 1, nil
			}
			if b[i] != ',' {
				return 0, errBadJSON
			}
			i = skipWS(b, i+1)
		}
	case c == '-' || (c >= '0' && c <= '9'):
		j := numEnd(b, i)
		if _, err := strconv.ParseFloat(string(b[i:j]), 64); err != nil {
			return 0, errBadJSON
		}
		return j, nil
	case c == 't' || c == 'f' || c == 'n':
		for _, lit := range []string{"true", "false", "null"} {
			if len(b)-i >= len(lit) && string(b[i:i+len(lit)]) == lit {
				return i + len(lit), nil
			}
		}
	}
	return 0, errBadJSON
}
