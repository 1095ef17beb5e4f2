package httpapi

import (
	"encoding/json"
	"reflect"
	"sort"
	"strings"
	"testing"

	"github.com/perpd/perpd/fsm/usdx"
)

// jsonKeys returns the JSON field names of a struct type (all of them,
// optional ones included).
func jsonKeys(t reflect.Type) []string {
	var out []string
	for i := 0; i < t.NumField(); i++ {
		name, _, _ := strings.Cut(t.Field(i).Tag.Get("json"), ",")
		if name != "" && name != "-" {
			out = append(out, name)
		}
	}
	sort.Strings(out)
	return out
}

func fields(s string) []string {
	out := strings.Fields(strings.NewReplacer(",", " ", ";", " ").Replace(s))
	sort.Strings(out)
	return out
}

// TestUsdxResourcesCarrySpecFields compares every USDx resource with the
// field lists of SPEC section 2 (and Account's USDx fields): each SPEC
// field is present under its exact name. Additions beyond SPEC are listed
// here explicitly, so a new one is a decision, not an accident.
func TestUsdxResourcesCarrySpecFields(t *testing.T) {
	for _, tc := range []struct {
		name  string
		typ   any
		spec  string
		extra string
	}{
		{"public state", usdx.PublicView{}, "tsMs params supply hedge backingIdentityHolds reserveMsat reserveTargetMsat reserveFloorMsat markQ8 oracleFresh mintedLastHour redeemedLastHour capacity mintsHalted mintsHaltedReason lastAttestation features staking tokenIdentifier freezeCount frozenCount", ""},
		{"params", usdx.ParamsView{}, "baseFeeQ9 spreadQ9 reserveTargetQ9 reserveFloorQ9 dynFeeCurve hardCap quoteTtlMs mintVelocityQ9PerH mintVelocityFloor requoteToleranceQ9", ""},
		{"curve point", usdx.CurvePointView{}, "xQ9 yQ9", ""},
		{"hedge", usdx.HedgeView{}, "contracts entryPriceQ8 marginMsat", ""},
		{"capacity", usdx.CapacityView{}, "headroom limit perLimit", ""},
		{"perLimit", usdx.PerLimitView{}, "organic_oi hard_cap oi_cap skew velocity", ""},
		{"attestation", usdx.AttestationView{}, "asOfTsMs issuerSupply issuerIssued issuerBurned issuerCustody ledgerSupply ledgerCustody ok", ""},
		{"features", usdx.FeaturesView{}, "mint redeem stake withdraw", ""},
		{"staking", usdx.StakingView{}, "sharePriceQ9 staked susdxSupply yieldEscrowMsat uncoveredShortfallMsat unstakeCooldownMs lastWaterfall", ""},
		{"quote", usdx.QuoteView{}, "quoteId side usdx contracts priceQ8 spreadQ9 feeMsat dynFeeMsat impactMsat satsMsat expiresAtMs oracleTsMs", ""},
		{"saga", usdx.SagaView{}, "sagaId side state usdx contracts satsMsat queuedReason queuedSinceMs createdTsMs updatedTsMs", ""},
		{"waterfall", usdx.WaterfallView{}, "boundaryTsMs markQ8 flowMsat toReserveMsat toStakersMsat overflowMsat shortfallMsat markdown yieldMinted sharePriceQ9Before sharePriceQ9After", "fromReserveMsat fromEscrowMsat uncoveredMsat repaidMsat"},
		{"history", usdx.HistoryPage{}, "waterfalls nextBeforeTsMs", ""},
		{"withdrawal", usdx.WithdrawalView{}, "withdrawalId usdx sparkAddress state issuerRef requestedTsMs paidTsMs", ""},
		{"withdrawals", usdx.WithdrawalsView{}, "withdrawals", ""},
		{"deposit address", DepositAddressView{}, "address accountNumber tokenIdentifier", ""},
		{"freeze entry", usdx.FreezeView{}, "seq opId sparkAddress action state reason issuerRef impactedMicro tsMs appliedTsMs recovered", ""},
		{"freezes", usdx.FreezesView{}, "freezes frozen", ""},
		{"activity", usdx.ActivityPage{}, "activity nextBeforeSeq", ""},
		{"cooling", usdx.CoolingView{}, "unstakeId susdx releaseAtMs", ""},
		{"409 body", USDxRefusalBody{}, "error code reason headroom limit quote", ""},
	} {
		want := fields(tc.spec + " " + tc.extra)
		if got := jsonKeys(reflect.TypeOf(tc.typ)); !reflect.DeepEqual(got, want) {
			t.Errorf("%s: fields %v, SPEC (and listed additions) %v", tc.name, got, want)
		}
	}
	acct := jsonKeys(reflect.TypeOf(AccountView{}))
	for _, f := range fields("usdx usdxPending susdx susdxCooling cooling") {
		if i := sort.SearchStrings(acct, f); i == len(acct) || acct[i] != f {
			t.Errorf("Account lacks %s", f)
		}
	}
	// Wire types: amounts of USDx are strings; counters are numbers.
	b, _ := json.Marshal(usdx.PublicView{})
	var m map[string]any
	_ = json.Unmarshal(b, &m)
	if _, ok := m["supply"].(string); !ok {
		t.Error("supply must be a string")
	}
	if _, ok := m["freezeCount"].(float64); !ok {
		t.Error("freezeCount must be a JSON number")
	}
}
