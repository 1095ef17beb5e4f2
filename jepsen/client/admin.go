package client

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
)

// Status is the part of GET /admin/status the harness uses.
type Status struct {
	ID     string `json:"id"`
	State  string `json:"state"`
	Leader struct {
		ID   string `json:"id"`
		Raft string `json:"raft"`
		HTTP string `json:"http"`
	} `json:"leader"`
	Members []struct {
		ID       string `json:"id"`
		Raft     string `json:"raft"`
		Suffrage string `json:"suffrage"`
	} `json:"members"`
	AppliedIndex      string `json:"appliedIndex"`
	CommitIndex       string `json:"commitIndex"`
	LastSnapshotIndex string `json:"lastSnapshotIndex"`
	StateHash         string `json:"stateHash"`
}

// State is the body of GET /admin/state.
type State struct {
	AppliedIndex string `json:"appliedIndex"`
	StateHash    string `json:"stateHash"`
}

// Applied parses the applied index.
func (s State) Applied() uint64 {
	v, _ := strconv.ParseUint(s.AppliedIndex, 10, 64)
	return v
}

// AdminStatus reads a node's status from its admin listener.
func (c *Client) AdminStatus(ctx context.Context, adminAddr, token string) (*Status, error) {
	var st Status
	return &st, c.admin(ctx, adminAddr, token, "/admin/status", &st)
}

// AdminState reads a node's applied index and state hash.
func (c *Client) AdminState(ctx context.Context, adminAddr, token string) (*State, error) {
	var st State
	return &st, c.admin(ctx, adminAddr, token, "/admin/state", &st)
}

// AdminSnapshot forces a snapshot on the node and discards the bytes: with
// small --trailing-logs it compacts the log, so a member that joins next
// must catch up from a snapshot.
func (c *Client) AdminSnapshot(ctx context.Context, adminAddr, token string) error {
	res := c.Do(ctx, Request{Method: http.MethodGet, Addr: adminAddr, Path: "/admin/snapshot",
		Header: map[string]string{"Authorization": "Bearer " + token}})
	if res.Type != "ok" {
		return fmt.Errorf("snapshot on %s: %d %s", adminAddr, res.Status, res.Error)
	}
	return nil
}

// ScriptPoint is one point of an oracle script: a price at an offset from
// the moment the script is applied.
type ScriptPoint struct {
	OffsetMs int64
	MidQ8    int64
}

// AdminOracleScript makes a feed play points (straight lines between
// them), then hold the last until unpinned. The script is a command
// through the log: every leader plays it from the same start.
func (c *Client) AdminOracleScript(ctx context.Context, adminAddr, token, feedID string, points []ScriptPoint) error {
	type point struct {
		OffsetMs string `json:"offsetMs"`
		MidQ8    string `json:"midQ8"`
	}
	body := struct {
		FeedID string  `json:"feedId"`
		Points []point `json:"points"`
		Mode   string  `json:"mode"`
	}{FeedID: feedID, Mode: "linear"}
	for _, p := range points {
		body.Points = append(body.Points, point{strconv.FormatInt(p.OffsetMs, 10), strconv.FormatInt(p.MidQ8, 10)})
	}
	res := c.Do(ctx, Request{Method: http.MethodPost, Addr: adminAddr, Path: "/admin/oracle/script",
		Header: map[string]string{"Authorization": "Bearer " + token}, Body: body, IsWrite: true})
	if res.Type != "ok" {
		return fmt.Errorf("oracle script %s on %s: %d %s %s", feedID, adminAddr, res.Status, res.Code, res.Error)
	}
	return nil
}

// AdminOraclePin holds a feed at midQ8 until unpinned or scripted
// (replacing any script), through the log like a script.
func (c *Client) AdminOraclePin(ctx context.Context, adminAddr, token, feedID string, midQ8 int64) error {
	body := struct {
		FeedID string `json:"feedId"`
		MidQ8  string `json:"midQ8"`
	}{feedID, strconv.FormatInt(midQ8, 10)}
	res := c.Do(ctx, Request{Method: http.MethodPost, Addr: adminAddr, Path: "/admin/oracle/pin",
		Header: map[string]string{"Authorization": "Bearer " + token}, Body: body, IsWrite: true})
	if res.Type != "ok" {
		return fmt.Errorf("oracle pin %s on %s: %d %s %s", feedID, adminAddr, res.Status, res.Code, res.Error)
	}
	return nil
}

// Ledger is GET /admin/ledger: the venue's books and the ledger's
// conservation check, read from one node's state at one applied index.
// Amounts are decimal strings, compared as they are.
type Ledger struct {
	AppliedIndex           string `json:"appliedIndex"`
	HouseMsat              string `json:"houseMsat"`
	InsuranceMsat          string `json:"insuranceMsat"`
	FeeRevenueMsat         string `json:"feeRevenueMsat"`
	PendingWithdrawalsMsat string `json:"pendingWithdrawalsMsat"`
	FaucetMsat             string `json:"faucetMsat"`
	// The programmes' payables and USDx's accounts: absent ("") from a
	// build before they were listed, read as 0.
	ReferralPayableMsat string `json:"referralPayableMsat"`
	PromoterPayableMsat string `json:"promoterPayableMsat"`
	USDxReserveMsat     string `json:"usdxReserveMsat"`
	USDxYieldMsat       string `json:"usdxYieldMsat"`
	USDxHedgeMsat       string `json:"usdxHedgeMsat"`
	TradersMsat         string `json:"tradersMsat"`
	CreditedMsat        string `json:"creditedMsat"`
	PaidMsat            string `json:"paidMsat"`
	Conservation        struct {
		OK    bool    `json:"ok"`
		Error *string `json:"error"`
	} `json:"conservation"`
}

// Applied parses the applied index.
func (l Ledger) Applied() uint64 {
	v, _ := strconv.ParseUint(l.AppliedIndex, 10, 64)
	return v
}

// AdminLedger reads a node's books (GET /admin/ledger).
func (c *Client) AdminLedger(ctx context.Context, adminAddr, token string) (*Ledger, error) {
	var l Ledger
	return &l, c.admin(ctx, adminAddr, token, "/admin/ledger", &l)
}

func (c *Client) admin(ctx context.Context, addr, token, path string, out any) error {
	res := c.Do(ctx, Request{Method: http.MethodGet, Addr: addr, Path: path,
		Header: map[string]string{"Authorization": "Bearer " + token}})
	if res.Type != "ok" {
		return fmt.Errorf("GET %s on %s: %d %s", path, addr, res.Status, res.Error)
	}
	return res.Decode(out)
}
