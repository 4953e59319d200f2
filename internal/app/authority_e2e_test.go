package app_test

import (
	"context"
	"encoding/base64"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"outerloop/workitems"
)

// (g) A marker in a pull request's body is no authority, on the real Gitea through its real
// webhooks. Mallory may write to a second repository the deployment also hears from, but not
// to the item's. She copies the item's pull request body (its marker) into a pull request of
// her own there, comments "/outerloop cancel" on it and closes it — what used to cancel the
// escalated item — and comments the same on the item's own pull request. Nothing changes the
// item; each refusal is in the audit list and on the item.
func TestACopiedMarkerInAnotherRepositoryIsNoAuthorityOverTheItem(t *testing.T) {
	t.Parallel()
	// A review that does not come within 2 s escalates the item (review_missing): an escalated
	// item's pull request closed by a person cancels it, so a close is what an attacker wants.
	h := newHookRig(t, "hookmark", slowPoll, `  - name: rv
    repo: %[1]s
    goal: make TestAdd pass
    loop: {kind: script, commands: [%[3]q]}
    done_check: {commands: ["test -s NOTES.md"]}
    deliver: {forge: tea, repo: %[2]s, review: {required_approvals: 1, wait: 2s}}
`)
	other := forgeRepo(t, h.gs, "hookmark-other", false)
	h.gs.CreateHook(t, other.Slug, h.server.URL+"/hooks/tea", hookSecret, hookEvents)
	mallory := h.gs.NewCollaborator(t, other, "mallory") // write access to other, none to the item's
	h.startWorker(t, "hookmark")
	it := h.submit(t, "rv")
	it = awaitState(t, h.Store, it.ID, workitems.StateEscalated, workitems.StateClosed, workitems.StateFailed)
	if it.State != workitems.StateEscalated || it.Delivery == nil || it.Delivery.PR == nil {
		t.Fatalf("want escalated with its pull request: %s %+v\n%v", it.State, it.Delivery, trail(t, h.sys, it.ID))
	}
	if d := it.Delivery; d.Forge != "tea" || d.Repo != h.repo.Slug {
		t.Fatalf("the delivery must name where it went: %+v", d)
	}
	own := it.Delivery.PR.Number

	// The item's pull request's body, marker included, as anyone who reads it sees it.
	var body struct {
		Body string `json:"body"`
	}
	mallory.API(t, http.MethodGet, fmt.Sprintf("/repos/%s/pulls/%d", h.repo.Slug, own), nil, http.StatusOK, &body)
	if !strings.Contains(body.Body, "<!-- outerloop: item="+it.ID+" ") {
		t.Fatalf("the item's pull request carries no marker: %q", body.Body)
	}
	mallory.API(t, http.MethodPost, "/repos/"+other.Slug+"/contents/COPIED.md", map[string]string{"message": "copied",
		"content": base64.StdEncoding.EncodeToString([]byte("copied\n")), "branch": "main", "new_branch": "copied"}, http.StatusCreated, nil)
	var theirs struct {
		Number int `json:"number"`
	}
	mallory.API(t, http.MethodPost, "/repos/"+other.Slug+"/pulls", map[string]string{"head": "copied", "base": "main",
		"title": "outerloop: rv", "body": body.Body}, http.StatusCreated, &theirs)
	copied := workitems.ForgePR{Forge: "tea", Repo: other.Slug, Number: theirs.Number}

	refused := func(what, action string, why workitems.ForgeRefusal, detail string) {
		t.Helper()
		e := h.audit.next(t)
		if e.OK || e.Actor != "tea:"+mallory.Name || e.Target != it.ID || e.Action != action ||
			!strings.HasPrefix(e.Detail, "refused ("+string(why)+"): ") || !strings.Contains(e.Detail, detail) {
			t.Fatalf("%s must be refused (%s) and audited: %+v", what, why, e)
		}
	}
	comment := func(repo string, number int) {
		mallory.API(t, http.MethodPost, fmt.Sprintf("/repos/%s/issues/%d/comments", repo, number),
			map[string]string{"body": "/outerloop cancel"}, http.StatusCreated, nil)
	}
	comment(other.Slug, theirs.Number)
	refused("a cancel on the copied pull request", "outerloop cancel", workitems.RefusedNotDelivered,
		copied.String()+" is not a pull request of item "+it.ID)
	mallory.API(t, http.MethodPatch, fmt.Sprintf("/repos/%s/pulls/%d", other.Slug, theirs.Number), map[string]string{"state": "closed"},
		http.StatusCreated, nil)
	refused("closing the copied pull request", "pull request closed", workitems.RefusedNotDelivered,
		copied.String()+" is not a pull request of item "+it.ID)
	comment(h.repo.Slug, own)
	refused("a cancel on the item's pull request by a user who may not write to it", "outerloop cancel", workitems.RefusedPermission,
		mallory.Name+" has ")

	now, err := h.Store.Get(context.Background(), it.ID)
	if err != nil {
		t.Fatal(err)
	}
	if now.State != workitems.StateEscalated || now.CancelReq || len(now.Resolution) != len(it.Resolution) || len(now.Attempts) != len(it.Attempts) {
		t.Fatalf("refused events changed the item: %s, cancel requested %v, %d resolutions (was %d), %d attempts (was %d)",
			now.State, now.CancelReq, len(now.Resolution), len(it.Resolution), len(now.Attempts), len(it.Attempts))
	}
	evs := events(t, h.sys, it.ID, workitems.EventForgeRefused)
	ownPR := workitems.ForgePR{Forge: "tea", Repo: h.repo.Slug, Number: own}
	want := []string{copied.String() + " " + string(workitems.RefusedNotDelivered), copied.String() + " " + string(workitems.RefusedNotDelivered),
		ownPR.String() + " " + string(workitems.RefusedPermission)}
	var got []string
	for _, e := range evs {
		if e.Actor != "tea:"+mallory.Name {
			t.Fatalf("refusal event by %q: %+v", e.Actor, e)
		}
		got = append(got, e.Data["pr"]+" "+e.Data["refused"])
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("forge_refused events:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	h.audit.mu.Lock()
	n := len(h.audit.entries)
	h.audit.mu.Unlock()
	if n != 3 {
		t.Fatalf("%d audit entries, want the three refusals", n)
	}
}
