package verify

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"regexp"
)

// The report formats.
const (
	FormatAuto   = "auto"
	FormatGoJSON = "gojson"
	FormatJUnit  = "junit"
	FormatTAP    = "tap"
)

// ErrUnknownFormat means a report's content is none of the formats we read.
var ErrUnknownFormat = errors.New("not a recognised test report")

const sniffBytes = 64 << 10

var (
	tapFirstLine = regexp.MustCompile(`^(TAP version \d+|1\.\.\d+|(not )?ok\b|Bail out!)`)
	utf8BOM      = []byte{0xEF, 0xBB, 0xBF}
)

// detectFormat decides the format from the first bytes of content only; the file name plays no
// part (a JUnit file named .json is JUnit). It returns "" when unsure.
func detectFormat(head []byte, _ string) string {
	head = bytes.TrimPrefix(head, utf8BOM)
	if t := bytes.TrimLeft(head, " \t\r\n"); len(t) > 0 && t[0] == '<' {
		if bytes.Contains(head, []byte("<testsuite")) || bytes.Contains(head, []byte("<testcase")) {
			return FormatJUnit
		}
		return ""
	}
	if t := bytes.TrimLeft(head, " \t\r\n"); len(t) > 0 && t[0] == '{' &&
		(bytes.Contains(head, []byte(`"numTotalTests"`)) || bytes.Contains(head, []byte(`"assertionResults"`))) {
		return FormatJestJSON
	}
	var sc jsonScanner
	var ev rawEvent
	first := true
	for i, line := range bytes.Split(head, []byte("\n")) {
		if i > 200 {
			break
		}
		l := bytes.TrimRight(line, "\r")
		t := bytes.TrimSpace(l)
		if len(t) == 0 {
			continue
		}
		if t[0] == '#' {
			continue // a TAP comment, or build output header before go test -json events
		}
		// TAP is decided by its first meaningful line, so JSON in its diagnostics cannot fool us
		// and an "ok" further down plain output does not make it TAP.
		if first && tapFirstLine.Match(l) {
			return FormatTAP
		}
		first = false
		if t[0] == '{' && sc.decode(t, &ev) == nil && ev.ActionSeen {
			return FormatGoJSON
		}
	}
	return ""
}

// ParseReport reads a report in the given format (auto: detected from content).
func ParseReport(r io.Reader, source, format string, lim Limits) (*Report, error) {
	br := bufio.NewReaderSize(r, sniffBytes)
	if format == "" || format == FormatAuto {
		head, err := br.Peek(sniffBytes)
		if err != nil && !errors.Is(err, io.EOF) && !errors.Is(err, bufio.ErrBufferFull) {
			return nil, fmt.Errorf("verify: reading %s: %w", source, err)
		}
		format = detectFormat(head, source)
		if format == "" {
			return nil, fmt.Errorf("verify: %s: %w (expected go test -json, JUnit XML, TAP or jest/vitest JSON)", source, ErrUnknownFormat)
		}
	}
	switch format {
	case FormatGoJSON:
		return ParseGoJSON(br, source, lim)
	case FormatJUnit:
		return ParseJUnit(br, source, lim)
	case FormatTAP:
		return ParseTAP(br, source, lim)
	case FormatJestJSON:
		return ParseJestJSON(br, source, lim)
	}
	return nil, fmt.Errorf("verify: %s: format %q: %w", source, format, ErrUnknownFormat)
}

// ParseFile opens and parses one report file.
func ParseFile(path, format string, lim Limits) (*Report, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("verify: report: %w", err)
	}
	defer f.Close()
	return ParseReport(f, path, format, lim)
}
