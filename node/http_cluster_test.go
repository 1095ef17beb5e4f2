package node_test

import (
	"encoding/json"
	"io"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/perpd/perpd/cluster/clustertest"
	"github.com/perpd/perpd/fsm"
	"github.com/perpd/perpd/fsm/market"
	"github.com/perpd/perpd/node"
)

type answer struct {
	status int
	header http.Header
	body   []byte
	took   time.Duration
}

func get(t testing.TB, url string, header map[string]string) answer {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	client := &http.Client{Timeout: node.MaxReadWait + 10*time.Second}
	start := time.Now()
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return answer{status: resp.StatusCode, header: resp.Header, body: b, took: time.Since(start)}
}

func raftIndexHeader(t testing.TB, a answer) uint64 {
	t.Helper()
	v, err := strconv.ParseUint(a.header.Get("X-Raft-Index"), 10, 64)
	if err != nil {
		t.Fatalf("X-Raft-Index %q: %v", a.header.Get("X-Raft-Index"), err)
	}
	return v
}

func TestMinIndexOnFollowerAnswersOnceTheWriteIsApplied(t *testing.T) {
	c := clustertest.Start(t, 3)
	leader := c.Leader()
	for i, f := range c.Followers() {
		res := propose(t, leader.Node, noop("acct:min-index-"+strconv.Itoa(i)))
		a := get(t, c.HTTP(f.ID)+"/deployment", map[string]string{"X-Min-Index": strconv.FormatUint(res.Index, 10)})
		if a.status != http.StatusOK {
			t.Fatalf("%s answered %d %s", f.ID, a.status, a.body)
		}
		if got := raftIndexHeader(t, a); got < res.Index {
			t.Fatalf("%s answered at index %d, before the write at %d", f.ID, got, res.Index)
		}
		if _, ok := record(f.Node, "acct:min-index-"+strconv.Itoa(i)); !ok {
			t.Fatalf("%s answered but has not applied the write", f.ID)
		}
	}
}

func TestMinIndexNeverReachedAnswers503AfterBoundedWait(t *testing.T) {
	c := clustertest.Start(t, 3)
	f := c.Followers()[0]
	// Within reach as far as the node can tell (a busy cluster might
	// append this much), but never reached here: the whole wait.
	want := c.Leader().Node.Raft.LastIndex() + 50_000
	// Not /healthz: its 503 is the health object (SPEC section 4), the
	// barrier's message as its reason (httpapi TestHealthz503IsTheHealthObject).
	a := get(t, c.HTTP(f.ID)+"/deployment", map[string]string{"X-Min-Index": strconv.FormatUint(want, 10)})
	if a.status != http.StatusServiceUnavailable {
		t.Fatalf("answered %d %s, want 503", a.status, a.body)
	}
	if a.took < node.MaxReadWait-100*time.Millisecond || a.took > node.MaxReadWait+2*time.Second {
		t.Fatalf("answered after %v; the wait is bounded by %v", a.took, node.MaxReadWait)
	}
	var body map[string]any
	if err := json.Unmarshal(a.body, &body); err != nil {
		t.Fatalf("body %s: %v", a.body, err)
	}
	if msg, _ := body["error"].(string); msg == "" || body["code"] != "unavailable" {
		t.Fatalf("body %s, want {error, code: unavailable}", a.body)
	}
	if got := raftIndexHeader(t, a); got >= want {
		t.Fatalf("X-Raft-Index %d on a refusal for %d", got, want)
	}
}

// An index a million entries past anything the cluster has logged was
// held for the whole wait (3 s) before its 503; the node can tell no wait
// reaches it, so it answers 503 unavailable at once, on the leader and on
// a follower, saying the index is ahead of the log.
func TestMinIndexFarAheadOfTheLogAnswers503AtOnce(t *testing.T) {
	c := clustertest.Start(t, 3)
	for _, m := range []*clustertest.Member{c.Leader(), c.Followers()[0]} {
		want := c.Leader().Node.Raft.LastIndex() + 1_000_000
		a := get(t, c.HTTP(m.ID)+"/deployment", map[string]string{"X-Min-Index": strconv.FormatUint(want, 10)})
		if a.status != http.StatusServiceUnavailable || a.took > 500*time.Millisecond {
			t.Fatalf("%s answered %d %s after %v, want 503 at once", m.ID, a.status, a.body, a.took)
		}
		var body map[string]any
		if err := json.Unmarshal(a.body, &body); err != nil {
			t.Fatalf("body %s: %v", a.body, err)
		}
		if msg, _ := body["error"].(string); !strings.Contains(msg, "ahead of the log") || body["code"] != "unavailable" {
			t.Fatalf("%s: body %s, want code unavailable saying the index is ahead of the log", m.ID, a.body)
		}
		if got := raftIndexHeader(t, a); got >= want {
			t.Fatalf("X-Raft-Index %d on a refusal for %d", got, want)
		}
	}
}

// An index just past the log, which the next write reaches, is still
// waited for: a read sent before the write lands answers once it applies.
func TestMinIndexJustAheadOfTheLogIsWaitedFor(t *testing.T) {
	c := clustertest.Start(t, 3)
	leader, f := c.Leader(), c.Followers()[0]
	want := leader.Node.Raft.LastIndex() + 2
	got := make(chan answer, 1)
	go func() {
		got <- get(t, c.HTTP(f.ID)+"/deployment", map[string]string{"X-Min-Index": strconv.FormatUint(want, 10)})
	}()
	time.Sleep(200 * time.Millisecond)
	for i := 0; leader.Node.Raft.LastIndex() < want; i++ {
		propose(t, leader.Node, noop("acct:just-ahead-"+strconv.Itoa(i)))
	}
	if a := <-got; a.status != http.StatusOK || raftIndexHeader(t, a) < want {
		t.Fatalf("%s answered %d %s (X-Raft-Index %s), want 200 once %d is applied", f.ID, a.status, a.body, a.header.Get("X-Raft-Index"), want)
	}
}

func TestMinIndexMustBeALogIndex(t *testing.T) {
	c := clustertest.Start(t, 1)
	for _, bad := range []string{"-1", "abc", "1.5", "18446744073709551616"} {
		a := get(t, c.HTTP("node1")+"/healthz", map[string]string{"X-Min-Index": bad})
		if a.status != http.StatusBadRequest {
			t.Errorf("X-Min-Index %q answered %d %s, want 400", bad, a.status, a.body)
		}
	}
}

var decimalString = regexp.MustCompile(`^"[0-9]+"$`)

func checkHealth(t testing.TB, a answer, wantOK bool) {
	t.Helper()
	var h map[string]json.RawMessage
	if err := json.Unmarshal(a.body, &h); err != nil {
		t.Fatalf("health body %s: %v", a.body, err)
	}
	if string(h["ok"]) != strconv.FormatBool(wantOK) || string(h["db"]) != "true" {
		t.Fatalf("health %s, want ok:%v db:true", a.body, wantOK)
	}
	if !decimalString.Match(h["tsMs"]) {
		t.Fatalf("tsMs %s is not a decimal string", h["tsMs"])
	}
	ts, _ := strconv.ParseInt(string(h["tsMs"][1:len(h["tsMs"])-1]), 10, 64)
	if d := time.Since(time.UnixMilli(ts)); d < -time.Minute || d > time.Minute {
		t.Fatalf("tsMs %d is not the node's clock", ts)
	}
}

// ok means ready to serve: a leader is known and genesis applied is not
// enough while the market catalogue is missing (the core-only cluster never
// lists one until told to).
func TestHealthzOKOnlyOnceTheCatalogueIsListed(t *testing.T) {
	c := clustertest.Start(t, 3)
	for _, m := range c.Live() {
		a := get(t, c.HTTP(m.ID)+"/healthz", nil)
		if a.status != http.StatusServiceUnavailable || !strings.Contains(string(a.body), "catalogue") {
			t.Fatalf("%s before the catalogue: %d %s", m.ID, a.status, a.body)
		}
		checkHealth(t, a, false)
	}
	res, err := c.Leader().Node.ProposeInternal(fsm.CmdMarketsGenesis, fsm.MarketsGenesisPayload{Markets: market.DefaultCatalogue()})
	if err != nil || !res.OK() {
		t.Fatalf("listing: %v %+v", err, res)
	}
	for _, m := range c.Live() {
		var a answer
		if !clustertest.Poll(10*time.Second, func() bool {
			a = get(t, c.HTTP(m.ID)+"/healthz", nil)
			return a.status == http.StatusOK
		}) {
			t.Fatalf("%s: %d %s", m.ID, a.status, a.body)
		}
		checkHealth(t, a, true)
		if strings.Contains(string(a.body), "reason") {
			t.Fatalf("a ready node gives a reason: %s", a.body)
		}
	}
}

func TestHealthz503WithoutLeader(t *testing.T) {
	c := clustertest.Start(t, 3)
	keep := c.Followers()[0]
	for _, m := range c.Live() {
		if m != keep {
			c.Kill(m.ID)
		}
	}
	var a answer
	if !clustertest.Poll(15*time.Second, func() bool {
		a = get(t, c.HTTP(keep.ID)+"/healthz", nil)
		return a.status == http.StatusServiceUnavailable
	}) {
		t.Fatalf("a node alone still answers %d %s", a.status, a.body)
	}
	checkHealth(t, a, false)
}
