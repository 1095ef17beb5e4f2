package httpapi_test

import (
	"fmt"
	"go/ast"
	"go/importer"
	"go/parser"
	"go/token"
	"go/types"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/perpd/perpd/cluster/clustertest"
	"github.com/perpd/perpd/fsm"
	"github.com/perpd/perpd/node"
)

// TestEveryClientCommandIsForwardable: every command type this package
// proposes is a client write, which a follower must forward to the leader
// (node.forwardable is an allow-list). Seven growth writes were missing
// from it until 2026-11-27, so two nodes of three answered them 503. The
// test reads the package's sources for fsm.Cmd* constants and looks their
// values up in the fsm package's type information.
func TestEveryClientCommandIsForwardable(t *testing.T) {
	fset := token.NewFileSet()
	entries, err := os.ReadDir(".")
	if err != nil {
		t.Fatal(err)
	}
	used := map[string]bool{}
	for _, e := range entries {
		name := e.Name()
		if !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(f, func(n ast.Node) bool {
			if sel, ok := n.(*ast.SelectorExpr); ok {
				if id, ok := sel.X.(*ast.Ident); ok && id.Name == "fsm" && strings.HasPrefix(sel.Sel.Name, "Cmd") {
					used[sel.Sel.Name] = true
				}
			}
			return true
		})
	}
	pkg, err := importer.ForCompiler(fset, "source", nil).Import("github.com/perpd/perpd/fsm")
	if err != nil {
		t.Fatal(err)
	}
	checked := 0
	for name := range used {
		c, ok := pkg.Scope().Lookup(name).(*types.Const)
		if !ok || c.Type().String() != "github.com/perpd/perpd/fsm.CmdType" {
			continue
		}
		v, _ := constantUint(c)
		checked++
		if !node.Forwardable(fsm.CmdType(v)) {
			t.Errorf("httpapi proposes fsm.%s (%d), which a follower refuses to forward: add it to node.forwardable", name, v)
		}
	}
	if checked < 20 {
		t.Fatalf("found only %d command types in httpapi's sources: the scan is broken", checked)
	}
}

func constantUint(c *types.Const) (uint64, bool) {
	var v uint64
	_, err := fmt.Sscan(c.Val().ExactString(), &v)
	return v, err == nil
}

// TestGrowthWritesOnAFollower: referral, promoter and leaderboard writes
// made on a follower reach the leader and apply (found by a review on
// 2026-11-27: they answered 503 "leader-only command").
func TestGrowthWritesOnAFollower(t *testing.T) {
	c := clustertest.Start(t, 3)
	leader := c.Leader()
	key := signupVia(t, c, leader, fmt.Sprintf("fwd-su-%d", time.Now().UnixNano()))
	for _, f := range c.Followers() {
		if st, _, body := call(t, c.HTTP(f.ID), "POST", "/v1/leaderboard/settings", key,
			fmt.Sprintf("fwd-l-%s-%d", f.ID, time.Now().UnixNano()), `{"optedOut":true}`); st != 200 {
			t.Errorf("leaderboard settings on follower %s: %d %s", f.ID, st, body)
		}
		if st, _, body := call(t, c.HTTP(f.ID), "POST", "/v1/referral/code", key,
			fmt.Sprintf("fwd-rc-%s-%d", f.ID, time.Now().UnixNano()), `{}`); st != 201 && st != 409 {
			t.Errorf("referral code on follower %s: %d %s", f.ID, st, body)
		}
	}
}
