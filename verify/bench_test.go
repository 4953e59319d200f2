package verify

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"strconv"
	"sync"
	"testing"
	"time"

	"gotest.tools/gotestsum/testjson"
)

// benchStream builds a go test -json stream of about size bytes in the shape real runs have:
// many packages, tests with subtests, log output, parallel pause/cont, some failures.
func benchStream(size int) []byte {
	var b bytes.Buffer
	ts := time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)
	for p := 0; b.Len() < size; p++ {
		benchPackage(&b, p, &ts)
	}
	return b.Bytes()
}

// streamReader generates packages on demand: a stream of any size in constant memory.
type streamReader struct {
	left int64
	p    int
	ts   time.Time
	buf  bytes.Buffer
}

func newStreamReader(size int64) *streamReader {
	return &streamReader{left: size, ts: time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)}
}

func (s *streamReader) Read(p []byte) (int, error) {
	if s.buf.Len() == 0 {
		if s.left <= 0 {
			return 0, io.EOF
		}
		benchPackage(&s.buf, s.p, &s.ts)
		s.p++
		s.left -= int64(s.buf.Len())
	}
	return s.buf.Read(p)
}

func benchPackage(b *bytes.Buffer, p int, tsp *time.Time) {
	ts := *tsp
	defer func() { *tsp = ts }()
	ev := func(action, pkg, test, output string, elapsed float64) {
		ts = ts.Add(137 * time.Microsecond)
		fmt.Fprintf(b, `{"Time":"%s","Action":"%s","Package":"%s"`, ts.Format(time.RFC3339Nano), action, pkg)
		if test != "" {
			fmt.Fprintf(b, `,"Test":"%s"`, test)
		}
		if output != "" {
			fmt.Fprintf(b, `,"Output":%q`, output)
		}
		if action == "pass" || action == "fail" || action == "skip" {
			fmt.Fprintf(b, `,"Elapsed":%g`, elapsed)
		}
		b.WriteString("}\n")
	}
	{
		pkg := fmt.Sprintf("example.com/service/internal/pkg%03d", p)
		ev("start", pkg, "", "", 0)
		for i := 0; i < 40; i++ {
			test := fmt.Sprintf("TestHandler%02d", i)
			ev("run", pkg, test, "", 0)
			ev("output", pkg, test, "=== RUN   "+test+"\n", 0)
			if i%5 == 0 {
				ev("output", pkg, test, "=== PAUSE "+test+"\n", 0)
				ev("pause", pkg, test, "", 0)
				ev("cont", pkg, test, "", 0)
				ev("output", pkg, test, "=== CONT  "+test+"\n", 0)
			}
			for s := 0; s < 3; s++ {
				sub := fmt.Sprintf("%s/case_%d", test, s)
				ev("run", pkg, sub, "", 0)
				ev("output", pkg, sub, "=== RUN   "+sub+"\n", 0)
				ev("output", pkg, sub, fmt.Sprintf("    handler_test.go:%d: request took \"%dms\" with body {\"id\": %d}\n", 40+s, s*7, i), 0)
				ev("output", pkg, sub, "    --- PASS: "+sub+" (0.00s)\n", 0)
				ev("pass", pkg, sub, "", 0.001)
			}
			if i == 17 && p%3 == 0 {
				ev("output", pkg, test, "    handler_test.go:99: got 500, want 200\n", 0)
				ev("output", pkg, test, "--- FAIL: "+test+" (0.01s)\n", 0)
				ev("fail", pkg, test, "", 0.01)
				continue
			}
			ev("output", pkg, test, "--- PASS: "+test+" (0.00s)\n", 0)
			ev("pass", pkg, test, "", 0.004)
		}
		ev("output", pkg, "", "PASS\n", 0)
		ev("output", pkg, "", "ok  \t"+pkg+"\t0.123s\n", 0)
		ev("pass", pkg, "", "", 0.123)
	}
}

var benchData = sync.OnceValue(func() []byte { return benchStream(32 << 20) })

// peakLive runs fn once with the garbage collector at 5% (so the heap tracks live data) and
// returns the highest heap size above the starting level, sampled every millisecond, in MB.
func peakLive(fn func()) float64 {
	old := debug.SetGCPercent(5)
	defer debug.SetGCPercent(old)
	runtime.GC()
	sample := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	read := func() uint64 { metrics.Read(sample); return sample[0].Value.Uint64() }
	base := read()
	var peak uint64
	done, stopped := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(stopped)
		t := time.NewTicker(time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				peak = max(peak, read())
			}
		}
	}()
	fn()
	close(done)
	<-stopped
	if peak < base {
		return 0
	}
	return float64(peak-base) / (1 << 20)
}

// BenchmarkParseGoJSON compares our parser with gotestsum's testjson package on the same stream.
// Run: go test -run XXX -bench ParseGoJSON -benchmem ./verify
func BenchmarkParseGoJSON(b *testing.B) {
	data := benchData()
	b.Run("ours", func(b *testing.B) {
		b.SetBytes(int64(len(data)))
		b.ReportAllocs()
		for b.Loop() {
			r, err := ParseGoJSON(bytes.NewReader(data), "bench", Limits{})
			if err != nil || r.Observed.Total == 0 {
				b.Fatal(err, r.Observed)
			}
		}
	})
	b.Run("gotestsum-testjson", func(b *testing.B) {
		b.SetBytes(int64(len(data)))
		b.ReportAllocs()
		for b.Loop() {
			exec, err := testjson.ScanTestOutput(testjson.ScanConfig{Stdout: bytes.NewReader(data)})
			if err != nil || exec.Total() == 0 {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkPeakMemoryGoJSON streams a generated report (256 MiB by default, never held in
// memory; VERIFY_BENCH_STREAM_MB sets another size) through each parser once per iteration and
// reports the peak live heap. Run:
// go test -run XXX -bench PeakMemory -benchtime 1x ./verify
func BenchmarkPeakMemoryGoJSON(b *testing.B) {
	size := int64(256 << 20)
	if mb, err := strconv.Atoi(os.Getenv("VERIFY_BENCH_STREAM_MB")); err == nil && mb > 0 {
		size = int64(mb) << 20
	}
	b.Run("ours", func(b *testing.B) {
		b.SetBytes(size)
		var peak float64
		for b.Loop() {
			peak = max(peak, peakLive(func() {
				if _, err := ParseGoJSON(newStreamReader(size), "bench", Limits{}); err != nil {
					b.Fatal(err)
				}
			}))
		}
		b.ReportMetric(peak, "peak-live-MB")
	})
	b.Run("gotestsum-testjson", func(b *testing.B) {
		b.SetBytes(size)
		var peak float64
		for b.Loop() {
			peak = max(peak, peakLive(func() {
				if _, err := testjson.ScanTestOutput(testjson.ScanConfig{Stdout: newStreamReader(size)}); err != nil {
					b.Fatal(err)
				}
			}))
		}
		b.ReportMetric(peak, "peak-live-MB")
	})
}

func TestBenchStreamParses(t *testing.T) {
	t.Parallel()
	data := benchStream(1 << 20)
	r, err := ParseGoJSON(bytes.NewReader(data), "bench", Limits{})
	if err != nil {
		t.Fatal(err)
	}
	exec, err := testjson.ScanTestOutput(testjson.ScanConfig{Stdout: bytes.NewReader(data)})
	if err != nil {
		t.Fatal(err)
	}
	if !r.Complete || r.Observed.Total != exec.Total() || r.Observed.Failed != len(exec.Failed()) {
		t.Fatalf("ours %+v, gotestsum total %d failed %d", r.Observed, exec.Total(), len(exec.Failed()))
	}
}
