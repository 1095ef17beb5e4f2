package cli

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"sort"
	"strings"

	"github.com/hashicorp/go-hclog"

	"github.com/perpd/perpd/cluster"
	"github.com/perpd/perpd/fsm"
	"github.com/perpd/perpd/fsm/market"
	"github.com/perpd/perpd/fsm/wire"
	"github.com/perpd/perpd/node"
	"github.com/perpd/perpd/node/oracle"
)

// MarketsFileEnv names an optional catalogue file (format: fsm/market's
// LoadCatalogue). Without it a new cluster lists market.DefaultCatalogue.
// Only the node that proposes the listing reads it, once per cluster.
const MarketsFileEnv = "PERPD_MARKETS_FILE"

// adminBodyMax bounds admin market and oracle request bodies (a script of
// market.OverridePointsMax points is well under it).
const adminBodyMax = 1 << 20

func init() { wirings = append(wirings, wireMarkets) }

// wireMarkets connects markets and the oracle to a node: a leader driver
// that lists the catalogue right after genesis, the oracle driver, and the
// operator routes on the admin listener.
func wireMarkets(p *Parts) error {
	catalogue, err := loadCatalogue(os.Getenv(MarketsFileEnv))
	if err != nil {
		return err
	}
	drv, err := oracle.NewDriver(oracle.DriverConfig{Logger: p.Log.Named("oracle"), Now: p.Node.ClockMs})
	if err != nil {
		return err
	}
	anchors, err := catalogueAnchors(catalogue, drv.StartPricesQ8())
	if err != nil {
		return err
	}
	genesis := fsm.MarketsGenesisPayload{Markets: catalogue, Anchors: anchors}
	log := p.Log.Named("markets")
	p.Node.AddLeaderDriver(func(n *node.Node) { listMarkets(n, genesis, log) })
	p.Node.AddLeaderDriver(drv.NodeDriver())

	a := &marketAdmin{n: p.Node}
	p.Admin.Handle("GET /admin/market/list", a.list)
	p.Admin.Handle("POST /admin/market/set", a.set)
	p.Admin.Handle("POST /admin/oracle/pin", a.pin)
	p.Admin.Handle("POST /admin/oracle/script", a.script)
	p.Admin.Handle("POST /admin/oracle/unpin", a.unpin)
	return nil
}

func loadCatalogue(path string) ([]market.Params, error) {
	if path == "" {
		return market.DefaultCatalogue(), nil
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", MarketsFileEnv, err)
	}
	defer f.Close()
	c, err := market.LoadCatalogue(f)
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", MarketsFileEnv, path, err)
	}
	return c, nil
}

// catalogueAnchors pairs each feed of the catalogue with the oracle's start
// price. A feed the oracle cannot price is refused at start: its markets
// would be listed and stale forever.
func catalogueAnchors(catalogue []market.Params, starts map[string]int64) ([]fsm.FeedAnchor, error) {
	seen := map[string]bool{}
	var out []fsm.FeedAnchor
	for _, m := range catalogue {
		if seen[m.OracleFeedID] {
			continue
		}
		seen[m.OracleFeedID] = true
		px, ok := starts[m.OracleFeedID]
		if !ok {
			return nil, fmt.Errorf("market %s: oracle feed %q has no price source (simulated feeds: %s)",
				m.MarketID, m.OracleFeedID, strings.Join(sortedKeys(starts), ", "))
		}
		out = append(out, fsm.FeedAnchor{FeedID: m.OracleFeedID, MidQ8: px})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].FeedID < out[j].FeedID })
	return out, nil
}

func sortedKeys(m map[string]int64) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// listMarkets proposes the catalogue once the cluster has its genesis and
// no market. It runs after the tick in the same leader loop, so a new
// cluster has markets within one tick of genesis; the FSM refuses a second
// listing, so a race between leaders is harmless.
func listMarkets(n *node.Node, p fsm.MarketsGenesisPayload, log hclog.Logger) {
	var need bool
	n.Machine().Read(func(st *fsm.State, _ uint64) {
		need = st.Genesis != nil && len(st.Market.MarketsByID) == 0
	})
	if !need {
		return
	}
	res, err := n.ProposeInternal(fsm.CmdMarketsGenesis, p)
	switch {
	case err != nil:
		log.Warn("listing the markets failed; retrying next tick", "err", err)
	case !res.OK():
		log.Warn("markets listing refused", "status", res.Status, "body", string(res.Body))
	default:
		log.Info("markets listed", "markets", string(res.Body))
	}
}

// marketAdmin serves the operator routes. Every change is a command through
// the log (from any node: Propose forwards to the leader), so it is
// replicated and survives leader changes; pins included, which is why the
// oracle driver reads them from the state rather than from this process.
type marketAdmin struct{ n *node.Node }

// adminInt is a decimal integer given as a JSON string ("97000") or a JSON
// integer; fractions and exponents are refused.
type adminInt int64

func (a *adminInt) UnmarshalJSON(b []byte) error {
	s := strings.TrimSpace(string(b))
	if len(s) >= 2 && s[0] == '"' && s[len(s)-1] == '"' {
		s = s[1 : len(s)-1]
	}
	v, err := wire.ParseDecimal(s)
	if err != nil {
		return fmt.Errorf("%s: %w", b, err)
	}
	*a = adminInt(v)
	return nil
}

func (a *adminInt) ptr() *int64 {
	if a == nil {
		return nil
	}
	v := int64(*a)
	return &v
}

// MarketSetRequest is the body of POST /admin/market/set: marketId and any
// fields to change, named as in the Market resource.
type MarketSetRequest struct {
	MarketID               string    `json:"marketId"`
	Status                 *string   `json:"status"`
	OracleFeedID           *string   `json:"oracleFeedId"`
	TickSizeQ8             *adminInt `json:"tickSizeQ8"`
	PriceDp                *adminInt `json:"priceDp"`
	MinOrderContracts      *adminInt `json:"minOrderContracts"`
	MaxOrderContracts      *adminInt `json:"maxOrderContracts"`
	TakerFeeQ9             *adminInt `json:"takerFeeQ9"`
	IMRateQ9               *adminInt `json:"imRateQ9"`
	MMRateQ9               *adminInt `json:"mmRateQ9"`
	BaseSpreadQ9           *adminInt `json:"baseSpreadQ9"`
	MaxLeverage            *adminInt `json:"maxLeverage"`
	OracleStalenessMs      *adminInt `json:"oracleStalenessMs"`
	MaxFundingRateHourlyQ9 *adminInt `json:"maxFundingRateHourlyQ9"`
	Underlying             *string   `json:"underlying"`
	ContractType           *string   `json:"contractType"`
	QuantoMultiplierMsat   *adminInt `json:"quantoMultiplierMsat"`
}

func (r MarketSetRequest) payload() fsm.MarketSetPayload {
	p := fsm.MarketSetPayload{MarketID: r.MarketID, OracleFeedID: r.OracleFeedID, Underlying: r.Underlying,
		TickSizeQ8: r.TickSizeQ8.ptr(), PriceDp: r.PriceDp.ptr(), MinOrderContracts: r.MinOrderContracts.ptr(),
		MaxOrderContracts: r.MaxOrderContracts.ptr(), TakerFeeQ9: r.TakerFeeQ9.ptr(), IMRateQ9: r.IMRateQ9.ptr(),
		MMRateQ9: r.MMRateQ9.ptr(), BaseSpreadQ9: r.BaseSpreadQ9.ptr(), MaxLeverage: r.MaxLeverage.ptr(),
		OracleStalenessMs: r.OracleStalenessMs.ptr(), MaxFundingRateHourlyQ9: r.MaxFundingRateHourlyQ9.ptr(),
		QuantoMultiplierMsat: r.QuantoMultiplierMsat.ptr()}
	if r.Status != nil {
		s := market.Status(*r.Status)
		p.Status = &s
	}
	if r.ContractType != nil {
		ct := market.ContractType(*r.ContractType)
		p.ContractType = &ct
	}
	return p
}

// OraclePinRequest is the body of POST /admin/oracle/pin.
type OraclePinRequest struct {
	FeedID string   `json:"feedId"`
	MidQ8  adminInt `json:"midQ8"`
}

// ScriptPointRequest is one point of a script.
type ScriptPointRequest struct {
	OffsetMs adminInt `json:"offsetMs"`
	MidQ8    adminInt `json:"midQ8"`
}

// OracleScriptRequest is the body of POST /admin/oracle/script.
type OracleScriptRequest struct {
	FeedID string               `json:"feedId"`
	Points []ScriptPointRequest `json:"points"`
	Mode   string               `json:"mode"`
}

// OracleUnpinRequest is the body of POST /admin/oracle/unpin.
type OracleUnpinRequest struct {
	FeedID string `json:"feedId"`
}

func (a *marketAdmin) set(w http.ResponseWriter, r *http.Request) {
	var req MarketSetRequest
	if decodeStrict(w, r, &req) {
		a.propose(w, r, fsm.CmdMarketSet, req.payload())
	}
}

func (a *marketAdmin) pin(w http.ResponseWriter, r *http.Request) {
	var req OraclePinRequest
	if decodeStrict(w, r, &req) {
		a.propose(w, r, fsm.CmdOraclePin, fsm.OraclePinPayload{FeedID: req.FeedID, MidQ8: int64(req.MidQ8)})
	}
}

func (a *marketAdmin) script(w http.ResponseWriter, r *http.Request) {
	var req OracleScriptRequest
	if !decodeStrict(w, r, &req) {
		return
	}
	p := fsm.OracleScriptPayload{FeedID: req.FeedID, Mode: market.OverrideMode(req.Mode)}
	for _, pt := range req.Points {
		p.Points = append(p.Points, market.OverridePoint{OffsetMs: int64(pt.OffsetMs), MidQ8: int64(pt.MidQ8)})
	}
	a.propose(w, r, fsm.CmdOracleScript, p)
}

func (a *marketAdmin) unpin(w http.ResponseWriter, r *http.Request) {
	var req OracleUnpinRequest
	if decodeStrict(w, r, &req) {
		a.propose(w, r, fsm.CmdOracleUnpin, fsm.OracleUnpinPayload{FeedID: req.FeedID})
	}
}

// propose sends an operator command through the log and relays the state
// machine's answer ({error, code} on refusal). Each request gets its own
// idempotency key, so Propose's retries across a leader change apply it
// once.
func (a *marketAdmin) propose(w http.ResponseWriter, r *http.Request, t fsm.CmdType, payload any) {
	cmd, err := fsm.NewCommand(t, payload)
	if err != nil {
		cluster.WriteJSON(w, http.StatusInternalServerError, wire.ErrorBody{Error: err.Error(), Code: wire.CodeUnavailable})
		return
	}
	var nonce [16]byte
	_, _ = rand.Read(nonce[:])
	cmd.IdemKey = "admin:" + hex.EncodeToString(nonce[:])
	cmd.ReqHash = fsm.RequestHash([]byte(r.URL.Path), cmd.Payload)
	res, err := a.n.Propose(r.Context(), cmd)
	if err != nil {
		cluster.WriteJSON(w, http.StatusServiceUnavailable, wire.ErrorBody{Error: err.Error(), Code: wire.CodeUnavailable})
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(res.Status)
	_, _ = w.Write(res.Body)
}

// decodeStrict reads a bounded JSON body, refusing unknown fields so that a
// misspelt parameter fails instead of being ignored.
func decodeStrict(w http.ResponseWriter, r *http.Request, v any) bool {
	dec := json.NewDecoder(io.LimitReader(r.Body, adminBodyMax))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		cluster.WriteJSON(w, http.StatusBadRequest, wire.ErrorBody{Error: "bad request body: " + err.Error(), Code: wire.CodeValidation})
		return false
	}
	return true
}

// AdminMarketsView is the body of GET /admin/market/list: every market
// with the figures the public view leaves out, and every feed with its last
// print and override.
type AdminMarketsView struct {
	NowMs   wire.Int          `json:"nowMs"`
	Markets []AdminMarketView `json:"markets"`
	Feeds   []AdminFeedView   `json:"feeds"`
}

// AdminMarketView is the public Market plus operator-only figures.
type AdminMarketView struct {
	fsm.MarketView
	LongOIContracts        wire.Int `json:"longOIContracts"`
	ShortOIContracts       wire.Int `json:"shortOIContracts"`
	MaxFundingRateHourlyQ9 wire.Int `json:"maxFundingRateHourlyQ9"`
	Stale                  bool     `json:"stale"`
}

// AdminPrintView is a feed's last print.
type AdminPrintView struct {
	MidQ8  wire.Int `json:"midQ8"`
	ConfQ9 wire.Int `json:"confQ9"`
	TsMs   wire.Int `json:"tsMs"`
}

// AdminFeedView is a feed as the operator sees it.
type AdminFeedView struct {
	FeedID  string          `json:"feedId"`
	Markets []string        `json:"markets"`
	Last    *AdminPrintView `json:"last"`
	// Held is a print that jumped past market.PrintJumpFactor from last
	// and waits for the next print to confirm it: the markets still trade
	// at last, and the next print near it moves them there.
	Held     *AdminPrintView   `json:"held"`
	Override *fsm.OverrideView `json:"override"`
}

func (a *marketAdmin) list(w http.ResponseWriter, r *http.Request) {
	var out AdminMarketsView
	a.n.Machine().Read(func(st *fsm.State, _ uint64) { out = adminMarkets(st) })
	cluster.WriteJSON(w, http.StatusOK, out)
}

// adminMarkets renders the operator's view of the market book.
func adminMarkets(st *fsm.State) AdminMarketsView {
	out := AdminMarketsView{Markets: []AdminMarketView{}, Feeds: []AdminFeedView{}}
	b := st.Market
	out.NowMs = wire.Int(st.NowMs)
	for _, v := range b.Markets() {
		out.Markets = append(out.Markets, AdminMarketView{MarketView: fsm.NewMarketView(v),
			LongOIContracts: wire.Int(v.LongOIContracts), ShortOIContracts: wire.Int(v.ShortOIContracts),
			MaxFundingRateHourlyQ9: wire.Int(v.MaxFundingRateHourlyQ9), Stale: b.IsStale(v.MarketID, st.NowMs)})
	}
	for _, id := range b.FeedIDs() {
		f := AdminFeedView{FeedID: id, Markets: append([]string{}, b.FeedsByID[id].MarketIDs...),
			Override: fsm.NewFeedOverrideView(b, id).Override}
		if p, ok := b.FeedLast(id); ok {
			f.Last = &AdminPrintView{MidQ8: wire.Int(p.MidQ8), ConfQ9: wire.Int(p.ConfQ9), TsMs: wire.Int(p.TsMs)}
		}
		if p, ok := b.FeedHeld(id); ok {
			f.Held = &AdminPrintView{MidQ8: wire.Int(p.MidQ8), ConfQ9: wire.Int(p.ConfQ9), TsMs: wire.Int(p.TsMs)}
		}
		out.Feeds = append(out.Feeds, f)
	}
	return out
}
