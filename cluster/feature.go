package cluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sort"
	"sync"
	"time"

	"github.com/perpd/perpd/fsm"
	"github.com/perpd/perpd/fsm/wire"
)

// BuildLevelPath is where a node tells a peer the highest cluster feature
// level its build implements. A build from before feature levels has no
// such route: its 404 means level 0.
const BuildLevelPath = "/internal/build-level"

// FeatureLevelView is the body of GET /admin/feature-level.
type FeatureLevelView struct {
	// FeatureLevel is the cluster's level (State.FeatureLevel).
	FeatureLevel uint32 `json:"featureLevel"`
	// BuildLevel is the highest level this node's build implements.
	BuildLevel uint32 `json:"buildLevel"`
	// Members is what each member of the raft configuration answered.
	Members []MemberLevel `json:"members"`
	// Raisable is the highest level the cluster may be raised to now: the
	// lowest any member implements (absent while a member does not answer).
	Raisable *uint32 `json:"raisable,omitempty"`
}

// MemberLevel is one member's build level, or why it is unknown.
type MemberLevel struct {
	ID    string `json:"id"`
	Level uint32 `json:"level"`
	Error string `json:"error,omitempty"`
}

// FeatureLevelRequest raises the cluster's level.
type FeatureLevelRequest struct {
	Level uint32 `json:"level"`
}

func (s *AdminServer) featureLevels() {
	s.mux.HandleFunc("GET "+BuildLevelPath, func(w http.ResponseWriter, r *http.Request) {
		if err := s.n.CheckPeer(r); err != nil {
			writeJSON(w, http.StatusUnauthorized, errBody(err.Error()))
			return
		}
		writeJSON(w, http.StatusOK, fsm.FeatureLevelResult{FeatureLevel: fsm.FeatureLevel})
	})
	s.Handle("GET /admin/feature-level", s.featureLevel)
	s.HandleLeader("POST /admin/feature-level", s.raiseFeatureLevel)
}

// memberLevels asks every member of the raft configuration for its build
// level (this node answers for itself).
func (s *AdminServer) memberLevels(ctx context.Context) ([]MemberLevel, error) {
	members, err := s.memberAdmins()
	if err != nil {
		return nil, err
	}
	out := make([]MemberLevel, len(members))
	var wg sync.WaitGroup
	for i, m := range members {
		out[i].ID = m.id
		if m.self {
			out[i].Level = fsm.FeatureLevel
			continue
		}
		wg.Add(1)
		go func(ml *MemberLevel, addr string) {
			defer wg.Done()
			level, err := s.askBuildLevel(ctx, addr)
			if err != nil {
				ml.Error = err.Error()
				return
			}
			ml.Level = level
		}(&out[i], m.admin)
	}
	wg.Wait()
	return out, nil
}

func (s *AdminServer) askBuildLevel(ctx context.Context, adminAddr string) (uint32, error) {
	status, b, err := s.askPeer(ctx, adminAddr, BuildLevelPath, peerAskTimeout)
	if err != nil {
		return 0, err
	}
	switch status {
	case http.StatusOK:
		var r fsm.FeatureLevelResult
		if err := json.Unmarshal(b, &r); err != nil {
			return 0, err
		}
		return r.FeatureLevel, nil
	case http.StatusNotFound:
		return 0, nil // a build from before feature levels
	}
	return 0, fmt.Errorf("%s answered %d", adminAddr, status)
}

// memberAddr is a member of the raft configuration and the admin address
// it advertised.
type memberAddr struct {
	id, admin string
	self      bool
}

// memberAdmins lists the raft configuration's members, sorted by id.
func (s *AdminServer) memberAdmins() ([]memberAddr, error) {
	members, err := s.n.Members()
	if err != nil {
		return nil, err
	}
	admin := map[string]string{}
	s.n.Machine().Read(func(st *fsm.State, _ uint64) {
		for id, m := range st.Nodes {
			admin[id] = m.Admin
		}
	})
	out := make([]memberAddr, len(members))
	for i, m := range members {
		out[i] = memberAddr{id: m.ID, admin: admin[m.ID], self: m.ID == s.n.Config().ID}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].id < out[j].id })
	return out, nil
}

// Peer asks' bounds. A quick question (an applied index, a build level)
// gets peerAskTimeout; a state hash at an index gets hashAskTimeout: at
// 150 MB of State under load a member's replay and encoding took longer
// than 5 s, so every check at that scale ended unanswered (the soak, run
// 3). 55 s stays inside the member's admin write timeout (60 s).
const (
	peerAskTimeout = 5 * time.Second
	hashAskTimeout = 55 * time.Second
)

// replicasTimeout bounds a whole comparison of the replicas (both rounds,
// this node's own hash too), so that /admin/replicas answers inside its
// own 60 s write timeout: the index round (up to peerAskTimeout) and the
// hash round (up to hashAskTimeout) reached 60 s between them, and the
// answer was lost whole. A variable so that tests can shorten it.
var replicasTimeout = hashAskTimeout

// askPeer GETs path on a member's admin listener under the cluster's
// peer credential and returns the status and (at most 64 KiB of) the body,
// giving up after limit (or when ctx ends).
func (s *AdminServer) askPeer(ctx context.Context, adminAddr, path string, limit time.Duration) (int, []byte, error) {
	if adminAddr == "" {
		return 0, nil, errors.New("no admin address recorded yet")
	}
	ctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.n.PeerURL(adminAddr, path), nil)
	if err != nil {
		return 0, nil, err
	}
	s.n.SetPeerAuth(req)
	resp, err := s.n.PeerClient().Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<16))
	return resp.StatusCode, b, err
}

func (s *AdminServer) featureView(ctx context.Context) (FeatureLevelView, error) {
	v := FeatureLevelView{BuildLevel: fsm.FeatureLevel}
	s.n.Machine().Read(func(st *fsm.State, _ uint64) { v.FeatureLevel = st.FeatureLevel })
	members, err := s.memberLevels(ctx)
	if err != nil {
		return v, err
	}
	v.Members = members
	min, known := ^uint32(0), true
	for _, m := range members {
		if m.Error != "" {
			known = false
		}
		min = minU32(min, m.Level)
	}
	if known && len(members) > 0 {
		v.Raisable = &min
	}
	return v, nil
}

func minU32(a, b uint32) uint32 {
	if a < b {
		return a
	}
	return b
}

func (s *AdminServer) featureLevel(w http.ResponseWriter, r *http.Request) {
	v, err := s.featureView(r.Context())
	if err != nil {
		writeJSON(w, http.StatusServiceUnavailable, errBody(err.Error()))
		return
	}
	writeJSON(w, http.StatusOK, v)
}

// raiseFeatureLevel asks every member for its build level and proposes
// CmdSetFeatureLevel with the answers; the state machine refuses the raise
// if a node it records is missing from them or implements less. The
// leader refuses first when a member does not answer or implements less.
func (s *AdminServer) raiseFeatureLevel(w http.ResponseWriter, r *http.Request) {
	var req FeatureLevelRequest
	if !DecodeJSON(w, r, &req) {
		return
	}
	refuse := func(format string, args ...any) {
		writeJSON(w, http.StatusConflict, wire.ErrorBody{Error: fmt.Sprintf(format, args...), Code: wire.CodeConflict})
	}
	if req.Level > fsm.FeatureLevel {
		refuse("this build implements feature level %d at most", fsm.FeatureLevel)
		return
	}
	members, err := s.memberLevels(r.Context())
	if err != nil {
		writeJSON(w, http.StatusServiceUnavailable, errBody(err.Error()))
		return
	}
	p := fsm.FeatureLevelPayload{Level: req.Level}
	for _, m := range members {
		if m.Error != "" {
			refuse("member %s did not say which feature level its build implements: %s", m.ID, m.Error)
			return
		}
		if m.Level < req.Level {
			refuse("member %s runs a build that implements feature level %d at most: upgrade it first", m.ID, m.Level)
			return
		}
		p.Nodes = append(p.Nodes, fsm.AdvertisedLevel{ID: m.ID, Level: m.Level})
	}
	res, err := s.n.ProposeInternal(fsm.CmdSetFeatureLevel, p)
	if err != nil {
		writeJSON(w, http.StatusServiceUnavailable, errBody(err.Error()))
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(res.Status)
	_, _ = w.Write(res.Body)
}
