package console

import (
	"context"
	"errors"
	"net/url"
	"strconv"
	"strings"

	"outerloop/workitems"
	"outerloop/workitems/itemstore"
)

// maxDiffLines bounds the diff drawn on an item page; the whole stored patch is one click away
// (GET /api/items/{id}/diff).
const maxDiffLines = 5000

// deliveryView is the item's latest delivery with its patch, ready to draw.
type deliveryView struct {
	*workitems.Delivery
	Lines      []diffLine
	Cut        int    // lines of the patch not drawn (over maxDiffLines)
	Raw        string // the patch as text/x-diff
	NoPatch    bool   // a commit was made but no patch is stored
	OutcomeCSS string
}

// diffLine is one line of a unified diff with the class it is drawn with.
type diffLine struct {
	Class string // dl-file, dl-meta, dl-hunk, dl-add, dl-del, dl-ctx, dl-note
	Text  string
}

// loadDelivery reads the item's latest delivery and its patch (nil: no delivery).
func (c *Console) loadDelivery(ctx context.Context, it *workitems.Item) (*deliveryView, error) {
	if it.Delivery == nil {
		return nil, nil
	}
	v := &deliveryView{Delivery: it.Delivery, OutcomeCSS: deliveryClass(it.Delivery.Outcome),
		Raw: "/api/items/" + url.PathEscape(it.ID) + "/diff?attempt=" + strconv.Itoa(it.Delivery.Attempt)}
	if it.Delivery.Commit == "" {
		return v, nil
	}
	patch, err := c.store.Patch(ctx, it.ID, it.Delivery.Attempt)
	if errors.Is(err, itemstore.ErrNoPatch) {
		v.NoPatch = true
		return v, nil
	}
	if err != nil {
		return nil, err
	}
	v.Lines, v.Cut = diffLines(string(patch), maxDiffLines)
	return v, nil
}

// diffLines classifies a unified diff line by line, at most limit lines (cut says how many more
// there were). A file's header runs from "diff --git" to its first hunk, so a removed line that
// reads "--- x" inside a hunk is a deletion, not a header. Invalid UTF-8 is replaced.
func diffLines(patch string, limit int) (lines []diffLine, cut int) {
	patch = strings.ToValidUTF8(strings.TrimSuffix(patch, "\n"), "\uFFFD")
	if patch == "" {
		return nil, 0
	}
	all := strings.Split(patch, "\n")
	if len(all) > limit {
		cut, all = len(all)-limit, all[:limit]
	}
	header := false
	for _, l := range all {
		class := "dl-ctx"
		switch {
		case strings.HasPrefix(l, "diff --git "):
			class, header = "dl-file", true
		case strings.HasPrefix(l, "# outerloop: "):
			class = "dl-note"
		case strings.HasPrefix(l, "@@"):
			class, header = "dl-hunk", false
		case header:
			class = "dl-meta"
		case strings.HasPrefix(l, "+"):
			class = "dl-add"
		case strings.HasPrefix(l, "-"):
			class = "dl-del"
		case strings.HasPrefix(l, `\`): // "\ No newline at end of file"
			class = "dl-meta"
		}
		lines = append(lines, diffLine{Class: class, Text: l})
	}
	return lines, cut
}

// deliveryClass is the CSS class of a delivery outcome's badge.
func deliveryClass(o workitems.DeliveryOutcome) string {
	switch o {
	case workitems.DeliveryPatched, workitems.DeliveryPushed, workitems.DeliveryPROpened, workitems.DeliveryPRUpdated, workitems.DeliveryMerged:
		return "st-good"
	case workitems.DeliveryFailed:
		return "st-bad"
	case workitems.DeliveryDeclined, workitems.DeliveryHeld:
		return "st-wait"
	}
	return "st-muted"
}

// checkClass is the CSS class of a CI check's state.
func checkClass(s workitems.CheckState) string {
	switch s {
	case workitems.CheckSuccess, workitems.CheckNeutral:
		return "st-good"
	case workitems.CheckFailure, workitems.CheckInfraError, workitems.CheckCancelled, workitems.CheckActionRequired:
		return "st-bad"
	case workitems.CheckPending:
		return "st-busy"
	}
	return "st-muted"
}
