package cluster

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"time"

	"github.com/hashicorp/raft"

	"github.com/perpd/perpd/fsm"
	"github.com/perpd/perpd/node"
)

// maxAdminBody bounds admin request bodies other than snapshot restores.
const maxAdminBody = 1 << 20

// maxRestoreBytes bounds an uploaded snapshot.
const maxRestoreBytes = 4 << 30

// AdminServer is the admin listener of one node. Operator routes need the
// node's admin token as a bearer token (or, relayed by another member, the
// cluster's peer credential); /internal/* routes need the peer credential.
type AdminServer struct {
	n   *node.Node
	mux *http.ServeMux
}

// JoinPath is where a starting node asks to be added, with the cluster's
// peer credential: a node whose cluster secret differs is refused.
const JoinPath = "/internal/join"

// JoinCheckPath is where a starting node on a fresh data directory asks,
// before its raft takes any request (node.Config.AwaitJoin), whether its
// join would be refused: the leader answers the refusals of JoinPath, or
// 200 with the members, and adds nothing. Builds before it answer 404,
// and never act on it.
const JoinCheckPath = "/internal/join/check"

// relayTimeout bounds a request relayed to the leader (a restore upload).
const relayTimeout = 3 * time.Minute

// NewAdminServer builds the admin routes for n. extra lets other packages
// (markets, oracle, rail) add their operator routes.
func NewAdminServer(n *node.Node) *AdminServer {
	s := &AdminServer{n: n, mux: http.NewServeMux()}
	s.mux.Handle(node.ForwardPath, n.ForwardHandler())
	s.mux.Handle(node.ForwardBatchPath, n.ForwardBatchHandler())
	s.mux.Handle(node.ReadIndexPath, n.ReadIndexHandler())
	s.mux.Handle(node.MeterPath, n.MeterHandler())
	s.mux.Handle(JoinPath, n.InternalPost(s.leaderOnly(s.join)))
	s.mux.Handle(JoinCheckPath, n.InternalPost(s.leaderOnly(s.join)))
	s.Handle("GET /admin/status", s.status)
	s.Handle("GET /admin/state", s.state)
	s.Handle("POST /admin/join", s.leaderOnly(s.join))
	s.Handle("POST /admin/remove", s.leaderOnly(s.remove))
	s.Handle("POST /admin/transfer-leadership", s.leaderOnly(s.transfer))
	s.Handle("GET /admin/snapshot", s.snapshot)
	s.Handle("POST /admin/restore", s.leaderOnly(s.restore))
	s.profiling()
	s.featureLevels()
	s.replicaRoutes()
	return s
}

// Handle registers an authenticated admin route.
func (s *AdminServer) Handle(pattern string, h http.HandlerFunc) {
	s.mux.HandleFunc(pattern, func(w http.ResponseWriter, r *http.Request) {
		if !s.operatorOrRelay(r) {
			writeJSON(w, http.StatusUnauthorized, errBody("admin token missing or wrong"))
			return
		}
		h(w, r)
	})
}

// HandleLeader registers an authenticated admin route that runs on the
// leader: a follower relays it there.
func (s *AdminServer) HandleLeader(pattern string, h http.HandlerFunc) {
	s.Handle(pattern, s.leaderOnly(h))
}

// operatorOrRelay accepts this node's admin token, or a request another
// member relayed after checking its own operator's token.
func (s *AdminServer) operatorOrRelay(r *http.Request) bool {
	if node.CheckToken(r, s.n.Config().AdminToken) {
		return true
	}
	return r.Header.Get(relayedHeader) != "" && s.n.CheckPeer(r) == nil
}

// relayedHeader marks a request relayed by a member (naming it), which the
// receiver runs itself instead of relaying again.
const relayedHeader = "X-Perpd-Relayed"

// ServeHTTP implements http.Handler.
func (s *AdminServer) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.mux.ServeHTTP(w, r) }

// Node returns the served node.
func (s *AdminServer) Node() *node.Node { return s.n }

func errBody(msg string) map[string]string { return map[string]string{"error": msg} }

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v)
}

// WriteJSON is writeJSON for other packages' admin routes.
func WriteJSON(w http.ResponseWriter, status int, v any) { writeJSON(w, status, v) }

// DecodeJSON reads a bounded JSON body, answering 400 itself on failure.
func DecodeJSON(w http.ResponseWriter, r *http.Request, v any) bool {
	dec := json.NewDecoder(io.LimitReader(r.Body, maxAdminBody))
	if err := dec.Decode(v); err != nil {
		writeJSON(w, http.StatusBadRequest, errBody("bad request body: "+err.Error()))
		return false
	}
	return true
}

func (s *AdminServer) status(w http.ResponseWriter, r *http.Request) {
	st, err := s.n.Status(r.Context())
	if err != nil {
		writeJSON(w, http.StatusServiceUnavailable, errBody(err.Error()))
		return
	}
	writeJSON(w, http.StatusOK, st)
}

// StateView is the body of GET /admin/state.
type StateView struct {
	AppliedIndex string `json:"appliedIndex"`
	StateHash    string `json:"stateHash"`
	// After a restore: the index the restored state was installed at and
	// its hash, which equals the hash of the snapshot that was uploaded
	// (a backup's manifest records it).
	RestoredIndex     string `json:"restoredIndex,omitempty"`
	RestoredStateHash string `json:"restoredStateHash,omitempty"`
}

func (s *AdminServer) state(w http.ResponseWriter, r *http.Request) {
	idx, hash, err := s.n.StateHash(r.Context())
	if err != nil {
		writeJSON(w, http.StatusInternalServerError, errBody(err.Error()))
		return
	}
	writeJSON(w, http.StatusOK, StateView{AppliedIndex: strconv.FormatUint(idx, 10), StateHash: hash})
}

// leaderOnly runs h on the leader; a follower relays the request to the
// leader's admin listener, under the cluster's peer credential (admin
// tokens are per node), and relays the answer back.
func (s *AdminServer) leaderOnly(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if s.n.IsLeader() || r.Header.Get(relayedHeader) != "" {
			h(w, r)
			return
		}
		_, _, _, admin := s.n.LeaderInfo()
		if admin == "" {
			writeJSON(w, http.StatusServiceUnavailable, errBody("no leader known"))
			return
		}
		liftDeadlines(w) // a relayed restore streams; relayTimeout bounds it
		ctx, cancel := context.WithTimeout(r.Context(), relayTimeout)
		defer cancel()
		req, err := http.NewRequestWithContext(ctx, r.Method, s.n.PeerURL(admin, r.URL.RequestURI()), r.Body)
		if err != nil {
			writeJSON(w, http.StatusInternalServerError, errBody(err.Error()))
			return
		}
		req.Header = r.Header.Clone()
		s.n.SetPeerAuth(req)
		req.Header.Set(relayedHeader, s.n.Config().ID)
		resp, err := s.n.PeerClient().Do(req)
		if err != nil {
			writeJSON(w, http.StatusBadGateway, errBody("relay to leader: "+err.Error()))
			return
		}
		defer resp.Body.Close()
		for k, v := range resp.Header {
			w.Header()[k] = v
		}
		w.WriteHeader(resp.StatusCode)
		_, _ = io.Copy(w, resp.Body)
	}
}

// JoinRequest asks the leader to add a voter.
type JoinRequest struct {
	ID   string `json:"id"`
	Raft string `json:"raft"`
	// Replace allows moving a member that is already in the configuration
	// to another raft address. Without it such a join is refused: a typo
	// in --raft would otherwise silently point a live voter at a dead
	// address. A starting node's own join (JoinNode) never sets it: a new
	// node under a live member's id would evict that member.
	Replace bool `json:"replace,omitempty"`
	// Force adds the voter even when a majority of the voters would then
	// not answer (node.ErrQuorumAtRisk). A starting node never sets it.
	Force bool `json:"force,omitempty"`
	// BuildLevel is the feature level the joining node's build implements
	// (JoinNode sends it; absent from an operator's join and older builds).
	BuildLevel *uint32 `json:"buildLevel,omitempty"`
	// Deployment is the joining node's --deployment (JoinNode sends it;
	// absent from an operator's join and older builds). A node of another
	// deployment than the genesis stops itself once it reads the genesis:
	// added first, it would stay behind as a voter that never answers.
	Deployment string `json:"deployment,omitempty"`
	// Fresh says the joining node started on a new data directory
	// (node.FreshDataDir; JoinNode sends it, an operator's join and older
	// builds do not). Such a node under the id of a voter has lost that
	// voter's log, and is refused (CodeVoterDataLost).
	Fresh bool `json:"fresh,omitempty"`
}

func (s *AdminServer) join(w http.ResponseWriter, r *http.Request) {
	var req JoinRequest
	if !DecodeJSON(w, r, &req) {
		return
	}
	if req.ID == "" || req.Raft == "" {
		writeJSON(w, http.StatusBadRequest, errBody("id and raft are required"))
		return
	}
	if req.BuildLevel != nil {
		// A build below the cluster's level cannot install its state: it
		// would sit in the configuration as a voter that never catches up.
		var level uint32
		s.n.Machine().Read(func(st *fsm.State, _ uint64) { level = st.FeatureLevel })
		if *req.BuildLevel < level {
			writeJSON(w, http.StatusConflict, map[string]string{"code": CodeBuildTooOld,
				"error": fmt.Sprintf("node %q runs a build that implements feature level %d and the cluster is at %d: "+
					"start it with a build that implements %d or more", req.ID, *req.BuildLevel, level, level)})
			return
		}
	}
	if req.Deployment != "" {
		if d := s.clusterDeployment(); req.Deployment != d {
			writeJSON(w, http.StatusConflict, map[string]string{"code": CodeDeploymentMismatch,
				"error": fmt.Sprintf("node %q runs deployment %q and this cluster is %q: start it with --deployment %s",
					req.ID, req.Deployment, d, d)})
			return
		}
	}
	members, err := s.n.Members()
	if err != nil {
		writeJSON(w, statusFor(err), errBody(err.Error()))
		return
	}
	if req.Fresh {
		// A voter's log holds entries the cluster may count as committed
		// on its acknowledgement alone: with three voters, an entry on the
		// leader and this one is committed, and if this one comes back
		// empty and votes with the third before the leader's log is heard
		// from, the entry is gone. Taken out first, it joins as new.
		for _, m := range members {
			// At another address the join is refused below as a move.
			if m.ID == req.ID && m.Raft == req.Raft && m.Suffrage == raft.Voter.String() {
				writeJSON(w, http.StatusConflict, map[string]string{"code": CodeVoterDataLost,
					"error": fmt.Sprintf("node %q is a voter of this cluster but started on an empty data directory: its raft log is lost, "+
						"and a voter without its log can undo committed entries. Remove it first (perpd admin remove --id %s), "+
						"then start it again: it joins as a new member and is sent a snapshot", req.ID, req.ID)})
				return
			}
		}
	}
	if !req.Replace {
		for _, m := range members {
			if m.ID == req.ID && m.Raft != req.Raft {
				writeJSON(w, http.StatusConflict, map[string]string{"code": CodeMemberElsewhere,
					"error": fmt.Sprintf("member %q is at %s; joining it at %s would move it there: "+
						"remove it first, or pass --replace to move it", req.ID, m.Raft, req.Raft)})
				return
			}
		}
	}
	if r.URL.Path == JoinCheckPath {
		// Answered by the leader of now, whose configuration is the one
		// a join would change (a deposed one may still think it leads).
		if err := s.n.Raft.VerifyLeader().Error(); err != nil {
			writeJSON(w, http.StatusServiceUnavailable, errBody("this node no longer leads: "+err.Error()))
			return
		}
		s.members(w)
		return
	}
	if err := s.n.AddVoter(req.ID, req.Raft, req.Force); err != nil {
		writeJSON(w, statusFor(err), errBody(err.Error()))
		return
	}
	s.members(w)
}

// clusterDeployment is the deployment of the cluster's genesis, or this
// node's own before the genesis is applied (a member runs the genesis one:
// serve stops any other).
func (s *AdminServer) clusterDeployment() string {
	d := s.n.Config().Deployment
	s.n.Machine().Read(func(st *fsm.State, _ uint64) {
		if st.Genesis != nil {
			d = st.Genesis.Deployment
		}
	})
	return d
}

// CodeDeploymentMismatch is the code of a join refused because the node
// runs another deployment than the cluster: final for JoinNode.
const CodeDeploymentMismatch = "deployment_mismatch"

// CodeMemberElsewhere is the code of a join refused because its id is a
// member at another raft address: final for a starting node (JoinNode).
const CodeMemberElsewhere = "member_at_another_address"

// CodeVoterDataLost is the code of a join refused because a node on a new
// data directory asks under the id of a voter: final for JoinNode.
const CodeVoterDataLost = "voter_data_lost"

// CodeBuildTooOld is the code of a join refused because the node's build
// implements less than the cluster's feature level: final for JoinNode.
const CodeBuildTooOld = "build_below_feature_level"

// RemoveRequest asks the leader to remove a member.
type RemoveRequest struct {
	ID string `json:"id"`
	// Force removes the member even when a majority of the voters left
	// would not answer (node.ErrQuorumAtRisk).
	Force bool `json:"force,omitempty"`
}

func (s *AdminServer) remove(w http.ResponseWriter, r *http.Request) {
	var req RemoveRequest
	if !DecodeJSON(w, r, &req) {
		return
	}
	if err := s.n.RemoveServer(req.ID, req.Force); err != nil {
		writeJSON(w, statusFor(err), errBody(err.Error()))
		return
	}
	s.members(w)
}

// TransferRequest asks the leader to hand over leadership.
type TransferRequest struct {
	To string `json:"to"`
}

func (s *AdminServer) transfer(w http.ResponseWriter, r *http.Request) {
	var req TransferRequest
	if !DecodeJSON(w, r, &req) {
		return
	}
	if err := s.n.TransferLeadership(req.To); err != nil {
		writeJSON(w, statusFor(err), errBody(err.Error()))
		return
	}
	// Wait briefly for the new leader, and for its addresses, so the answer
	// names it and the next admin call can be relayed to it.
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		if id, _, _, admin := s.n.LeaderInfo(); id != "" && id != s.n.Config().ID && admin != "" {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	s.status(w, r)
}

func (s *AdminServer) members(w http.ResponseWriter) {
	m, err := s.n.Members()
	if err != nil {
		writeJSON(w, http.StatusServiceUnavailable, errBody(err.Error()))
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"members": m})
}

func statusFor(err error) int {
	if errors.Is(err, node.ErrNotLeaderAdmin) || errors.Is(err, raft.ErrNotLeader) {
		return http.StatusMisdirectedRequest
	}
	return http.StatusConflict
}

// SnapshotMetaHeader carries the raft snapshot metadata next to its bytes.
const SnapshotMetaHeader = "X-Perpd-Snapshot-Meta"

func (s *AdminServer) snapshot(w http.ResponseWriter, r *http.Request) {
	liftDeadlines(w) // a large snapshot takes longer than the write timeout
	meta, rc, err := s.n.TakeSnapshot()
	if err != nil {
		writeJSON(w, http.StatusServiceUnavailable, errBody(err.Error()))
		return
	}
	defer rc.Close()
	mb, _ := json.Marshal(meta)
	w.Header().Set(SnapshotMetaHeader, string(mb))
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Header().Set("Content-Length", strconv.FormatInt(meta.Size, 10))
	w.WriteHeader(http.StatusOK)
	_, _ = io.Copy(w, rc)
}

// restoreLevelCheck refuses a snapshot above the cluster's feature level
// unless every member's build implements it: a restore is then a raise,
// and an older build that receives it refuses the install (or, replaying
// the raise, halts). A snapshot at or below the current level needs no
// question: the raise that brought the cluster there asked already.
func (s *AdminServer) restoreLevelCheck(ctx context.Context) func(fsm.SnapshotFacts) error {
	return func(f fsm.SnapshotFacts) error {
		var current uint32
		s.n.Machine().Read(func(st *fsm.State, _ uint64) { current = st.FeatureLevel })
		if f.FeatureLevel <= current {
			return nil
		}
		members, err := s.memberLevels(ctx)
		if err != nil {
			return err
		}
		for _, m := range members {
			if m.Error != "" {
				return fmt.Errorf("the snapshot is at feature level %d, above the cluster's %d, and member %s did not say which level its build implements (%s): "+
					"bring it back or remove it first", f.FeatureLevel, current, m.ID, m.Error)
			}
			if m.Level < f.FeatureLevel {
				return fmt.Errorf("the snapshot is at feature level %d and member %s runs a build that implements %d at most: upgrade it first",
					f.FeatureLevel, m.ID, m.Level)
			}
		}
		return nil
	}
}

func (s *AdminServer) restore(w http.ResponseWriter, r *http.Request) {
	liftDeadlines(w) // a large upload takes longer than the read timeout
	var meta raft.SnapshotMeta
	if err := json.Unmarshal([]byte(r.Header.Get(SnapshotMetaHeader)), &meta); err != nil {
		writeJSON(w, http.StatusBadRequest, errBody("missing or bad snapshot metadata header"))
		return
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, maxRestoreBytes))
	if err != nil {
		writeJSON(w, http.StatusBadRequest, errBody(err.Error()))
		return
	}
	meta.Size = int64(len(body))
	before := s.n.Raft.LastIndex()
	if err := s.n.RestoreSnapshot(&meta, bytes.NewReader(body), s.restoreLevelCheck(r.Context())); err != nil {
		writeJSON(w, statusFor(err), errBody(err.Error()))
		return
	}
	// The hash at the applied index itself, not a hash already running
	// from before the restore.
	idx := s.n.Machine().Applied()
	hash, err := s.n.StateHashAt(r.Context(), idx)
	if err != nil {
		writeJSON(w, http.StatusInternalServerError, errBody(err.Error()))
		return
	}
	view := StateView{AppliedIndex: strconv.FormatUint(idx, 10), StateHash: hash}
	if ri, rh, err := s.n.SnapshotHashAfter(before); err == nil {
		view.RestoredIndex, view.RestoredStateHash = strconv.FormatUint(ri, 10), rh
	}
	writeJSON(w, http.StatusOK, view)
}
