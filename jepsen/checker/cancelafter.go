package checker

import (
	"math"

	"github.com/perpd/perpd/jepsen/history"
)

// ReasonCancelAllAfter is the reason of an order the dead-man switch
// canceled (fsm/trade.ReasonCancelAllAfter).
const ReasonCancelAllAfter = "cancel_all_after"

// What the history proves about the switch, and what it does not.
//
// The switch fires in log time, which the history does not see: a
// deadline an answer reports is log time, the history's clock is the
// harness's, and the cancel's own seq and time are not listed. So the
// checker never claims "this deadline had passed" or "this deadline had
// not passed yet". It reasons only on the order of log entries, through
// one fact: an operation's entry is committed after the operation was
// invoked and before it was acknowledged. Write C(E) for the (real) time
// entry E was committed; C grows along the log. For a call x with entry
// E_x: CallNs(x) < C(E_x) <= ReturnNs(x).
//
// Switch cancel of order o at entry E_c, with T = C(E_c):
//   - o was placed before: CallNs(place o) < T.
//   - an acknowledged cancel of o that answered "not canceled" was
//     applied after o was closed, and only the switch closed o, so
//     T <= ReturnNs(that cancel). Without one, T is unbounded.
//   - the switch was armed just before E_c (the timer runs before the
//     entry's own command): the last arm or refresh a applied before E_c
//     has CallNs(a) < T, and no disarm was applied between a and E_c. A
//     disarm d invoked after a returned (CallNs(d) > ReturnNs(a)) comes
//     after a in the log; if it came before E_c the switch was disarmed,
//     so it is E_c itself or later and T <= ReturnNs(d).
//
// So each arm that may have been applied (acknowledged or unknown) may
// have held the switch armed only within armWindow (CallNs(a), to), to
// being the earliest return of a disarm invoked after a returned (never,
// for an arm whose outcome stayed unknown). A switch cancel of o is a
// violation only when no arm's window meets o's window (CallNs(place o),
// T's upper bound]: the switch was, as far as the history proves,
// disarmed with nothing pending all the time o could have been canceled.
// A fire that merely came early or late is not judged (log time again).
//
// Also sound, and checked: an order a client cancel acknowledged as
// canceled is not canceled again by the switch; an order the switch
// canceled on one node has no fill on any node; an acknowledged arm
// answers armed with a deadline and a disarm answers disarmed; and log
// time never goes back: for acknowledged arms x and y with
// ReturnNs(x) < CallNs(y), E_x precedes E_y, so x's log time
// (deadline - timeout) is at most y's.

const never = math.MaxInt64

// armWindow is when one arm call may have held the switch armed.
type armWindow struct {
	from, to int64
	op       int
}

// caaTimeout is the timeout a call sent; -1 (counted as an arm, which
// claims less) when the history does not say.
func caaTimeout(w Write) int64 {
	if w.Invoke.TimeoutMs == nil {
		return -1
	}
	return *w.Invoke.TimeoutMs
}

// armWindows returns the windows of an account's cancel-all-after calls.
func armWindows(calls []Write) []armWindow {
	var out []armWindow
	for _, a := range calls {
		if caaTimeout(a) == 0 || a.Outcome == NotApplied {
			continue
		}
		win := armWindow{from: a.CallNs, to: never, op: a.Invoke.ID}
		if a.Outcome == Applied {
			for _, d := range calls {
				if caaTimeout(d) == 0 && d.Outcome == Applied && d.CallNs > a.ReturnNs && d.ReturnNs < win.to {
					win.to = d.ReturnNs
				}
			}
		}
		out = append(out, win)
	}
	return out
}

// checkCallAnswers checks each acknowledged call's answer against its
// request, and that log time never goes back between arms ordered in
// real time. It returns how many arms or refreshes were acknowledged.
func checkCallAnswers(res *Result, a string, calls []Write) int {
	bad := func(format string, args ...any) {
		res.Verdict = Violation
		res.addf("%s: "+format, append([]any{a}, args...)...)
	}
	type armed struct {
		call, ret, logMs int64
		op               int
	}
	var arms []armed
	for _, w := range calls {
		if w.Outcome != Applied {
			continue
		}
		t := caaTimeout(w)
		switch {
		case w.Armed == nil:
			bad("cancel-all-after op #%d was acknowledged without an answer", w.Invoke.ID)
		case t == 0 && (*w.Armed || w.DeadlineTsMs != nil):
			bad("cancel-all-after op #%d disarmed but answered armed", w.Invoke.ID)
		case t > 0 && (!*w.Armed || w.DeadlineTsMs == nil):
			bad("cancel-all-after op #%d armed %d ms but answered disarmed", w.Invoke.ID, t)
		case t > 0:
			arms = append(arms, armed{w.CallNs, w.ReturnNs, *w.DeadlineTsMs - t, w.Invoke.ID})
		}
	}
	for _, x := range arms {
		for _, y := range arms {
			if x.ret < y.call && x.logMs > y.logMs {
				bad("log time went back: cancel-all-after op #%d was applied at log time %d, op #%d invoked after it returned at %d",
					x.op, x.logMs, y.op, y.logMs)
			}
		}
	}
	return len(arms)
}

// switchCanceled maps each order some node lists as canceled by the
// switch to the first such node (by name).
func switchCanceled(tf *TraderFinal) map[string]string {
	out := map[string]string{}
	for _, node := range sortedMapKeys(tf.Nodes) {
		for _, o := range tf.Nodes[node].Orders {
			if o.Status == "canceled" && o.Reason == ReasonCancelAllAfter {
				if _, ok := out[o.OrderID]; !ok {
					out[o.OrderID] = node
				}
			}
		}
	}
	return out
}

// checkSwitchCancels judges every order the switch canceled: not also
// canceled by an acknowledged client cancel, and canceled while an arm
// may have held the switch armed. ackCanceled maps orders to the
// acknowledged client cancel that canceled them.
func checkSwitchCancels(res *Result, rep *TradingReport, a string, swc map[string]string, calls, cancels []Write,
	placed map[string]Write, ackCanceled map[string]int) {
	bad := func(format string, args ...any) {
		res.Verdict = Violation
		res.addf("%s: "+format, append([]any{a}, args...)...)
	}
	wins := armWindows(calls)
	for _, id := range sortedMapKeys(swc) {
		if op, ok := ackCanceled[id]; ok {
			bad("order %s was canceled by client cancel op #%d and again by cancel-all-after (listed on %s)", id, op, swc[id])
			continue
		}
		p, ok := placed[id]
		if !ok {
			continue // never placed: reported by checkView
		}
		lo, hi := p.CallNs, int64(never)
		for _, c := range cancels {
			if c.Invoke.Order == id && c.Outcome == Applied && c.OrderStatus == "not-canceled" && c.ReturnNs < hi {
				hi = c.ReturnNs
			}
		}
		met := false
		for _, w := range wins {
			if w.from < hi && w.to > lo {
				met = true
				break
			}
		}
		if !met {
			rep.CanceledWhileDisarmed++
			bad("order %s (placed by op #%d) was canceled by cancel-all-after (listed on %s) while the switch was provably disarmed with no arm pending",
				id, p.Invoke.ID, swc[id])
		}
	}
}

// caaWrites returns the cancel-all-after calls by account.
func caaWrites(ops []history.Op) map[string][]Write {
	_, m := byAccount(Writes(ops, history.FCancelAfter))
	return m
}
