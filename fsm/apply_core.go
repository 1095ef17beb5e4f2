package fsm

import (
	"net/http"

	"github.com/perpd/perpd/fsm/wire"
)

func init() {
	register(CmdTick, applyTick)
	register(CmdNoop, applyTick)
	register(CmdNodeMeta, applyNodeMeta)
	register(CmdNodeGone, applyNodeGone)
	register(CmdGenesis, applyGenesis)
	registerTimer(func(c *Ctx) { c.St.Idem.prune(c.St.NowMs) })
}

// TickResult is the body of a tick: the FSM time after it.
type TickResult struct {
	NowMs wire.Int `json:"nowMs"`
}

// applyTick does nothing itself: advancing the clock (and so firing timers)
// happens for every entry before dispatch.
func applyTick(c *Ctx) (int, any, *wire.Refusal) {
	return http.StatusOK, TickResult{NowMs: wire.Int(c.Now())}, nil
}

func applyNodeMeta(c *Ctx) (int, any, *wire.Refusal) {
	var m NodeMeta
	if ref := c.Decode(&m); ref != nil {
		return 0, nil, ref
	}
	if m.ID == "" || m.Raft == "" {
		return 0, nil, wire.Refuse(http.StatusBadRequest, wire.CodeValidation, "node meta needs id and raft address")
	}
	c.St.Nodes[m.ID] = &m
	return http.StatusOK, struct{}{}, nil
}

// NodeGonePayload names a member that left the raft configuration.
type NodeGonePayload struct {
	ID string `cbor:"1,keyasint"`
}

// applyNodeGone drops a removed member's record, so Nodes holds only
// members (and nodes about to join), not every id that ever served.
func applyNodeGone(c *Ctx) (int, any, *wire.Refusal) {
	var p NodeGonePayload
	if ref := c.Decode(&p); ref != nil {
		return 0, nil, ref
	}
	if _, ok := c.St.Nodes[p.ID]; !ok {
		return 0, nil, wire.Refuse(http.StatusNotFound, wire.CodeNotFound, "no record of node %q", p.ID)
	}
	delete(c.St.Nodes, p.ID)
	return http.StatusOK, struct{}{}, nil
}

// GenesisPayload is proposed once by the first leader of a new cluster.
type GenesisPayload struct {
	Seed       uint64 `cbor:"1,keyasint"`
	Deployment string `cbor:"2,keyasint"`
	// Faucet sizing; zero keeps the defaults.
	FaucetGrantMsat     int64 `cbor:"3,keyasint,omitempty"`
	FaucetGrantsPerHour int   `cbor:"4,keyasint,omitempty"`
	// SignupsPerHour caps signups cluster-wide per rolling hour; zero keeps
	// access.DefaultSignupsPerHour (read by the access genesis hook).
	SignupsPerHour int `cbor:"20,keyasint,omitempty"`
	// FeatureLevel is the level a new cluster starts at: its bootstrap
	// node's build level (every member of a new cluster runs one build).
	// Clusters from before it started at 0.
	FeatureLevel uint32 `cbor:"21,keyasint,omitempty"`
}

func applyGenesis(c *Ctx) (int, any, *wire.Refusal) {
	if c.St.Genesis != nil {
		return 0, nil, wire.Refuse(http.StatusConflict, wire.CodeConflict, "cluster already has a genesis")
	}
	var p GenesisPayload
	if ref := c.Decode(&p); ref != nil {
		return 0, nil, ref
	}
	if p.FeatureLevel > FeatureLevel {
		return 0, nil, wire.Refuse(http.StatusBadRequest, wire.CodeValidation, "genesis at feature level %d; this build implements %d", p.FeatureLevel, FeatureLevel)
	}
	if p.FeatureLevel >= LevelFaucetBounded && (p.FaucetGrantMsat < 0 || p.FaucetGrantMsat > MaxFaucetGrantMsat) {
		return 0, nil, wire.Refuse(http.StatusBadRequest, wire.CodeValidation, "faucet grant %d msat outside [0, %d]", p.FaucetGrantMsat, MaxFaucetGrantMsat)
	}
	c.St.Genesis = &Genesis{TsMs: c.Now(), Seed: p.Seed, Deployment: p.Deployment}
	c.St.FeatureLevel = max(c.St.FeatureLevel, p.FeatureLevel)
	enableDomains(c.St)
	if p.FaucetGrantMsat > 0 {
		c.St.Access.Faucet.GrantMsat = p.FaucetGrantMsat
	}
	if p.FaucetGrantsPerHour > 0 {
		c.St.Access.Faucet.GrantsPerHour = p.FaucetGrantsPerHour
	}
	for _, g := range genesisHooks {
		g(c, &p)
	}
	return http.StatusOK, struct{}{}, nil
}

// genesisHooks let domains seed their state (the market catalogue, ...).
var genesisHooks []func(c *Ctx, p *GenesisPayload)
