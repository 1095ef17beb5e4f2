package checker

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/perpd/perpd/jepsen/history"
)

// balanceInput is one operation on an account's balance model.
type balanceInput struct {
	Kind   string // "deposit", "maybe-deposit" or "read"
	Amount int64  // deposits
	OpID   int
}

// balanceModel is a per-account register that deposits add to and reads
// observe. A deposit whose outcome stayed unknown may or may not have
// happened: the model branches (porcupine's nondeterministic models).
var balanceModel = porcupine.NondeterministicModel{
	Init: func() []interface{} { return []interface{}{int64(0)} },
	Step: func(state, input, output interface{}) []interface{} {
		s := state.(int64)
		in := input.(balanceInput)
		switch in.Kind {
		case "deposit":
			return []interface{}{s + in.Amount}
		case "maybe-deposit":
			return []interface{}{s, s + in.Amount}
		default:
			if out, ok := output.(int64); ok && out == s {
				return []interface{}{s}
			}
			return nil
		}
	},
	Equal: func(a, b interface{}) bool { return a.(int64) == b.(int64) },
	DescribeOperation: func(input, output interface{}) string {
		in := input.(balanceInput)
		switch in.Kind {
		case "deposit":
			return fmt.Sprintf("deposit(%d) #%d", in.Amount, in.OpID)
		case "maybe-deposit":
			return fmt.Sprintf("deposit?(%d) #%d", in.Amount, in.OpID)
		default:
			return fmt.Sprintf("read() -> %v #%d", output, in.OpID)
		}
	},
	DescribeState: func(state interface{}) string { return fmt.Sprintf("%d msat", state.(int64)) },
}

// LinearizabilityOptions tunes the check.
type LinearizabilityOptions struct {
	// TimeoutPerAccount bounds porcupine's search for one account.
	TimeoutPerAccount time.Duration
	// OutDir receives one visualization HTML per account found illegal.
	OutDir string
}

// Linearizability checks each account's history of faucet deposits and
// balance reads against the balance model. Only acknowledged reads are
// checked (a failed read observed nothing); deposits are placed from their
// invocation to their acknowledgement (or to the acknowledgement of the
// retry that settled them), and unsettled ones may happen at any time after
// their invocation, or never.
func Linearizability(ops []history.Op, opts LinearizabilityOptions) (Result, []string) {
	res := Result{Name: "linearizability", Verdict: Valid}
	writes := Writes(ops, history.FFaucet)
	grant := grantMsat(writes)
	end := int64(0)
	for _, op := range ops {
		if op.TimeNs > end {
			end = op.TimeNs
		}
	}
	perAccount := map[string][]porcupine.Operation{}
	for _, w := range writes {
		switch w.Outcome {
		case Applied:
			perAccount[w.Invoke.Account] = append(perAccount[w.Invoke.Account], porcupine.Operation{
				ClientId: w.Invoke.Process, Call: w.CallNs, Return: w.ReturnNs,
				Input: balanceInput{Kind: "deposit", Amount: w.Msat, OpID: w.Invoke.ID}})
		case Indeterminate:
			if grant == 0 {
				res.Verdict = worse(res.Verdict, Unknown)
				res.addf("%s: deposit #%d has an unknown outcome and no grant amount is known", w.Invoke.Account, w.Invoke.ID)
				continue
			}
			perAccount[w.Invoke.Account] = append(perAccount[w.Invoke.Account], porcupine.Operation{
				ClientId: w.Invoke.Process, Call: w.CallNs, Return: end + 1,
				Input: balanceInput{Kind: "maybe-deposit", Amount: grant, OpID: w.Invoke.ID}})
		}
	}
	for _, p := range history.Pairs(ops) {
		if p.Invoke.F != history.FRead || p.Done == nil || p.Done.Type != history.OK || p.Done.Msat == nil {
			continue
		}
		perAccount[p.Invoke.Account] = append(perAccount[p.Invoke.Account], porcupine.Operation{
			ClientId: p.Invoke.Process, Call: p.Invoke.TimeNs, Return: p.Done.TimeNs,
			Input: balanceInput{Kind: "read", OpID: p.Invoke.ID}, Output: *p.Done.Msat})
	}
	var accounts []string
	for a := range perAccount {
		accounts = append(accounts, a)
	}
	sort.Strings(accounts)
	var files []string
	model := balanceModel.ToModel()
	for _, a := range accounts {
		hist := compactClients(perAccount[a])
		verdict, info := porcupine.CheckOperationsVerbose(model, hist, opts.TimeoutPerAccount)
		switch verdict {
		case porcupine.Ok:
		case porcupine.Unknown:
			res.Verdict = worse(res.Verdict, Unknown)
			res.addf("%s: porcupine timed out after %v on %d operations", a, opts.TimeoutPerAccount, len(hist))
		default:
			res.Verdict = Violation
			res.addf("%s: not linearizable (%d operations)", a, len(hist))
			if opts.OutDir != "" {
				path := filepath.Join(opts.OutDir, "linearizability-"+safeName(a)+".html")
				if err := writeVisualization(model, info, path); err != nil {
					res.addf("%s: visualization: %v", a, err)
				} else {
					files = append(files, path)
				}
			}
		}
	}
	if len(accounts) == 0 {
		res.Verdict = Skipped
		res.addf("no balance operations in the history")
	}
	return res, files
}

// compactClients renumbers process ids 0..n-1 (porcupine's visualization
// draws one row per client id).
func compactClients(ops []porcupine.Operation) []porcupine.Operation {
	ids := map[int]int{}
	out := make([]porcupine.Operation, len(ops))
	for i, op := range ops {
		if _, ok := ids[op.ClientId]; !ok {
			ids[op.ClientId] = len(ids)
		}
		op.ClientId = ids[op.ClientId]
		out[i] = op
	}
	return out
}

func writeVisualization(model porcupine.Model, info porcupine.LinearizationInfo, path string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := porcupine.Visualize(model, info, f); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

func safeName(s string) string {
	b := []byte(s)
	for i, c := range b {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
			b[i] = '_'
		}
	}
	return string(b)
}
