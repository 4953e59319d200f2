package console_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"outerloop/api"
	"outerloop/console"
	"outerloop/scheduler/fleetview/viewtest"
	"outerloop/workitems/config"
)

// newFleetFixture serves the console over viewtest's fleet, its items made through the app's
// queue (whose gate records each repository's newest item).
func newFleetFixture(t *testing.T) (*fixture, map[string]string) {
	t.Helper()
	cfg, err := config.ParseConfig([]byte(viewtest.YAML))
	if err != nil {
		t.Fatal(err)
	}
	a := openApp(t, cfg)
	f := &fixture{app: a, auth: api.NewAuth(testToken), mux: http.NewServeMux(), next: time.Now().Add(3 * time.Hour)}
	f.console = console.New(console.Options{Queue: a.Queue, Fleet: a.Fleet, Auth: f.auth, Logger: testLogger(), PageSize: 2,
		NextRun: func(string) (time.Time, bool) { return f.next, true }})
	f.console.Register(f.mux)
	return f, viewtest.Seed(t, a.Queue)
}

func TestFleetPageShowsRepositoriesPaged(t *testing.T) {
	t.Parallel()
	f, ids := newFleetFixture(t)
	res, body := f.get(t, "/templates/sweep/fleet")
	if res.StatusCode != http.StatusOK {
		t.Fatalf("status %d: %s", res.StatusCode, body)
	}
	for _, w := range []string{`id="fleet"`, "3 repositories", `href="https://gitea.example.com/acme/a"`, "acme/a", "acme/b",
		`href="/items/` + ids[viewtest.Repos[0]] + `"`, `href="https://gitea.example.com/acme/a/pulls/7"`, "#7", `data-ci="failure"`,
		"failure 1/2", "$1.25", "next run 20", `id="usage"`} {
		if !strings.Contains(body, w) {
			t.Errorf("fleet page lacks %q", w)
		}
	}
	if ia, ib := strings.Index(body, "acme/a"), strings.Index(body, "acme/b"); ia > ib {
		t.Error("the repositories are not sorted")
	}
	if strings.Contains(body, "acme/c") || !strings.Contains(body, `href="/templates/sweep/fleet?page=2"`) {
		t.Error("the first page of 2 shows the third repository, or no next page")
	}
	if _, body := f.get(t, "/templates/sweep/fleet?page=2"); !strings.Contains(body, "acme/c") || strings.Contains(body, "acme/b") ||
		!strings.Contains(body, `rel="prev"`) || strings.Contains(body, `rel="next"`) {
		t.Error("the second page is not the third repository alone")
	}
	if _, body := f.get(t, "/templates/sweep"); !strings.Contains(body, `href="/templates/sweep/fleet"`) {
		t.Error("the template page does not link its fleet page")
	}
	if _, body := f.get(t, "/templates/single"); strings.Contains(body, "/fleet") {
		t.Error("a single-repository template's page links a fleet page")
	}
	if res, body := f.get(t, "/templates/single/fleet"); res.StatusCode != http.StatusBadRequest || !strings.Contains(body, "one repository") {
		t.Errorf("single-repository fleet page: %d", res.StatusCode)
	}
	if res, _ := f.get(t, "/templates/nope/fleet"); res.StatusCode != http.StatusNotFound {
		t.Errorf("unknown template's fleet page: %d", res.StatusCode)
	}
	if res, _ := f.get(t, "/templates/sweep/fleet?page=0"); res.StatusCode != http.StatusBadRequest {
		t.Errorf("page 0: %d", res.StatusCode)
	}
}
