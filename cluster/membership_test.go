package cluster_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/perpd/perpd/cluster"
	"github.com/perpd/perpd/cluster/clustertest"
	"github.com/perpd/perpd/fsm"
	"github.com/perpd/perpd/node"
)

func voters(t testing.TB, n *node.Node) map[string]string {
	t.Helper()
	members, err := n.Members()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, m := range members {
		if m.Suffrage == "Voter" {
			out[m.ID] = m.Raft
		}
	}
	return out
}

func TestRemovedMemberReaddedWithWipedDataConverges(t *testing.T) {
	for _, which := range []string{"follower", "leader"} {
		t.Run("remove the "+which, func(t *testing.T) {
			// The raft log a member holds when its node is created, before it
			// starts or joins: a wiped member holds none.
			var readding atomic.Bool
			var lastIndexAtStart atomic.Uint64
			c := clustertest.Start(t, 3, clustertest.OnNode(func(n *node.Node) {
				if readding.Load() {
					lastIndexAtStart.Store(n.Raft.LastIndex())
				}
			}))
			victim := c.Leader()
			if which == "follower" {
				victim = c.Followers()[0]
			}
			for i := range 5 {
				propose(t, c.Leader().Node, fmt.Sprintf("acct:before-%d", i))
			}
			c.Remove(victim.ID)
			leader := c.Leader()
			if leader.ID == victim.ID {
				t.Fatal("a removed member leads")
			}
			if v := voters(t, leader.Node); len(v) != 2 || v[victim.ID] != "" {
				t.Fatalf("voters after remove: %v", v)
			}
			// Two voters out of two: writes still commit.
			for _, m := range c.Live() {
				for i := range 5 {
					propose(t, m.Node, fmt.Sprintf("acct:while-removed-%s-%d", m.ID, i))
				}
			}

			readding.Store(true)
			m := c.Add(victim.ID)
			readding.Store(false)
			if got := lastIndexAtStart.Load(); got != 0 {
				t.Fatalf("a wiped node starts with a raft log up to index %d", got)
			}
			leader = c.Leader()
			if v := voters(t, leader.Node); len(v) != 3 || v[victim.ID] != m.RaftAddr {
				t.Fatalf("voters after re-add: %v", v)
			}
			if err := c.WaitConverged(20 * time.Second); err != nil {
				t.Fatal(err)
			}
			for i := range 5 {
				if !hasKey(m.Node, fmt.Sprintf("acct:before-%d", i)) {
					t.Fatalf("re-added node misses write %d made before its removal", i)
				}
			}
			for _, o := range c.Live() {
				if o == m {
					continue
				}
				for i := range 5 {
					if !hasKey(m.Node, fmt.Sprintf("acct:while-removed-%s-%d", o.ID, i)) {
						t.Fatalf("re-added node misses a write made while it was out")
					}
				}
			}
			// And it takes writes itself.
			propose(t, m.Node, "acct:through-readded")
		})
	}
}

// TestJoinOfAnExistingMemberAtAnotherAddressIsRefused: `admin join --id
// node2 --raft <typo>` used to move the live voter to the typo's address
// (raft's AddVoter re-addresses an existing id), leaving the cluster one
// failure from an outage. It is refused unless --replace; the same
// address again is the no-op it was.
func TestJoinOfAnExistingMemberAtAnotherAddressIsRefused(t *testing.T) {
	c := clustertest.Start(t, 2)
	f := c.Followers()[0]
	admin := cluster.NewAdminClient(c.Leader().AdminAddr, c.Token)
	_, err := admin.Join(ctx(t), f.ID, "127.0.0.1:1", false)
	if err == nil || !strings.Contains(err.Error(), "409") || !strings.Contains(err.Error(), "--replace") {
		t.Fatalf("joining %s at another address: %v", f.ID, err)
	}
	if v := voters(t, c.Leader().Node); v[f.ID] != f.RaftAddr {
		t.Fatalf("voters after the refused join: %v", v)
	}
	if _, err := admin.Join(ctx(t), f.ID, f.RaftAddr, false); err != nil {
		t.Fatalf("joining %s at its own address: %v", f.ID, err)
	}
}

// TestRemovedLeaderRejoinsWithoutARestart: removing the leader and joining
// it back at once used to leave a dead voter until its process restarted
// (raft shut itself down on its own removal). It now stays a follower
// outside the configuration, takes no part in elections, and catches up
// as soon as it is a member again.
func TestRemovedLeaderRejoinsWithoutARestart(t *testing.T) {
	c := clustertest.Start(t, 3)
	victim := c.Leader()
	propose(t, victim.Node, "acct:before-removal")
	admin := cluster.NewAdminClient(victim.AdminAddr, c.Token)
	if _, err := admin.Remove(ctx(t), victim.ID); err != nil {
		t.Fatal(err)
	}
	var leader *clustertest.Member
	deadline := time.Now().Add(15 * time.Second)
	for leader == nil || leader == victim {
		if time.Now().After(deadline) {
			t.Fatal("no other leader after the leader's removal")
		}
		for _, m := range c.Live() {
			if m != victim && m.Node.IsLeader() {
				leader = m
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	propose(t, leader.Node, "acct:while-removed")
	if _, err := cluster.NewAdminClient(leader.AdminAddr, c.Token).Join(ctx(t), victim.ID, victim.RaftAddr, false); err != nil {
		t.Fatal(err)
	}
	propose(t, leader.Node, "acct:after-rejoin")
	if err := c.WaitConverged(20 * time.Second); err != nil {
		t.Fatal(err)
	}
	if !hasKey(victim.Node, "acct:after-rejoin") {
		t.Fatal("the rejoined node misses the write made after its rejoin")
	}
}

// TestStartingNodeDoesNotEvictALiveMemberOfItsID: a new node started with
// the id of a live member (a copied command line, `--id node2` twice)
// joined with replace and silently moved the live voter to its own
// address: the real member fell out of the configuration without being
// told, and an empty node voted in its place. The join is refused, for
// good (ErrJoinRefused stops `serve`), and the member stays where it is.
func TestStartingNodeDoesNotEvictALiveMemberOfItsID(t *testing.T) {
	c := clustertest.Start(t, 2)
	f := c.Followers()[0]
	n, err := node.New(node.Config{ID: f.ID, DataDir: t.TempDir(), RaftAddr: clustertest.FreeAddr(t),
		AdminToken: c.Token, ClusterSecret: c.Secret})
	if err != nil {
		t.Fatal(err)
	}
	defer n.Shutdown()
	jctx, cancel := context.WithTimeout(ctx(t), 10*time.Second)
	defer cancel()
	err = cluster.JoinNode(jctx, n, c.Leader().AdminAddr)
	if !errors.Is(err, cluster.ErrJoinRefused) || !strings.Contains(err.Error(), "remove it first") {
		t.Fatalf("a second %s joined: %v", f.ID, err)
	}
	if v := voters(t, c.Leader().Node); v[f.ID] != f.RaftAddr || len(v) != 2 {
		t.Fatalf("voters after the refused join: %v (want %s at %s)", v, f.ID, f.RaftAddr)
	}
	// The member's own address stays a no-op join (a node whose join
	// answer was lost, joining again).
	if _, err := cluster.NewAdminClient(c.Leader().AdminAddr, c.Token).Join(ctx(t), f.ID, f.RaftAddr, false); err != nil {
		t.Fatal(err)
	}
}

// TestRemoveThatWouldLoseQuorumIsRefused: with node3 down, `admin remove
// --id node2` (a live voter) used to be accepted: the configuration became
// {node1, node3} with node3 dead, the leader stepped down for good and the
// cluster took no write again (no admin command could undo it: they need a
// leader). It is refused, naming the member that does not answer;
// removing the dead member instead is accepted.
func TestRemoveThatWouldLoseQuorumIsRefused(t *testing.T) {
	c := clustertest.Start(t, 3)
	fs := c.Followers()
	dead, live := fs[0], fs[1]
	c.Kill(dead.ID)
	leader := c.Leader()
	admin := cluster.NewAdminClient(leader.AdminAddr, c.Token)
	_, err := admin.Remove(ctx(t), live.ID)
	if err == nil || !strings.Contains(err.Error(), "409") || !strings.Contains(err.Error(), "quorum") ||
		!strings.Contains(err.Error(), dead.ID) {
		t.Fatalf("removing live %s while %s is down: %v", live.ID, dead.ID, err)
	}
	if v := voters(t, leader.Node); len(v) != 3 {
		t.Fatalf("voters after the refused remove: %v", v)
	}
	propose(t, leader.Node, "acct:after-refused-remove")
	if _, err := admin.Remove(ctx(t), dead.ID); err != nil {
		t.Fatalf("removing the dead %s: %v", dead.ID, err)
	}
	propose(t, c.Leader().Node, "acct:after-removing-the-dead")
}

// TestJoinThatWouldLoseQuorumIsRefused: `admin join --id node2 --raft
// <typo>` on a cluster of one used to answer 200 and make it a cluster of
// two voters, one of them nowhere: the leader stepped down and never
// came back. It is refused with the address that did not answer, unless
// --force; the cluster keeps taking writes.
func TestJoinThatWouldLoseQuorumIsRefused(t *testing.T) {
	c := clustertest.Start(t, 1)
	leader := c.Leader()
	admin := cluster.NewAdminClient(leader.AdminAddr, c.Token)
	nowhere := clustertest.FreeAddr(t)
	_, err := admin.Join(ctx(t), "node9", nowhere, false)
	if err == nil || !strings.Contains(err.Error(), "409") || !strings.Contains(err.Error(), nowhere) {
		t.Fatalf("joining node9 at %s (nothing listens): %v", nowhere, err)
	}
	if v := voters(t, leader.Node); len(v) != 1 {
		t.Fatalf("voters after the refused join: %v", v)
	}
	propose(t, leader.Node, "acct:after-refused-join")
}

// TestRemovingTheLastVoterIsRefusedPlainly: raft's own refusal read
// "need at least one voter in configuration: {[]}"; the answer now says
// what the operator was about to do.
func TestRemovingTheLastVoterIsRefusedPlainly(t *testing.T) {
	c := clustertest.Start(t, 1)
	leader := c.Leader()
	_, err := cluster.NewAdminClient(leader.AdminAddr, c.Token).RemoveWith(ctx(t), cluster.RemoveRequest{ID: leader.ID, Force: true})
	if err == nil || !strings.Contains(err.Error(), "last voter") {
		t.Fatalf("removing the only voter: %v", err)
	}
}

// TestJoinOfABuildBelowTheClustersLevelIsRefused: a node started with an
// old binary after the raise (a host replaced from an old package) was
// added as a voter, then refused every snapshot the leader sent (its
// build cannot install the level): a voter that never catches up, one
// failure from an outage. A starting node names its build's level and is
// refused, for good, with what to run instead.
func TestJoinOfABuildBelowTheClustersLevelIsRefused(t *testing.T) {
	c := clustertest.Start(t, 1)
	leader := c.Leader()
	old := fsm.FeatureLevel - 1
	_, err := c.Admin(leader.ID).JoinWith(ctx(t), cluster.JoinRequest{ID: "node9", Raft: clustertest.FreeAddr(t), BuildLevel: &old})
	if err == nil || !strings.Contains(err.Error(), "409") || !strings.Contains(err.Error(), fmt.Sprintf("feature level %d and the cluster is at %d", old, fsm.FeatureLevel)) {
		t.Fatalf("a level-%d build joining a level-%d cluster: %v", old, fsm.FeatureLevel, err)
	}
	if v := voters(t, leader.Node); len(v) != 1 {
		t.Fatalf("voters after the refused join: %v", v)
	}
}

// TestJoinOfAnotherDeploymentIsRefused: a node started with another
// --deployment than the cluster's genesis (bench on a testnet cluster)
// was added as a voter, then stopped itself once it read the genesis
// (serve's awaitGenesisDeployment), leaving a voter that never answers:
// on a one-node cluster the leader lost its quorum (seen live: the
// cluster sat leaderless until the node came back as testnet). A starting
// node names its deployment and is refused, for good, before it is added.
func TestJoinOfAnotherDeploymentIsRefused(t *testing.T) {
	c := clustertest.Start(t, 1)
	leader := c.Leader()
	_, err := c.Admin(leader.ID).JoinWith(ctx(t), cluster.JoinRequest{ID: "node9", Raft: clustertest.FreeAddr(t), Deployment: "bench"})
	if err == nil || !strings.Contains(err.Error(), "409") || !strings.Contains(err.Error(), `"bench"`) {
		t.Fatalf("a bench node joining a testnet cluster: %v", err)
	}
	// The way `perpd serve --join` does it: refused for good, not retried.
	n, err := node.New(node.Config{ID: "node8", DataDir: t.TempDir(), RaftAddr: clustertest.FreeAddr(t),
		HTTPAddr: "127.0.0.1:1", AdminAddr: "127.0.0.1:2", Deployment: "bench", AdminToken: c.Token, ClusterSecret: c.Secret})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = n.Shutdown() }()
	if err := cluster.JoinNode(ctx(t), n, leader.AdminAddr); !errors.Is(err, cluster.ErrJoinRefused) {
		t.Fatalf("JoinNode of a bench node: %v, want ErrJoinRefused", err)
	}
	if v := voters(t, leader.Node); len(v) != 1 {
		t.Fatalf("voters after the refused joins: %v", v)
	}
}

// TestJoinOfAMalformedOrTakenRaftAddressIsRefused: in a three-voter
// cluster the quorum check passes with the new voter unreachable (three of
// four answer), so `admin join --raft node4` (no port) or a port past
// 65535 was added as a voter raft can never dial, and a new id at another
// member's raft address was added too: that member then answered for two
// voters, so its failure alone stopped the cluster. Both are refused, with
// or without --force, and the configuration is unchanged.
func TestJoinOfAMalformedOrTakenRaftAddressIsRefused(t *testing.T) {
	c := clustertest.Start(t, 3)
	leader := c.Leader()
	f := c.Followers()[0]
	admin := cluster.NewAdminClient(leader.AdminAddr, c.Token)
	for _, tc := range []struct{ raft, want string }{
		{"node4", "HOST:PORT"},
		{"127.0.0.1:70000", "port"},
		{"127.0.0.1:", "port"},
		{f.RaftAddr, f.ID},
	} {
		for _, force := range []bool{false, true} {
			_, err := admin.JoinWith(ctx(t), cluster.JoinRequest{ID: "node9", Raft: tc.raft, Force: force})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("join node9 at %q (force %v): %v, want an error naming %q", tc.raft, force, err, tc.want)
			}
		}
	}
	if v := voters(t, leader.Node); len(v) != 3 {
		t.Fatalf("voters after the refused joins: %v", v)
	}
}

// TestAWipedVoterMustBeRemovedBeforeItRejoins: a node started on an empty
// data directory under the id of a voter (its disk replaced, its directory
// deleted) has lost a log the cluster may count on for committed entries.
// Its join is refused, naming the removal, and the refusal is recorded in
// the directory, so no later start takes part (raft may have been sent
// entries meanwhile, and a restart would look like a member's); once the
// member is removed and the directory emptied, it joins as a new member.
// A member that merely restarts is not fresh.
func TestAWipedVoterMustBeRemovedBeforeItRejoins(t *testing.T) {
	c := clustertest.Start(t, 3)
	for i := range 3 {
		propose(t, c.Leader().Node, fmt.Sprintf("acct:before-wipe-%d", i))
	}
	victim := c.Followers()[0]
	c.Kill(victim.ID)
	c.Restart(victim.ID)
	if c.Member(victim.ID).Node.FreshDataDir() {
		t.Fatal("a member restarted on its own data directory counts as fresh")
	}
	c.Kill(victim.ID)
	if err := os.RemoveAll(victim.DataDir); err != nil {
		t.Fatal(err)
	}
	cfg := node.Config{ID: victim.ID, DataDir: victim.DataDir, RaftAddr: victim.RaftAddr, AwaitJoin: true,
		ClusterSecret: c.Secret, AdminToken: "t", Logger: hclog.NewNullLogger()}
	n, err := node.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if !n.FreshDataDir() || !n.RaftHeld() {
		t.Fatal("a wiped data directory started to join does not count as fresh, or its raft is not held")
	}
	// Stopped before it asked, it is as fresh at its next start: the
	// directory is marked only once the join's check has passed.
	_ = n.Shutdown()
	if n, err = node.New(cfg); err != nil || !n.FreshDataDir() {
		t.Fatalf("the next start: %v, fresh %v", err, err == nil && n.FreshDataDir())
	}
	// The leader knows it as a voter and keeps sending to it; held, raft
	// hears none of it: no leader contact, no term, no vote.
	time.Sleep(time.Second)
	untouched := func(when string) {
		t.Helper()
		if st := n.Raft.Stats(); st["last_contact"] != "never" || st["term"] != "0" || n.Raft.LastIndex() != 0 {
			t.Fatalf("%s, the wiped voter's raft took part: last contact %s, term %s, last index %d", when, st["last_contact"], st["term"], n.Raft.LastIndex())
		}
	}
	untouched("before its join")
	leader := c.Leader()
	err = cluster.JoinNode(ctx(t), n, leader.AdminAddr)
	time.Sleep(500 * time.Millisecond)
	untouched("after the refusal")
	_ = n.Shutdown()
	if !errors.Is(err, cluster.ErrJoinRefused) || !strings.Contains(err.Error(), "perpd admin remove --id "+victim.ID) {
		t.Fatalf("the wiped voter's join: %v", err)
	}
	if _, err := node.New(cfg); err == nil || !strings.Contains(err.Error(), "voter whose data is lost") {
		t.Fatalf("a start after the refusal: %v, want a refusal to start", err)
	}
	if _, err := c.Admin(leader.ID).Remove(ctx(t), victim.ID); err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(victim.DataDir); err != nil {
		t.Fatal(err)
	}
	n, err = node.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer n.Shutdown()
	if err := cluster.JoinNode(ctx(t), n, leader.AdminAddr); err != nil {
		t.Fatalf("the removed member's join: %v", err)
	}
	deadline := time.Now().Add(20 * time.Second)
	for !hasKey(n, "acct:before-wipe-2") {
		if time.Now().After(deadline) {
			t.Fatal("the re-joined member never caught up")
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// olderMember stands for a member of a build before the join check: it
// answers 404 at cluster.JoinCheckPath and passes everything else to the
// admin listener at target.
func olderMember(t *testing.T, target string) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == cluster.JoinCheckPath {
			http.NotFound(w, r)
			return
		}
		req, _ := http.NewRequestWithContext(r.Context(), r.Method, "http://"+target+r.URL.RequestURI(), r.Body)
		req.Header = r.Header.Clone()
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		defer resp.Body.Close()
		w.WriteHeader(resp.StatusCode)
		_, _ = io.Copy(w, resp.Body)
	})}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	return ln.Addr().String()
}

// TestAHeldJoinerJoinsThroughAnOlderMember: a member of an older build has
// no join check, and never acts on one (404); the held joiner then lets
// its raft go as that build's joiners did and joins, fresh, as a new member.
func TestAHeldJoinerJoinsThroughAnOlderMember(t *testing.T) {
	c := clustertest.Start(t, 3)
	propose(t, c.Leader().Node, "acct:before-join")
	dir := t.TempDir()
	n, err := node.New(node.Config{ID: "node9", DataDir: dir, RaftAddr: clustertest.FreeAddr(t), AwaitJoin: true,
		ClusterSecret: c.Secret, AdminToken: "t", Logger: hclog.NewNullLogger()})
	if err != nil {
		t.Fatal(err)
	}
	defer n.Shutdown()
	if !n.RaftHeld() {
		t.Fatal("a fresh joiner's raft is not held")
	}
	if err := cluster.JoinNode(ctx(t), n, olderMember(t, c.Leader().AdminAddr)); err != nil {
		t.Fatalf("join through an older member: %v", err)
	}
	if n.RaftHeld() {
		t.Fatal("joined, and its raft still held")
	}
	deadline := time.Now().Add(20 * time.Second)
	for !hasKey(n, "acct:before-join") {
		if time.Now().After(deadline) {
			t.Fatal("the new member never caught up")
		}
		time.Sleep(50 * time.Millisecond)
	}
}
