package verify

import (
	"bytes"
	"fmt"
	"sync"
	"testing"
)

// benchJUnit builds a JUnit document of about size bytes in the shape of a large C++ or PHP run:
// nested suites with declared totals, passing cases, failures with text, skips, output.
func benchJUnit(size int) []byte {
	var b bytes.Buffer
	b.WriteString(`<?xml version="1.0" encoding="UTF-8"?>` + "\n" + `<testsuites name="AllTests">` + "\n")
	for s := 0; b.Len() < size; s++ {
		fmt.Fprintf(&b, `  <testsuite name="Suite%04d" tests="40" failures="1" skipped="2" errors="0" time="0.4">`+"\n", s)
		for i := 0; i < 40; i++ {
			fmt.Fprintf(&b, `    <testcase name="Case%02d" classname="pkg.module%04d.Suite" file="src/module%04d_test.cc" line="%d" time="0.01"`, i, s, s, 10*i)
			switch {
			case i == 7:
				b.WriteString(">\n      <failure message=\"expected 4, got 3\" type=\"assert\"><![CDATA[src/module_test.cc:70\nExpected equality of these values:\n  4\n  7 / 2\n    Which is: 3]]></failure>\n    </testcase>\n")
			case i == 11 || i == 23:
				b.WriteString(">\n      <skipped message=\"needs a GPU\"/>\n    </testcase>\n")
			case i%10 == 3:
				b.WriteString(">\n      <system-out><![CDATA[connecting to fixture server\nfixture ready in 3ms\n]]></system-out>\n    </testcase>\n")
			default:
				b.WriteString("/>\n")
			}
		}
		b.WriteString("  </testsuite>\n")
	}
	b.WriteString("</testsuites>\n")
	return b.Bytes()
}

var benchJUnitData = sync.OnceValue(func() []byte { return benchJUnit(4 << 20) })

// BenchmarkParseJUnit measures the JUnit reader on a 4 MiB report held in memory.
// Run: go test -run XXX -bench ParseJUnit -benchmem ./verify
func BenchmarkParseJUnit(b *testing.B) {
	data := benchJUnitData()
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		r, err := ParseJUnit(bytes.NewReader(data), "bench", Limits{})
		if err != nil || r.Observed.Total == 0 || r.Observed.Failed == 0 {
			b.Fatal(err, r.Observed)
		}
	}
}
