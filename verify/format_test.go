package verify

import (
	"errors"
	"io"
	"slices"
	"strings"
	"testing"

	"outerloop/workitems"
)

// detectFormat is the built-in registry's detection by name ("" when no format claims head).
func detectFormat(head []byte, _ string) workitems.ReportFormat {
	f, _ := BuiltinFormats().Detect(head)
	return f.Name
}

func TestBuiltinFormatsAreTheVocabularyTheConfigAccepts(t *testing.T) {
	t.Parallel()
	want := slices.DeleteFunc(workitems.AllReportFormats(), func(f workitems.ReportFormat) bool { return f == FormatAuto })
	if got := BuiltinFormats().Names(); !slices.Equal(got, want) {
		t.Fatalf("BuiltinFormats names %v, want workitems.AllReportFormats without auto, in order: %v", got, want)
	}
	if _, err := NewFormats(BuiltinFormats().list...); err != nil {
		t.Fatalf("the built-in formats do not register: %v", err)
	}
	for _, f := range BuiltinFormats().list {
		if f.Title == "" || f.Detect == nil {
			t.Errorf("format %s: a built-in format has a title and a detector", f.Name)
		}
	}
}

func TestNewFormatsRefusesWhatCannotBeRead(t *testing.T) {
	t.Parallel()
	parse := func(io.Reader, string, Limits) (*Report, error) { return nil, nil }
	cases := []struct {
		name string
		f    Format
		want string
	}{
		{"a format without a name is refused", Format{Parse: parse}, "a name of its own"},
		{"a format named auto is refused", Format{Name: FormatAuto, Parse: parse}, "a name of its own"},
		{"a name already registered is refused", Format{Name: FormatTAP, Parse: parse}, "registered twice"},
		{"a format without a parser is refused", Format{Name: "checklist"}, "no parser"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			_, err := BuiltinFormats().With(c.f)
			if !errors.Is(err, ErrBadFormat) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("err = %v, want ErrBadFormat saying %q", err, c.want)
			}
		})
	}
}

func TestDetectionAsksTheRegisteredFormatsInOrder(t *testing.T) {
	t.Parallel()
	parse := func(io.Reader, string, Limits) (*Report, error) { return nil, nil }
	always := func(d Detection) func([]byte) Detection { return func([]byte) Detection { return d } }
	t.Run("a format that opens the head wins over an earlier one found inside it", func(t *testing.T) {
		t.Parallel()
		fs, err := NewFormats(Format{Name: "a", Detect: always(DetectInside), Parse: parse},
			Format{Name: "b", Detect: always(DetectOpens), Parse: parse})
		if err != nil {
			t.Fatal(err)
		}
		if f, ok := fs.Detect([]byte("x")); !ok || f.Name != "b" {
			t.Fatalf("detected %q %v, want b", f.Name, ok)
		}
	})
	t.Run("among formats found the same way the first registered wins", func(t *testing.T) {
		t.Parallel()
		fs, err := NewFormats(Format{Name: "a", Detect: always(DetectInside), Parse: parse},
			Format{Name: "b", Detect: always(DetectInside), Parse: parse}, Format{Name: "c", Parse: parse})
		if err != nil {
			t.Fatal(err)
		}
		if f, ok := fs.Detect([]byte("x")); !ok || f.Name != "a" {
			t.Fatalf("detected %q %v, want a", f.Name, ok)
		}
	})
	t.Run("a format added after the built-ins never takes their reports", func(t *testing.T) {
		t.Parallel()
		fs, err := BuiltinFormats().With(Format{Name: "greedy", Detect: always(DetectOpens), Parse: parse})
		if err != nil {
			t.Fatal(err)
		}
		if f, _ := fs.Detect([]byte("TAP version 14\n1..1\nok 1\n")); f.Name != FormatTAP {
			t.Fatalf("detected %q, want tap", f.Name)
		}
		if f, _ := fs.Detect([]byte("plain text\n")); f.Name != "greedy" {
			t.Fatalf("detected %q, want greedy for what no built-in claims", f.Name)
		}
	})
	t.Run("an unknown report lists what auto expected, by title", func(t *testing.T) {
		t.Parallel()
		_, err := ParseReport(strings.NewReader("hello\n"), "x.txt", FormatAuto, Limits{})
		if !errors.Is(err, ErrUnknownFormat) || !strings.Contains(err.Error(), "(expected go test -json, JUnit XML, TAP or jest/vitest JSON)") {
			t.Fatalf("err = %v", err)
		}
	})
	t.Run("a named format the registry lacks is unknown", func(t *testing.T) {
		t.Parallel()
		_, err := ParseReport(strings.NewReader("ok 1\n"), "x.tap", "checklist", Limits{})
		if !errors.Is(err, ErrUnknownFormat) {
			t.Fatalf("err = %v", err)
		}
	})
}
