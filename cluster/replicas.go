package cluster

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"sync"
)

// Replicas that agree. Every replica must reach the same state at the same
// log index; a library bug (hashicorp/raft#695, node/heartbeat.go) once
// made one apply an entry the others never saw, and nothing a client reads
// shows that until balances differ. GET /admin/replicas asks every member
// for its applied index, then for its state hash at the lowest of them,
// and says whether they agree: the operator's check after an upgrade or
// an incident; the leader also runs it on a schedule (replicawatch.go). A
// replica that disagrees is wiped and re-joined from a snapshot
// (docs/decisions.md).

// StateAtPath is where a member answers a peer with its applied index, and
// its state hash at ?index=N (N at most its applied index).
const StateAtPath = "/internal/state-at"

// StateAtView is the body of GET /internal/state-at.
type StateAtView struct {
	AppliedIndex string `json:"appliedIndex"`
	Index        string `json:"index,omitempty"`
	StateHash    string `json:"stateHash,omitempty"`
}

// ReplicasView is the body of GET /admin/replicas.
type ReplicasView struct {
	// Index is where the members were compared: the lowest applied index
	// among those that answered.
	Index string `json:"index"`
	// Agree is true when every member answered with one hash.
	Agree   bool            `json:"agree"`
	Members []ReplicaMember `json:"members"`
}

// ReplicaMember is one member's answer, or why there is none.
type ReplicaMember struct {
	ID           string `json:"id"`
	AppliedIndex string `json:"appliedIndex,omitempty"`
	StateHash    string `json:"stateHash,omitempty"`
	Error        string `json:"error,omitempty"`
}

func (s *AdminServer) replicaRoutes() {
	s.mux.HandleFunc("GET "+StateAtPath, func(w http.ResponseWriter, r *http.Request) {
		if err := s.n.CheckPeer(r); err != nil {
			writeJSON(w, http.StatusUnauthorized, errBody(err.Error()))
			return
		}
		v, status, err := s.stateAt(r.Context(), r.URL.Query().Get("index"))
		if err != nil {
			writeJSON(w, status, errBody(err.Error()))
			return
		}
		writeJSON(w, http.StatusOK, v)
	})
	s.Handle("GET /admin/replicas", func(w http.ResponseWriter, r *http.Request) {
		v, err := s.replicas(r.Context())
		if err != nil {
			writeJSON(w, http.StatusServiceUnavailable, errBody(err.Error()))
			return
		}
		writeJSON(w, http.StatusOK, v)
	})
}

// stateAt answers StateAtPath: the applied index, and with index the hash
// there. The status goes with the error.
func (s *AdminServer) stateAt(ctx context.Context, index string) (StateAtView, int, error) {
	v := StateAtView{AppliedIndex: strconv.FormatUint(s.n.Machine().Applied(), 10)}
	if index == "" {
		return v, 0, nil
	}
	i, err := strconv.ParseUint(index, 10, 64)
	if err != nil || i == 0 {
		return v, http.StatusBadRequest, fmt.Errorf("index %q: a log index from 1", index)
	}
	h, err := s.n.StateHashAt(ctx, i)
	if err != nil {
		return v, http.StatusConflict, err
	}
	v.Index, v.StateHash = index, h
	return v, 0, nil
}

// replicas compares every member at the lowest applied index among them.
func (s *AdminServer) replicas(ctx context.Context) (ReplicasView, error) {
	members, err := s.memberAdmins()
	if err != nil {
		return ReplicasView{}, err
	}
	return compareReplicas(ctx, members, s.askStateAt), nil
}

// stateAsker asks one member GET StateAtPath, with ?index= when index is
// not empty.
type stateAsker func(ctx context.Context, m memberAddr, index string) (StateAtView, error)

// compareReplicas asks every member for its applied index, then for its
// state hash at the lowest of them, each round to all members at once. A
// member that fails to answer is not asked again; its error is its answer.
// Both rounds end within replicasTimeout.
func compareReplicas(ctx context.Context, members []memberAddr, ask stateAsker) ReplicasView {
	ctx, cancel := context.WithTimeout(ctx, replicasTimeout)
	defer cancel()
	out := make([]ReplicaMember, len(members))
	round := func(query string, each func(i int, v StateAtView)) {
		var wg sync.WaitGroup
		for i, m := range members {
			if out[i].Error != "" {
				continue
			}
			wg.Add(1)
			go func(i int, m memberAddr) {
				defer wg.Done()
				v, err := ask(ctx, m, query)
				if err != nil {
					out[i].Error = err.Error()
					return
				}
				each(i, v)
			}(i, m)
		}
		wg.Wait()
	}
	for i, m := range members {
		out[i].ID = m.id
	}
	round("", func(i int, v StateAtView) { out[i].AppliedIndex = v.AppliedIndex })
	index := lowestApplied(out)
	if index == 0 {
		return ReplicasView{Members: out}
	}
	at := strconv.FormatUint(index, 10)
	round(at, func(i int, v StateAtView) { out[i].StateHash = v.StateHash })
	return ReplicasView{Index: at, Agree: agree(out), Members: out}
}

// askStateAt asks one member (this node answers for itself).
func (s *AdminServer) askStateAt(ctx context.Context, m memberAddr, index string) (StateAtView, error) {
	if m.self {
		// The hash gives up when ctx ends (node/statehash.go): a caller's
		// bound holds for every member, this one too.
		v, _, err := s.stateAt(ctx, index)
		return v, err
	}
	path, limit := StateAtPath, peerAskTimeout
	if index != "" {
		path, limit = path+"?index="+index, hashAskTimeout
	}
	status, b, err := s.askPeer(ctx, m.admin, path, limit)
	if err != nil {
		return StateAtView{}, err
	}
	var v StateAtView
	if status != http.StatusOK {
		var e struct{ Error string }
		_ = json.Unmarshal(b, &e)
		return v, fmt.Errorf("%s answered %d: %s", m.admin, status, e.Error)
	}
	return v, json.Unmarshal(b, &v)
}

// lowestApplied is the lowest applied index among the members that
// answered (0 when none did).
func lowestApplied(ms []ReplicaMember) uint64 {
	var low uint64
	for _, m := range ms {
		if m.Error != "" {
			continue
		}
		if i, err := strconv.ParseUint(m.AppliedIndex, 10, 64); err == nil && (low == 0 || i < low) {
			low = i
		}
	}
	return low
}

// agree reports whether every member answered with one hash.
func agree(ms []ReplicaMember) bool {
	for _, m := range ms {
		if m.Error != "" || m.StateHash == "" || m.StateHash != ms[0].StateHash {
			return false
		}
	}
	return len(ms) > 0
}
