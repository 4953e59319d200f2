package verify

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

// Fuzz targets: every parser must survive any input without panicking, keep within its limits,
// and produce self-consistent counts. Seeds are the fixture corpus; `go test` runs the seeds,
// `go test -fuzz FuzzGoJSON ./verify` explores.

var fuzzLimits = Limits{OutputTail: 256, MaxTests: 50, MaxLine: 4096, MaxWarn: 5}

func seed(f *testing.F, globs ...string) {
	f.Helper()
	for _, g := range globs {
		files, err := filepath.Glob(filepath.Join("testdata", g))
		if err != nil {
			f.Fatal(err)
		}
		for _, p := range files {
			b, err := os.ReadFile(p)
			if err != nil {
				f.Fatal(err)
			}
			f.Add(b)
		}
	}
}

func checkReport(t *testing.T, r *Report, err error) {
	t.Helper()
	if err != nil {
		t.Fatalf("a parser error on in-memory input: %v", err)
	}
	o := r.Observed
	if o.Total != o.Passed+o.Failed+o.Errored+o.Skipped+o.Timeout+o.Incomplete {
		t.Fatalf("observed counts do not add up: %+v", o)
	}
	if len(r.Tests) > fuzzLimits.MaxTests {
		t.Fatalf("%d tests kept, limit %d", len(r.Tests), fuzzLimits.MaxTests)
	}
	if len(r.Warnings) > fuzzLimits.MaxWarn+1 {
		t.Fatalf("%d warnings", len(r.Warnings))
	}
	for _, tc := range r.Tests {
		for _, run := range tc.Runs {
			if len(run.Output) > fuzzLimits.OutputTail+64 {
				t.Fatalf("output of %s is %d bytes", tc.ID, len(run.Output))
			}
		}
	}
	if r.Green() && (o.Total == 0 || o.Bad() > 0 || !r.Complete) {
		t.Fatalf("green without evidence: %+v", r)
	}
}

func FuzzGoJSON(f *testing.F) {
	seed(f, "gojson/*.json")
	f.Add([]byte(`{"Action":"run","Package":"p","Test":"T\u00e9\ud83d\ude00"}` + "\n" + `{"Action":"fail","Package":"p"}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := ParseGoJSON(bytes.NewReader(b), "fuzz", fuzzLimits)
		checkReport(t, r, err)
	})
}

func FuzzJUnit(f *testing.F) {
	seed(f, "junit/*")
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := ParseJUnit(bytes.NewReader(b), "fuzz", fuzzLimits)
		checkReport(t, r, err)
	})
}

func FuzzTAP(f *testing.F) {
	seed(f, "tap/*.tap", "console/prove-v*.txt")
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := ParseTAP(bytes.NewReader(b), "fuzz", fuzzLimits)
		checkReport(t, r, err)
	})
}

func FuzzDetect(f *testing.F) {
	seed(f, "gojson/*.json", "junit/*", "tap/*.tap", "console/prove-v*.txt")
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := ParseReport(bytes.NewReader(b), "fuzz", FormatAuto, fuzzLimits)
		if err != nil {
			return // not a report: fine
		}
		checkReport(t, r, nil)
	})
}

func FuzzJSONScanner(f *testing.F) {
	f.Add([]byte(`{"Action":"output","Output":"a\"b\\c\u0041\n"}`))
	f.Add([]byte(`{"Elapsed":1e3,"x":[1,{"y":null}],"Action":"pass"}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		var s jsonScanner
		var ev rawEvent
		_ = s.decode(b, &ev)
	})
}

func FuzzJestJSON(f *testing.F) {
	seed(f, "jestjson/*.json")
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := ParseJestJSON(bytes.NewReader(b), "fuzz", fuzzLimits)
		checkReport(t, r, err)
	})
}
