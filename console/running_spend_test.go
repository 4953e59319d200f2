package console_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"outerloop/workitems"
	"outerloop/workitems/itemstore"
)

// The item page of a running item shows the wall time its attempt has been charged so far, not
// 0 s until the attempt exits.
func TestARunningItemsPageShowsItsWallTimeSoFar(t *testing.T) {
	t.Parallel()
	f := newFixture(t, "tok")
	ctx := context.Background()
	f.item(t, "fix@run", "fix", "run long", nil)
	st := f.app.Store
	fence, err := st.AcquireLease(ctx, "fix@run", 1, "w", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := st.StartAttempt(ctx, fence, "w"); err != nil {
		t.Fatal(err)
	}
	if _, err := st.ChargeRunning(ctx, fence, itemstore.Charge{Template: "fix", Spend: workitems.Spend{WallTime: workitems.Duration(42 * time.Second)}}); err != nil {
		t.Fatal(err)
	}
	_, body := f.get(t, "/items/fix@run")
	i := strings.Index(body, "<code>wall_time</code>")
	if i < 0 || !strings.Contains(body[i:min(len(body), i+200)], "42") {
		t.Fatalf("the running item's page does not show 42 s of wall time:\n%s", body[max(0, i):min(len(body), max(0, i)+300)])
	}
}
