package wsapi

import (
	"strings"
	"testing"
)

// TestCloseReasonsFollowTheReconnectRecipe: a resync close tells the
// client what to do next, and that must be the published recipe
// (llms-full.txt, asyncapi.json): subscribe and wait for the
// acknowledgement, then take the REST snapshot. A reason or a close-code
// description that says "snapshot, then resubscribe" sends clients back to
// the recipe that misses the events applied in between. Each reason also
// fits a close frame (123 bytes after the code).
func TestCloseReasonsFollowTheReconnectRecipe(t *testing.T) {
	doc := newEnv(t).asyncAPI().doc
	cc := doc["x-svc-close-codes"].([]any)[0].(map[string]any)
	texts := []string{cc["description"].(string)}
	for _, r := range []string{ReasonSlowConsumer, ReasonEventsLost, ReasonStreamEnded} {
		if len(r) > 123 {
			t.Errorf("reason longer than a close frame allows (%d bytes): %q", len(r), r)
		}
		texts = append(texts, r)
	}
	for _, r := range texts {
		snap, sub := strings.Index(r, "snapshot"), strings.Index(r, "subscribe")
		if snap < 0 || sub < 0 || snap < sub {
			t.Errorf("does not give the recipe's order (subscribe, then snapshot): %q", r)
		}
	}
}
