package fsm

import (
	"fmt"
	"net/http"
	"sort"

	"github.com/perpd/perpd/fsm/wire"
)

// Feature levels: how a change of apply behaviour reaches a running
// cluster without replicas diverging during a rolling upgrade.
//
// The cluster's level (State.FeatureLevel) starts at 0 and only rises, by
// CmdSetFeatureLevel, which an operator proposes once every member runs a
// build that implements the new level. Each node advertises the highest
// level its build implements in its NodeMeta record (FeatureLevel below);
// the command is refused while any recorded member advertises less. A
// change of apply behaviour ships gated: `if c.St.FeatureLevel >= N { new }
// else { old }` with FeatureLevel raised to N in the same release, so an
// upgraded replica applies old entries exactly as the old build did, and
// the new behaviour starts at the same log index on every replica. The
// golden log (testdata/golden) replays every command type of a release to
// a recorded state hash, so an ungated change fails CI.
//
// Levels of this build:
//
//	0: the behaviour of every release before feature levels existed.
//	1: feature levels themselves (CmdSetFeatureLevel, advertised levels);
//	   no apply behaviour is gated on it yet.
const FeatureLevel uint32 = 1

// CmdSetFeatureLevel raises the cluster's feature level (admin).
const CmdSetFeatureLevel CmdType = 7

func init() { register(CmdSetFeatureLevel, applySetFeatureLevel) }

// FeatureLevelPayload asks for a new cluster feature level.
type FeatureLevelPayload struct {
	Level uint32 `cbor:"1,keyasint"`
}

// FeatureLevelResult is the cluster's level after the command.
type FeatureLevelResult struct {
	FeatureLevel uint32 `json:"featureLevel"`
}

// MinAdvertisedLevel is the lowest level any recorded node advertises and
// the nodes that advertise it, sorted (a record from a build before
// feature levels advertises 0). ok is false when no node is recorded.
func (s *State) MinAdvertisedLevel() (level uint32, nodes []string, ok bool) {
	for id, m := range s.Nodes {
		switch {
		case !ok || m.FeatureLevel < level:
			level, nodes, ok = m.FeatureLevel, []string{id}, true
		case m.FeatureLevel == level:
			nodes = append(nodes, id)
		}
	}
	sort.Strings(nodes)
	return level, nodes, ok
}

// applySetFeatureLevel raises the level. It is refused when the level does
// not rise, or when a recorded node advertises less. A replica whose own
// build does not implement the level cannot apply what follows correctly,
// so it stops (fail-stop) instead of diverging: that only happens when an
// old build replays a log raised without it (it was not recorded when the
// level rose, or joined afterwards), and the fix is to run the new build.
func applySetFeatureLevel(c *Ctx) (int, any, *wire.Refusal) {
	var p FeatureLevelPayload
	if ref := c.Decode(&p); ref != nil {
		return 0, nil, ref
	}
	if p.Level <= c.St.FeatureLevel {
		return 0, nil, wire.Refuse(http.StatusConflict, wire.CodeConflict,
			"the cluster is at feature level %d; levels only rise", c.St.FeatureLevel)
	}
	min, nodes, ok := c.St.MinAdvertisedLevel()
	if !ok {
		return 0, nil, wire.Refuse(http.StatusConflict, wire.CodeConflict, "no node has advertised its feature level yet")
	}
	if p.Level > min {
		return 0, nil, wire.Refuse(http.StatusConflict, wire.CodeConflict,
			"node(s) %v run a build that implements feature level %d at most; upgrade them first", nodes, min)
	}
	if p.Level > FeatureLevel {
		panic(fmt.Sprintf("the log raises the feature level to %d and this build implements %d at most: run a newer build", p.Level, FeatureLevel))
	}
	c.St.FeatureLevel = p.Level
	return http.StatusOK, FeatureLevelResult{FeatureLevel: p.Level}, nil
}
