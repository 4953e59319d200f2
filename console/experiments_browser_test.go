package console_test

import (
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"outerloop/api"
)

// TestInABrowserTheExperimentPageDrawsItsChart opens the experiments list in headless
// chromium, follows the link to an experiment and checks that the chart is laid out and
// visible (a box with a size, one drawn interval per variant, the bars taller for the variant
// that closed more) with the CSP the console serves: the chart needs no script.
func TestInABrowserTheExperimentPageDrawsItsChart(t *testing.T) {
	ctx := browser(t)
	f := newExpFixture(t)
	f.experiment(t, "x-browser", 10, time.Now().UTC().Add(-time.Hour), tenTaskRuns())
	srv := httptest.NewServer(api.Protect(f.mux, api.ProtectOptions{Auth: f.auth, Logger: testLogger()}))
	t.Cleanup(func() { f.console.Close(); srv.Close() })

	run(t, ctx, "open the experiment from the list",
		chromedp.Navigate(srv.URL+"/experiments"),
		chromedp.WaitVisible(chromedp.CSS(`tr[data-experiment="x-browser"] a`)),
		chromedp.Click(chromedp.CSS(`tr[data-experiment="x-browser"] a`)),
		chromedp.WaitVisible(chromedp.CSS(`#chart svg`)),
	)
	size := value(t, ctx, "measure the chart", chromedp.Evaluate[[]float64](
		`(() => { const r = document.querySelector('#chart svg').getBoundingClientRect(); return [r.width, r.height]; })()`))
	if len(size) != 2 || size[0] < 300 || size[1] < 150 {
		t.Errorf("chart box %v, want a visible chart", size)
	}
	// Heights as laid out on screen, in the order A, B: A closed 8 of 10, B 3.
	bars := value(t, ctx, "measure the close-rate bars", chromedp.Evaluate[[]float64](
		`[...document.querySelectorAll('#panel-close-rate rect.bar')].map(r => r.getBoundingClientRect().height)`))
	if len(bars) != 2 || bars[0] <= bars[1] || bars[1] <= 0 {
		t.Errorf("close-rate bar heights %v, want A's taller than B's, both drawn", bars)
	}
	cis := value(t, ctx, "measure the intervals", chromedp.Evaluate[[]float64](
		`[...document.querySelectorAll('#panel-close-rate line.ci')].map(l => l.getBoundingClientRect().height)`))
	if len(cis) != 2 || cis[0] <= 0 || cis[1] <= 0 {
		t.Errorf("interval heights %v, want one drawn per variant", cis)
	}
	stroke := value(t, ctx, "read the interval's stroke", chromedp.Evaluate[string](
		`getComputedStyle(document.querySelector('#panel-close-rate line.ci')).stroke`))
	if stroke == "" || stroke == "none" {
		t.Errorf("intervals have no stroke (%q): the stylesheet did not apply", stroke)
	}
	if title := value(t, ctx, "read the page title", chromedp.Title()); !strings.Contains(title, "x-browser") {
		t.Errorf("title %q", title)
	}
	png := value(t, ctx, "screenshot", chromedp.FullScreenshot(100))
	p := filepath.Join(artifactDir(t), "console-experiment.png")
	if err := os.WriteFile(p, png, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot %s", p)
}
