package funds

import (
	"net/http"

	"github.com/perpd/perpd/fsm/ledger"
	"github.com/perpd/perpd/fsm/wire"
)

// Deposit is one credited deposit (SPEC section 2).
type Deposit struct {
	Seq        uint64 `cbor:"1,keyasint"`
	AccountID  string `cbor:"2,keyasint"`
	AmountMsat int64  `cbor:"3,keyasint"`
	FeeMsat    int64  `cbor:"4,keyasint"`
	RailRef    string `cbor:"5,keyasint"`
	Path       string `cbor:"6,keyasint"`
	TsMs       int64  `cbor:"7,keyasint"`
}

// PathFaucet is the deposit path of a testnet faucet grant.
const PathFaucet = "faucet"

// Settlement is a deposit the rail (or the faucet) says has arrived.
type Settlement struct {
	AccountID  string `cbor:"1,keyasint"`
	AmountMsat int64  `cbor:"2,keyasint"`
	FeeMsat    int64  `cbor:"3,keyasint"`
	RailRef    string `cbor:"4,keyasint"`
	Path       string `cbor:"5,keyasint"`
	// SettledTsMs is when the rail saw the payment (its clock); a Lightning
	// invoice's expiry is judged by it, not by when the entry applies.
	// 0 (older entries, the faucet) means the entry's log time.
	SettledTsMs int64 `cbor:"6,keyasint,omitempty"`
}

// MaxMoneyMsat is 21 million BTC in msat: no single amount can exceed it,
// which keeps every sum of amounts far from int64 overflow.
const MaxMoneyMsat = 21_000_000 * 100_000_000 * 1000

const msgAlreadySettled = "deposit %q was already credited"

// Settle credits a deposit: the amount enters the venue, the fee goes to
// fee revenue and the rest to the trader's free balance. seq is the shared
// record sequence number allocated by the caller.
func (s *State) Settle(l *ledger.Ledger, st Settlement, seq uint64, nowMs int64) (*Deposit, *wire.Refusal) {
	if st.AccountID == "" || st.RailRef == "" {
		return nil, wire.Refuse(http.StatusBadRequest, wire.CodeValidation, "settlement needs account and rail reference")
	}
	if st.AmountMsat <= 0 || st.FeeMsat < 0 || st.FeeMsat >= st.AmountMsat {
		return nil, wire.Refuse(http.StatusBadRequest, wire.CodeValidation, "deposit amount must be positive and exceed its fee")
	}
	if _, dup := s.ByRailRef[st.RailRef]; dup {
		return nil, wire.Refuse(http.StatusConflict, wire.CodeConflict, msgAlreadySettled, st.RailRef)
	}
	if st.AmountMsat > MaxMoneyMsat {
		return nil, wire.Refuse(http.StatusBadRequest, wire.CodeValidation, "deposit amount exceeds the bitcoin supply")
	}
	// Credit the whole amount, then move the fee: with amounts capped at
	// the bitcoin supply neither leg can overflow, so both succeed or the
	// first fails having changed nothing.
	if err := l.Credit(ledger.Free(st.AccountID), st.AmountMsat); err != nil {
		return nil, wire.Refuse(http.StatusConflict, wire.CodeConflict, "cannot credit: %v", err)
	}
	if st.FeeMsat > 0 {
		if err := l.Transfer(ledger.Free(st.AccountID), ledger.FeeRevenue, st.FeeMsat); err != nil {
			panic("deposit fee transfer after credit: " + err.Error())
		}
	}
	d := &Deposit{Seq: seq, AccountID: st.AccountID, AmountMsat: st.AmountMsat, FeeMsat: st.FeeMsat,
		RailRef: st.RailRef, Path: st.Path, TsMs: nowMs}
	s.Deposits[seq] = d
	s.ByAccount[st.AccountID] = append(s.ByAccount[st.AccountID], seq)
	s.ByRailRef[st.RailRef] = seq
	s.trimDeposits(st.AccountID, nowMs)
	return d, nil
}

// Page returns up to limit records of seqs (ascending) that are below
// beforeSeq (0 = from the newest), newest first, and the cursor for the
// next page (0 when there is none).
func Page(seqs []uint64, beforeSeq uint64, limit int) (page []uint64, next uint64) {
	end := len(seqs)
	if beforeSeq > 0 {
		// First index whose seq >= beforeSeq.
		lo, hi := 0, len(seqs)
		for lo < hi {
			mid := (lo + hi) / 2
			if seqs[mid] < beforeSeq {
				lo = mid + 1
			} else {
				hi = mid
			}
		}
		end = lo
	}
	for i := end - 1; i >= 0 && len(page) < limit; i-- {
		page = append(page, seqs[i])
	}
	if len(page) == limit && end-limit > 0 {
		next = page[len(page)-1]
	}
	return page, next
}
