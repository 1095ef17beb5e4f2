package cluster

import (
	"fmt"
	"net/http"
	"sort"

	"github.com/perpd/perpd/fsm"
	"github.com/perpd/perpd/fsm/wire"
)

// FeatureLevelView is the body of GET /admin/feature-level.
type FeatureLevelView struct {
	// FeatureLevel is the cluster's level (State.FeatureLevel).
	FeatureLevel uint32 `json:"featureLevel"`
	// BuildLevel is the highest level this node's build implements.
	BuildLevel uint32 `json:"buildLevel"`
	// Nodes is the level each recorded node advertises.
	Nodes []NodeLevel `json:"nodes"`
	// Raisable is the highest level the cluster may be raised to now: the
	// lowest any member advertises.
	Raisable uint32 `json:"raisable"`
}

// NodeLevel is one node's advertised level.
type NodeLevel struct {
	ID    string `json:"id"`
	Level uint32 `json:"level"`
}

// FeatureLevelRequest raises the cluster's level.
type FeatureLevelRequest struct {
	Level uint32 `json:"level"`
}

func (s *AdminServer) featureLevels() {
	s.Handle("GET /admin/feature-level", s.featureLevel)
	s.HandleLeader("POST /admin/feature-level", s.raiseFeatureLevel)
}

func (s *AdminServer) featureView() FeatureLevelView {
	v := FeatureLevelView{BuildLevel: fsm.FeatureLevel, Nodes: []NodeLevel{}}
	s.n.Machine().Read(func(st *fsm.State, _ uint64) {
		v.FeatureLevel = st.FeatureLevel
		for id, m := range st.Nodes {
			v.Nodes = append(v.Nodes, NodeLevel{ID: id, Level: m.FeatureLevel})
		}
		v.Raisable, _, _ = st.MinAdvertisedLevel()
	})
	sort.Slice(v.Nodes, func(i, j int) bool { return v.Nodes[i].ID < v.Nodes[j].ID })
	return v
}

func (s *AdminServer) featureLevel(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, s.featureView())
}

// raiseFeatureLevel proposes CmdSetFeatureLevel after checking, on the
// leader, what the state machine checks again at apply: the level rises,
// this build implements it, and every member of the raft configuration has
// a record advertising it (a member that just joined may not have
// announced itself yet).
func (s *AdminServer) raiseFeatureLevel(w http.ResponseWriter, r *http.Request) {
	var req FeatureLevelRequest
	if !DecodeJSON(w, r, &req) {
		return
	}
	refuse := func(status int, format string, args ...any) {
		writeJSON(w, status, wire.ErrorBody{Error: fmt.Sprintf(format, args...), Code: wire.CodeConflict})
	}
	if req.Level > fsm.FeatureLevel {
		refuse(http.StatusConflict, "this build implements feature level %d at most", fsm.FeatureLevel)
		return
	}
	members, err := s.n.Members()
	if err != nil {
		writeJSON(w, http.StatusServiceUnavailable, errBody(err.Error()))
		return
	}
	levels := map[string]uint32{}
	for _, nl := range s.featureView().Nodes {
		levels[nl.ID] = nl.Level
	}
	for _, m := range members {
		l, ok := levels[m.ID]
		if !ok {
			refuse(http.StatusConflict, "member %s has not advertised its feature level yet; retry in a few seconds", m.ID)
			return
		}
		if l < req.Level {
			refuse(http.StatusConflict, "member %s runs a build that implements feature level %d at most; upgrade it first", m.ID, l)
			return
		}
	}
	res, err := s.n.ProposeInternal(fsm.CmdSetFeatureLevel, fsm.FeatureLevelPayload{Level: req.Level})
	if err != nil {
		writeJSON(w, http.StatusServiceUnavailable, errBody(err.Error()))
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(res.Status)
	_, _ = w.Write(res.Body)
}
