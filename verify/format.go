package verify

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"outerloop/workitems"
)

// The report formats (workitems.ReportFormat owns the vocabulary the config accepts;
// BuiltinFormats has a parser for each).
const (
	FormatAuto     = workitems.FormatAuto
	FormatGoJSON   = workitems.FormatGoJSON
	FormatJUnit    = workitems.FormatJUnit
	FormatTAP      = workitems.FormatTAP
	FormatJestJSON = workitems.FormatJestJSON
)

// Detection is how the first bytes of a report show a format.
type Detection int

// The detections. Auto takes the first format, in the registry's order, that the head opens
// as, else the first found inside it: a format that says how its reports begin (a root element,
// a first line) wins over one that only recognises its lines further in.
const (
	DetectNone   Detection = iota // not this format
	DetectInside                  // this format's lines appear after other output (go test -json after `go: downloading`)
	DetectOpens                   // the head opens as this format (TAP's first line, JUnit's root element)
)

// Format is one evidence format the verifier reads: the name a done check's `format:` and
// `outerloop verify --format` give, how auto recognises it, and its parser.
type Format struct {
	Name workitems.ReportFormat
	// Title names the format for people ("JUnit XML"), in the error that lists what auto expects.
	Title string
	// Detect looks at head — the report's first bytes, up to 64 KiB, without a UTF-8 BOM — and
	// never at a file name. nil: never detected, read only when named.
	Detect func(head []byte) Detection
	// Parse reads the whole report from its first byte (a BOM included) and fills a Report
	// (NewReport, then Tally). lim comes with its defaults filled: a parser keeps at most
	// lim.MaxTests cases, lim.OutputTail bytes of output per test and lines of lim.MaxLine,
	// and streams rather than holds the report when it can. The error is for a failing reader
	// only: a malformed or cut report is a Report with Complete false and warnings.
	Parse func(r io.Reader, source string, lim Limits) (*Report, error)
}

// Formats is a registry of evidence formats, in the order auto asks them. The verifier
// (WithFormats) and `outerloop verify` (CLIOptions.Formats) read with one; BuiltinFormats is
// the default.
type Formats struct {
	list []Format
}

// BuiltinFormats returns the formats the verifier reads, one for each name in
// workitems.AllReportFormats (auto aside), in that order.
func BuiltinFormats() *Formats {
	return &Formats{list: []Format{
		{Name: FormatGoJSON, Title: "go test -json", Detect: detectGoJSON, Parse: ParseGoJSON},
		{Name: FormatJUnit, Title: "JUnit XML", Detect: detectJUnit, Parse: ParseJUnit},
		{Name: FormatTAP, Title: "TAP", Detect: detectTAP, Parse: ParseTAP},
		{Name: FormatJestJSON, Title: "jest/vitest JSON", Detect: detectJestJSON, Parse: ParseJestJSON},
	}}
}

// ErrBadFormat means a format cannot be registered (no name, auto, a name taken, no parser).
var ErrBadFormat = errors.New("bad evidence format")

// NewFormats returns a registry of the given formats, in that order.
func NewFormats(list ...Format) (*Formats, error) {
	seen := map[workitems.ReportFormat]bool{}
	for _, f := range list {
		switch {
		case f.Name == "" || f.Name == FormatAuto:
			return nil, fmt.Errorf("verify: format %q: %w: want a name of its own (auto is detection)", f.Name, ErrBadFormat)
		case seen[f.Name]:
			return nil, fmt.Errorf("verify: format %q: %w: registered twice", f.Name, ErrBadFormat)
		case f.Parse == nil:
			return nil, fmt.Errorf("verify: format %q: %w: no parser", f.Name, ErrBadFormat)
		}
		seen[f.Name] = true
	}
	return &Formats{list: append([]Format(nil), list...)}, nil
}

// With returns a registry of these formats followed by more, which auto therefore asks last:
// a format added never changes how reports of the others are detected.
func (fs *Formats) With(more ...Format) (*Formats, error) {
	return NewFormats(append(append([]Format(nil), fs.list...), more...)...)
}

// Names lists the registered formats' names, in order (auto is not one).
func (fs *Formats) Names() []workitems.ReportFormat {
	out := make([]workitems.ReportFormat, len(fs.list))
	for i, f := range fs.list {
		out[i] = f.Name
	}
	return out
}

// Lookup returns the format registered under name.
func (fs *Formats) Lookup(name workitems.ReportFormat) (Format, bool) {
	for _, f := range fs.list {
		if f.Name == name {
			return f, true
		}
	}
	return Format{}, false
}

// check refuses a name that is neither auto nor registered.
func (fs *Formats) check(name workitems.ReportFormat) error {
	if name == FormatAuto {
		return nil
	}
	if _, ok := fs.Lookup(name); !ok {
		return fmt.Errorf("verify: format %q: want one of %s", name,
			workitems.JoinKinds(append([]workitems.ReportFormat{FormatAuto}, fs.Names()...)))
	}
	return nil
}

// Detect names the format of a report from its first bytes (up to 64 KiB) only: the first
// format, in order, the head opens as, else the first found inside it.
func (fs *Formats) Detect(head []byte) (Format, bool) {
	head = bytes.TrimPrefix(head, utf8BOM)
	inside := -1
	for i, f := range fs.list {
		if f.Detect == nil {
			continue
		}
		switch f.Detect(head) {
		case DetectOpens:
			return f, true
		case DetectInside:
			if inside < 0 {
				inside = i
			}
		}
	}
	if inside < 0 {
		return Format{}, false
	}
	return fs.list[inside], true
}

// Parse reads a report in the named format (auto or "": detected from the content). A report
// of no registered format is an ErrUnknownFormat error saying, when it can, what the content
// is instead (a runner's console output, a build that failed before any report).
func (fs *Formats) Parse(r io.Reader, source string, name workitems.ReportFormat, lim Limits) (*Report, error) {
	br := bufio.NewReaderSize(r, sniffBytes)
	var f Format
	if name == "" || name == FormatAuto {
		head, err := br.Peek(sniffBytes)
		if err != nil && !errors.Is(err, io.EOF) && !errors.Is(err, bufio.ErrBufferFull) {
			return nil, fmt.Errorf("verify: reading %s: %w", source, err)
		}
		var ok bool
		if f, ok = fs.Detect(head); !ok {
			return nil, unknownFormat(source, head, fs.titles())
		}
	} else {
		var ok bool
		if f, ok = fs.Lookup(name); !ok {
			return nil, fmt.Errorf("verify: %s: format %q: %w", source, name, ErrUnknownFormat)
		}
	}
	rep, err := f.Parse(br, source, lim.withDefaults())
	if err != nil {
		return nil, err
	}
	if rep == nil {
		return nil, fmt.Errorf("verify: %s: the %s parser returned no report", source, f.Name)
	}
	rep.Format = f.Name // evidence names the format it was read as
	return rep, nil
}

// ParseFile opens and parses one report file.
func (fs *Formats) ParseFile(path string, name workitems.ReportFormat, lim Limits) (*Report, error) {
	fh, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("verify: report: %w", err)
	}
	defer fh.Close()
	return fs.Parse(fh, path, name, lim)
}

// titles says what auto expects: "go test -json, JUnit XML, TAP or jest/vitest JSON".
func (fs *Formats) titles() string {
	var t []string
	for _, f := range fs.list {
		if f.Detect == nil {
			continue
		}
		if f.Title != "" {
			t = append(t, f.Title)
		} else {
			t = append(t, string(f.Name))
		}
	}
	if len(t) < 2 {
		return strings.Join(t, "")
	}
	return strings.Join(t[:len(t)-1], ", ") + " or " + t[len(t)-1]
}

// ParseReport reads a report in one of the built-in formats (auto: detected from content).
func ParseReport(r io.Reader, source string, format workitems.ReportFormat, lim Limits) (*Report, error) {
	return BuiltinFormats().Parse(r, source, format, lim)
}

// ParseFile opens and parses one report file in one of the built-in formats.
func ParseFile(path string, format workitems.ReportFormat, lim Limits) (*Report, error) {
	return BuiltinFormats().ParseFile(path, format, lim)
}
