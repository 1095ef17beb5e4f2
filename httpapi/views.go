package httpapi

import (
	"github.com/perpd/perpd/fsm/usdx"
	"github.com/perpd/perpd/fsm/wire"
)

// DepositFeeView is one entry of Account.depositFees.
type DepositFeeView struct {
	Path                   string    `json:"path" enum:"spark,l1,lightning"`
	Description            string    `json:"description"`
	RecommendedMinimumSats *wire.Int `json:"recommendedMinimumSats,omitempty" unit:"sats"`
}

// AccountView is the Account resource of SPEC section 2, with its USDx
// fields (whole units as decimal strings).
type AccountView struct {
	AccountID              string             `json:"accountId"`
	UserID                 string             `json:"userId"`
	RailAddress            string             `json:"railAddress"`
	AutoSweepThresholdMsat *wire.Int          `json:"autoSweepThresholdMsat" unit:"msat"`
	FreeMsat               wire.Int           `json:"freeMsat" unit:"msat"`
	ReservedMsat           wire.Int           `json:"reservedMsat" unit:"msat"`
	DepositFees            []DepositFeeView   `json:"depositFees"`
	Usdx                   *string            `json:"usdx,omitempty" doc:"USDx held (whole units)"`
	UsdxPending            *string            `json:"usdxPending,omitempty" doc:"USDx in queued redemptions"`
	Susdx                  *string            `json:"susdx,omitempty" doc:"sUSDx held (not cooling)"`
	SusdxCooling           *string            `json:"susdxCooling,omitempty" doc:"sUSDx cooling after unstakes"`
	Cooling                []usdx.CoolingView `json:"cooling,omitempty"`
}

// SessionView is one key in the sessions list; never its value.
type SessionView struct {
	KeyID          string    `json:"keyId"`
	AccountID      string    `json:"accountId"`
	Label          string    `json:"label"`
	Scopes         []string  `json:"scopes" enum:"read,trade,withdraw,admin-sessions"`
	UAClass        *string   `json:"uaClass"`
	IPCountryFirst *string   `json:"ipCountryFirst"`
	CreatedTsMs    wire.Int  `json:"createdTsMs" unit:"ms"`
	LastSeenTsMs   *wire.Int `json:"lastSeenTsMs" unit:"ms"`
	RevokedTsMs    *wire.Int `json:"revokedTsMs" unit:"ms"`
	RevokedBy      *string   `json:"revokedBy"`
	RevokeReason   *string   `json:"revokeReason"`
	Current        wire.Int  `json:"current" unit:"int" doc:"1 for the key making this call, 0 for the others"`
}

// SessionsView is the sessions list result.
type SessionsView struct {
	TsMs     wire.Int      `json:"tsMs" unit:"ms"`
	Sessions []SessionView `json:"sessions"`
}

// BudgetView is one budget of the limits result.
type BudgetView struct {
	LimitPerMin int `json:"limitPerMin"`
	Burst       int `json:"burst"`
	Remaining   int `json:"remaining"`
}

// BudgetsView holds the three independent budgets.
type BudgetsView struct {
	Read     BudgetView `json:"read"`
	Order    BudgetView `json:"order"`
	Withdraw BudgetView `json:"withdraw"`
}

// LimitsView is the limits result.
type LimitsView struct {
	Tier    string      `json:"tier"`
	Budgets BudgetsView `json:"budgets"`
}

// DepositsPage is a page of deposits, newest first.
type DepositsPage struct {
	Deposits      []depositView `json:"deposits"`
	NextBeforeSeq *wire.Int     `json:"nextBeforeSeq" unit:"seq"`
}

func strPtr(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

func msPtr(v int64) *wire.Int {
	if v == 0 {
		return nil
	}
	return wire.Ptr(v)
}
