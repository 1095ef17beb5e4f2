package cluster_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/perpd/perpd/cluster"
	"github.com/perpd/perpd/cluster/clustertest"
	"github.com/perpd/perpd/fsm"
	"github.com/perpd/perpd/node"
)

func ctx(t testing.TB) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return c
}

func noop(key string) *fsm.Command {
	return &fsm.Command{Type: fsm.CmdNoop, IdemKey: key, ReqHash: fsm.RequestHash([]byte(key))}
}

func propose(t testing.TB, n *node.Node, key string) *fsm.Result {
	t.Helper()
	res, err := n.Propose(ctx(t), noop(key))
	if err != nil || !res.OK() {
		t.Fatalf("propose %q: %+v %v", key, res, err)
	}
	return res
}

func hasKey(n *node.Node, key string) bool {
	var ok bool
	n.Machine().Read(func(st *fsm.State, _ uint64) { _, ok = st.Idem.Records[key] })
	return ok
}

// adminGet calls an admin route with a raw token and decodes the JSON body.
func adminGet(t testing.TB, addr, path, token string) (int, map[string]any) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, "http://"+addr+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var out map[string]any
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatalf("%s answered %d with non-JSON %q", path, resp.StatusCode, b)
	}
	return resp.StatusCode, out
}

var (
	decimal = regexp.MustCompile(`^[0-9]+$`)
	sha256x = regexp.MustCompile(`^[0-9a-f]{64}$`)
)

func TestAdminStatusReportsTheNodesViewOfTheCluster(t *testing.T) {
	c := clustertest.Start(t, 3)
	leader := c.Leader()
	for _, m := range c.Live() {
		status, st := adminGet(t, m.AdminAddr, "/admin/status", c.Token)
		if status != http.StatusOK {
			t.Fatalf("%s: %d %v", m.ID, status, st)
		}
		wantState := "Follower"
		if m == leader {
			wantState = "Leader"
		}
		if st["id"] != m.ID || st["state"] != wantState {
			t.Errorf("%s: id %v state %v, want %s %s", m.ID, st["id"], st["state"], m.ID, wantState)
		}
		l, _ := st["leader"].(map[string]any)
		if l["id"] != leader.ID || l["raft"] != leader.RaftAddr || l["http"] != leader.HTTPAddr {
			t.Errorf("%s: leader %v, want %s %s %s", m.ID, l, leader.ID, leader.RaftAddr, leader.HTTPAddr)
		}
		members, _ := st["members"].([]any)
		if len(members) != 3 {
			t.Fatalf("%s: members %v", m.ID, st["members"])
		}
		for _, x := range members {
			mm, _ := x.(map[string]any)
			id, _ := mm["id"].(string)
			if want := c.Member(id); mm["raft"] != want.RaftAddr || mm["suffrage"] != "Voter" {
				t.Errorf("%s: member %v, want raft %s voter", m.ID, mm, want.RaftAddr)
			}
		}
		for _, f := range []string{"appliedIndex", "commitIndex", "lastSnapshotIndex"} {
			if s, _ := st[f].(string); !decimal.MatchString(s) {
				t.Errorf("%s: %s = %#v, want a decimal string", m.ID, f, st[f])
			}
		}
		if s, _ := st["stateHash"].(string); !sha256x.MatchString(s) {
			t.Errorf("%s: stateHash %#v", m.ID, st["stateHash"])
		}
	}
}

func TestAdminStateMatchesTheNodesStateHash(t *testing.T) {
	c := clustertest.Start(t, 3)
	propose(t, c.Leader().Node, "acct:state")
	if err := c.WaitConverged(15 * time.Second); err != nil {
		t.Fatal(err)
	}
	// Ticks keep landing, so compare each answer with the node's own
	// (index, hash) pair taken around it, until one lands between equal ones.
	for _, m := range c.Live() {
		ok := clustertest.Poll(10*time.Second, func() bool {
			i0, h0, _ := m.Node.StateHash(context.Background())
			sv, err := c.Admin(m.ID).State(ctx(t))
			if err != nil {
				t.Fatal(err)
			}
			i1, h1, _ := m.Node.StateHash(context.Background())
			return i0 == i1 && h0 == h1 && sv.StateHash == h0 && sv.AppliedIndex == uintString(i0)
		})
		if !ok {
			t.Fatalf("%s: /admin/state never matched the node's state", m.ID)
		}
	}
}

func uintString(v uint64) string {
	b, _ := json.Marshal(v)
	return string(b)
}

func TestAdminTransferLeadershipToNamedMember(t *testing.T) {
	c := clustertest.Start(t, 3)
	old := c.Leader()
	fs := c.Followers()
	// Asked on one follower, relayed to the leader, handed to the other.
	st, err := c.Admin(fs[0].ID).TransferLeadership(ctx(t), fs[1].ID)
	if err != nil {
		t.Fatal(err)
	}
	if st.Leader.ID != fs[1].ID {
		t.Fatalf("answer names leader %q, want %s", st.Leader.ID, fs[1].ID)
	}
	if l := c.Leader(); l.ID != fs[1].ID {
		t.Fatalf("leader is %s", l.ID)
	}
	if old.Node.IsLeader() {
		t.Fatal("the old leader still leads")
	}
	// Writes go on under the new leader, through the old one.
	propose(t, old.Node, "acct:after-transfer")

	if _, err := c.Admin(fs[0].ID).TransferLeadership(ctx(t), "nobody"); err == nil {
		t.Fatal("a transfer to an unknown member must fail")
	}
}

func TestAdminSnapshotRestoredThroughFollowerGivesEveryNodeItsState(t *testing.T) {
	c := clustertest.Start(t, 3)
	leader := c.Leader()
	for _, k := range []string{"acct:before-1", "acct:before-2", "acct:before-3"} {
		propose(t, leader.Node, k)
	}
	var backup bytes.Buffer
	meta, err := c.Admin(leader.ID).Snapshot(ctx(t), &backup, nil)
	if err != nil {
		t.Fatal(err)
	}
	if meta.Index == 0 || meta.Size == 0 {
		t.Fatalf("snapshot meta %+v", meta)
	}
	// What the snapshot holds, read the way an operator's tool would.
	snapState := decodeBackup(t, backup.Bytes())
	for _, k := range []string{"acct:before-1", "acct:before-2", "acct:before-3"} {
		if snapState.Idem.Records[k] == nil {
			t.Fatalf("snapshot misses %q", k)
		}
	}
	for _, k := range []string{"acct:after-1", "acct:after-2"} {
		propose(t, leader.Node, k)
	}

	f := c.Followers()[0]
	appliedBefore := leader.Node.Machine().Applied()
	sv, err := c.Admin(f.ID).Restore(ctx(t), backup.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	// The restored state is a new entry of the log: the applied index the
	// leader reports moves on, it does not fall back to the snapshot's.
	if got, err := strconv.ParseUint(sv.AppliedIndex, 10, 64); err != nil || got <= appliedBefore {
		t.Fatalf("restore answered applied index %q; it was %d before", sv.AppliedIndex, appliedBefore)
	}
	// Every node ends up holding the snapshot's state: its records and
	// genesis, and nothing written after it.
	for _, m := range c.Live() {
		if !clustertest.Poll(15*time.Second, func() bool { return !hasKey(m.Node, "acct:after-1") }) {
			t.Fatalf("%s still holds a write made after the snapshot", m.ID)
		}
	}
	if err := c.WaitConverged(15 * time.Second); err != nil {
		t.Fatal(err)
	}
	for _, m := range c.Live() {
		m.Node.Machine().Read(func(st *fsm.State, _ uint64) {
			if len(st.Idem.Records) != len(snapState.Idem.Records) {
				t.Errorf("%s holds %d records, the snapshot %d", m.ID, len(st.Idem.Records), len(snapState.Idem.Records))
			}
			for k, rec := range snapState.Idem.Records {
				if got := st.Idem.Records[k]; got == nil || got.Index != rec.Index {
					t.Errorf("%s: record %q is %+v, snapshot has %+v", m.ID, k, got, rec)
				}
			}
			if *st.Genesis != *snapState.Genesis {
				t.Errorf("%s: genesis %+v, snapshot %+v", m.ID, st.Genesis, snapState.Genesis)
			}
		})
	}
	// The cluster goes on writing after a restore.
	propose(t, f.Node, "acct:after-restore")
}

// decodeBackup reads a `perpd admin snapshot` file into a state.
func decodeBackup(t testing.TB, b []byte) *fsm.State {
	t.Helper()
	magic, rest, ok := bytes.Cut(b, []byte("\n"))
	if !ok || !strings.HasPrefix(string(magic), "perpd-snapshot") {
		t.Fatalf("backup starts with %q", magic)
	}
	_, data, ok := bytes.Cut(rest, []byte("\n"))
	if !ok {
		t.Fatal("backup has no metadata line")
	}
	m := fsm.NewMachine(fsm.Options{})
	if err := m.Restore(data); err != nil {
		t.Fatal(err)
	}
	var st *fsm.State
	m.Read(func(s *fsm.State, _ uint64) { st = s })
	return st
}

func TestAdminRefusesAWrongToken(t *testing.T) {
	c := clustertest.Start(t, 1)
	m := c.Member("node1")
	for _, tok := range []string{"", "wrong", c.Token + "x"} {
		for _, path := range []string{"/admin/status", "/admin/state", "/admin/snapshot"} {
			status, body := adminGet(t, m.AdminAddr, path, tok)
			if status != http.StatusUnauthorized {
				t.Errorf("GET %s with token %q: %d %v", path, tok, status, body)
			}
			if msg, _ := body["error"].(string); msg == "" {
				t.Errorf("GET %s: 401 without an error message: %v", path, body)
			}
		}
		bad := cluster.NewAdminClient(m.AdminAddr, tok)
		if _, err := bad.Join(ctx(t), "node9", "127.0.0.1:1", false); err == nil || !strings.Contains(err.Error(), "401") {
			t.Errorf("join with token %q: %v", tok, err)
		}
		if _, err := bad.Remove(ctx(t), "node1"); err == nil || !strings.Contains(err.Error(), "401") {
			t.Errorf("remove with token %q: %v", tok, err)
		}
		// The internal write channel is just as closed.
		body, _ := noop("acct:forged").Encode()
		req, _ := http.NewRequest(http.MethodPost, "http://"+m.AdminAddr+node.ForwardPath, bytes.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+tok)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized {
			t.Errorf("forwarded write with token %q: %d", tok, resp.StatusCode)
		}
	}
	if hasKey(m.Node, "acct:forged") {
		t.Fatal("a forwarded write with a wrong token was applied")
	}
	members, _ := m.Node.Members()
	if len(members) != 1 {
		t.Fatalf("membership changed without the token: %+v", members)
	}
}
