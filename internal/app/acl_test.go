package app_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"outerloop/internal/app"
	"outerloop/internal/sample"
	"outerloop/lib/redistest"
	"outerloop/workitems"
)

// TestShippedRedisACLRunsAnItemAndRefusesEverythingElse starts a real redis-server with
// deploy/redis-acl.conf, runs an item to closed as the ACL's user (redis://user:pass@), and
// checks that the user cannot touch other keys or run dangerous commands, and that the
// default user is off: a sandboxed command with the host's network cannot write the store
// without the password.
func TestShippedRedisACLRunsAnItemAndRefusesEverythingElse(t *testing.T) {
	t.Parallel()
	acl, err := os.ReadFile("../../deploy/redis-acl.conf")
	if err != nil {
		t.Fatal(err)
	}
	const pass = "test-acl-password"
	path := filepath.Join(t.TempDir(), "users.acl")
	if err := os.WriteFile(path, []byte(strings.ReplaceAll(string(acl), ">CHANGE-ME", ">"+pass)), 0o600); err != nil {
		t.Fatal(err)
	}
	srv := redistest.Start(t, "--aclfile", path)
	url := fmt.Sprintf("redis://outerloop:%s@%s/0", pass, srv.Addr)

	repo := sampleRepo(t)
	cfg, err := parseConfig([]byte(fmt.Sprintf(`
defaults: {budget: {wall_time: 2m, verify_reserve: 1m}}
templates:
  - name: fix
    repo: %s
    goal: make TestAdd pass
    loop: {kind: script, commands: [%q]}
    done_check: {commands: ["go test -json ./..."]}
`, repo, sample.FixCommand)))
	if err != nil {
		t.Fatal(err)
	}
	a, err := app.Open(context.Background(), app.Options{Config: cfg, RedisURL: url, Workdir: t.TempDir(), Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(a.Close)
	startAppWorker(t, a, 1, "acl-worker")
	if got := submitAndAwait(t, a, "fix", workitems.StateClosed, workitems.StateEscalated, workitems.StateFailed); got.State != workitems.StateClosed {
		t.Fatalf("item %s under the ACL: %+v", got.State, got.Decisions)
	}

	ctx := context.Background()
	user := redis.NewClient(&redis.Options{Addr: srv.Addr, Username: "outerloop", Password: pass})
	defer user.Close()
	for name, err := range map[string]error{
		"SET outside the prefixes": user.Set(ctx, "other:key", "x", 0).Err(),
		"FLUSHALL":                 user.FlushAll(ctx).Err(),
		"KEYS":                     user.Keys(ctx, "*").Err(),
		"CONFIG SET":               user.ConfigSet(ctx, "appendonly", "no").Err(),
		"a script writing outside": user.Eval(ctx, "return redis.call('set', KEYS[1], 1)", []string{"other:key"}).Err(),
	} {
		if err == nil || !strings.Contains(err.Error(), "NOPERM") && !strings.Contains(err.Error(), "no permissions") && !strings.Contains(err.Error(), "can't access") {
			t.Errorf("%s as the outerloop user: %v, want refused", name, err)
		}
	}
	anon := redis.NewClient(&redis.Options{Addr: srv.Addr})
	defer anon.Close()
	if err := anon.Set(ctx, "ol:x", "1", 0).Err(); err == nil || !strings.Contains(err.Error(), "NOAUTH") {
		t.Errorf("write without the password: %v, want NOAUTH", err)
	}
}
