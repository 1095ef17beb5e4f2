package fsm

import (
	"github.com/perpd/perpd/fsm/access"
	"github.com/perpd/perpd/fsm/funds"
	"github.com/perpd/perpd/fsm/ledger"
)

// Collections, decoded as the reference decoder does: null is nil, an
// empty array or map a non-nil empty one. A map the reference decodes
// into an existing map starts empty here too (NewState's maps are empty),
// so a fresh map sized from the CBOR length is the same value.

// Large maps are filled in two passes, all entries decoded first and
// then inserted: interleaving the two runs at half the speed (measured:
// 300,000 ledger balances insert in 20 ms after decoding, 55 ms during).
const mapTwoPassMin = 64

func decStrMap[V any](d *rd, val func(d *rd) V) map[string]V {
	if d.null() {
		return nil
	}
	return fillMap(d, d.mapN(), (*rd).str, val)
}

func decU64Map[V any](d *rd, val func(d *rd) V) map[uint64]V {
	if d.null() {
		return nil
	}
	return fillMap(d, d.mapN(), (*rd).u64, val)
}

func fillMap[K comparable, V any](d *rd, n int, key func(d *rd) K, val func(d *rd) V) map[K]V {
	m := make(map[K]V, n)
	if n < mapTwoPassMin {
		for range n {
			k := key(d)
			m[k] = val(d)
		}
	} else {
		type entry struct {
			k K
			v V
		}
		es := make([]entry, n)
		for i := range es {
			es[i].k = key(d)
			es[i].v = val(d)
		}
		for _, e := range es {
			m[e.k] = e.v
		}
	}
	if len(m) != n {
		failf("duplicate map key")
	}
	return m
}

func decSlice[V any](d *rd, val func(d *rd) V) []V {
	if d.null() {
		return nil
	}
	s := make([]V, d.arrN())
	for i := range s {
		s[i] = val(d)
	}
	return s
}

// decPtr decodes a pointer: null is nil, anything else a fresh value.
func decPtr[V any](val func(d *rd, v *V)) func(d *rd) *V {
	return func(d *rd) *V {
		if d.null() {
			return nil
		}
		v := new(V)
		val(d, v)
		return v
	}
}

// decStruct reads a struct's map head and calls field for each key, in
// increasing order; field fails on a key it does not know. The records
// decoded millions of times spell the same loop out (a call per field
// costs them 5%).
func decStruct(d *rd, field func(k int)) {
	n := d.mapN()
	prev := -1
	for range n {
		field(d.key(&prev))
	}
}

func (d *rd) strings() []string { return decSlice(d, (*rd).str) }
func (d *rd) u64s() []uint64    { return decSlice(d, (*rd).u64) }
func (d *rd) i64s() []int64     { return decSlice(d, (*rd).i64) }

// nested runs fn one level deeper (for the planners, which hand nested
// items to walk and Unmarshal).
func (d *rd) nested(fn func()) {
	d.depth++
	fn()
	d.depth--
}

// --- ledger ---

func decLedger(r *fastRun, d *rd, l *ledger.Ledger) {
	d.nested(func() {
		decStruct(d, func(k int) {
			switch k {
			case 1:
				r.spawn(d, func(d *rd) { l.Balances = decStrMap(d, (*rd).i64) })
			case 2:
				l.CreditedMsat = d.i64()
			case 3:
				l.PaidMsat = d.i64()
			default:
				failf("unknown Ledger field")
			}
		})
	})
}

// --- idempotency store ---

func decIdem(r *fastRun, d *rd, s *IdemStore) {
	d.nested(func() {
		decStruct(d, func(k int) {
			switch k {
			case 1:
				r.spawn(d, func(d *rd) { s.Records = decStrMap(d, decPtr(decIdemRecord)) })
			case 2:
				r.spawn(d, func(d *rd) { s.Order = d.strings() })
			case 3:
				s.Bytes = d.i64()
			default:
				failf("unknown IdemStore field")
			}
		})
	})
}

func decIdemRecord(d *rd, rec *IdemRecord) {
	n, prev := d.mapN(), -1
	for range n {
		switch d.key(&prev) {
		case 1:
			rec.ReqHash = d.bytes()
		case 2:
			rec.Status = d.i32()
		case 3:
			rec.Body = d.bytes()
		case 4:
			rec.ExpiresAtMs = d.i64()
		case 5:
			rec.Index = d.u64()
		case 6:
			rec.Tenant = d.str()
		case 7:
			rec.Evicted = d.bool()
		default:
			failf("unknown IdemRecord field")
		}
	}
}

// --- access ---

func decAccess(r *fastRun, d *rd, s *access.State) {
	d.nested(func() {
		decStruct(d, func(k int) {
			switch k {
			case 1:
				r.spawn(d, func(d *rd) { s.Accounts = decStrMap(d, decPtr(decAccessAccount)) })
			case 2:
				r.spawn(d, func(d *rd) { s.Keys = decStrMap(d, decPtr(decAccessKey)) })
			case 3:
				r.spawn(d, func(d *rd) { s.KeyByHash = decStrMap(d, (*rd).str) })
			case 4:
				// A struct value: decoded into NewState's defaults.
				decStruct(d, func(k int) {
					switch k {
					case 1:
						s.Faucet.GrantMsat = d.i64()
					case 2:
						s.Faucet.GrantsPerHour = d.int()
					default:
						failf("unknown FaucetParams field")
					}
				})
			case 5:
				s.SignupsPerHour = d.int()
			case 6:
				r.spawn(d, func(d *rd) { s.SignupTsMs = d.i64s() })
			default:
				failf("unknown access.State field")
			}
		})
	})
}

func decAccessAccount(d *rd, a *access.Account) {
	n, prev := d.mapN(), -1
	for range n {
		switch d.key(&prev) {
		case 1:
			a.ID = d.str()
		case 2:
			a.UserID = d.str()
		case 3:
			a.RailAddress = d.str()
		case 4:
			a.CreatedTsMs = d.i64()
		case 5:
			a.KeyIDs = d.strings()
		case 6:
			a.AutoSweepThresholdMsat = decPtr(func(d *rd, v *int64) { *v = d.i64() })(d)
		case 7:
			a.FaucetGrantsTsMs = d.i64s()
		default:
			failf("unknown access.Account field")
		}
	}
}

func decAccessKey(d *rd, key *access.Key) {
	n, prev := d.mapN(), -1
	for range n {
		switch d.key(&prev) {
		case 1:
			key.ID = d.str()
		case 2:
			key.AccountID = d.str()
		case 3:
			key.HashHex = d.str()
		case 4:
			key.Label = d.strSmall()
		case 5:
			key.Scopes = access.Scope(d.u8())
		case 6:
			key.CreatedTsMs = d.i64()
		case 7:
			key.LastSeenTsMs = d.i64()
		case 8:
			key.RevokedTsMs = d.i64()
		case 9:
			key.RevokedBy = d.str()
		case 10:
			key.RevokeReason = d.str()
		case 11:
			key.UAClass = d.strSmall()
		case 12:
			key.IPCountryFirst = d.strSmall()
		default:
			failf("unknown access.Key field")
		}
	}
}

// --- funds ---

// decFunds reads deposits by hand; the rest (invoices, withdrawals and
// their indexes, small at any account count) goes to the reference
// decoder, on a worker.
func decFunds(r *fastRun, d *rd, s *funds.State) {
	ref := func(v any) { r.spawn(d, func(d *rd) { d.delegate(v) }) }
	d.nested(func() {
		decStruct(d, func(k int) {
			switch k {
			case 1:
				r.spawn(d, func(d *rd) { s.Deposits = decU64Map(d, decPtr(decDeposit)) })
			case 2:
				r.spawn(d, func(d *rd) { s.ByAccount = decStrMap(d, (*rd).u64s) })
			case 3:
				r.spawn(d, func(d *rd) { s.ByRailRef = decStrMap(d, (*rd).u64) })
			case 4:
				ref(&s.Invoices)
			case 5:
				ref(&s.InvoicesByAccount)
			case 6:
				ref(&s.Withdrawals)
			case 7:
				ref(&s.WithdrawalsByAccount)
			case 8:
				ref(&s.WithdrawalByRailRef)
			case 9:
				ref(&s.WithdrawalByIdem)
			case 10:
				ref(&s.Open)
			case 11:
				ref(&s.QueuedByPath)
			case 12:
				ref(&s.KnownDests)
			case 13:
				ref(&s.UsedTokens)
			case 14:
				ref(&s.UsedOrder)
			case 15:
				ref(&s.WithdrawalByChange)
			case 16:
				ref(&s.InvoiceExpiries)
			case 17:
				ref(&s.ForgottenRefs)
			default:
				failf("unknown funds.State field")
			}
		})
	})
}

func decDeposit(d *rd, p *funds.Deposit) {
	n, prev := d.mapN(), -1
	for range n {
		switch d.key(&prev) {
		case 1:
			p.Seq = d.u64()
		case 2:
			p.AccountID = d.str()
		case 3:
			p.AmountMsat = d.i64()
		case 4:
			p.FeeMsat = d.i64()
		case 5:
			p.RailRef = d.str()
		case 6:
			p.Path = d.strSmall()
		case 7:
			p.TsMs = d.i64()
		default:
			failf("unknown funds.Deposit field")
		}
	}
}
