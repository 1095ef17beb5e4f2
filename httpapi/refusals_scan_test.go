package httpapi

import (
	"encoding/json"
	"fmt"
	"go/ast"
	"go/constant"
	"go/importer"
	"go/parser"
	"go/token"
	"go/types"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/perpd/perpd/fsm/wire"
)

// The refusal scan: which (status, code) answers each route's handler can
// give, read from the source. It type-checks the module's httpapi, wsapi
// and fsm packages (their dependencies from the build's export data),
// builds a call graph of their functions, and collects every refusal a
// handler reaches: a wire.Refuse or fail with a constant status and code,
// a helper with a fixed status (trade's refuse, usdx's bad and conflict)
// called with a constant code, and a body literal with a constant Code.
// A handler that proposes a command (it names an fsm.Cmd constant)
// reaches that command's apply function and the machine's own refusals
// of any command (dispatch, the idempotency store, a halted replica).
//
// What it cannot see it misses: calls through interfaces and function
// values (other than the command table), and codes computed at run time.
// So it proves "at least these", which is what the description must list.

// scanPkgPrefixes are the packages whose source is scanned.
var scanPkgPrefixes = []string{"github.com/perpd/perpd/httpapi", "github.com/perpd/perpd/wsapi", "github.com/perpd/perpd/fsm"}

func scanned(path string) bool {
	for _, p := range scanPkgPrefixes {
		if path == p || strings.HasPrefix(path, p+"/") {
			return true
		}
	}
	return false
}

// refusalPair is one possible refusal; status 0 means "some status" (a
// body literal whose status is set elsewhere).
type refusalPair struct {
	Status int
	Code   string
}

func (p refusalPair) String() string { return fmt.Sprintf("%d %s", p.Status, p.Code) }

// scanNode is a function (or a command) of the call graph.
type scanNode struct {
	edges map[string]bool
	pairs map[refusalPair]bool
	// codeOnly are the constant codes passed to callees without a status;
	// resolved against each callee's fixed statuses.
	codeOnly map[string]map[string]bool // callee -> codes
	// fixed are the constant statuses this function passes to a refusal
	// constructor together with a code it did not fix (a helper such as
	// trade's refuse(code, ...)).
	fixed map[int]bool
	// refCodes are all constant codes the function names (for a helper
	// called with a code held in a variable).
	refCodes map[string]bool
	// varCodeCalls are callees called with a non-constant code.
	varCodeCalls map[string]bool
	// carrier: a refusal can leave this function (see isCarrier).
	carrier bool
}

func newScanNode() *scanNode {
	return &scanNode{edges: map[string]bool{}, pairs: map[refusalPair]bool{}, codeOnly: map[string]map[string]bool{},
		fixed: map[int]bool{}, refCodes: map[string]bool{}, varCodeCalls: map[string]bool{}}
}

type refusalScan struct {
	nodes map[string]*scanNode
	// routes maps "METHOD /path" (gin syntax) to its handler's node.
	routes map[string]string
}

var isCode = func() map[string]bool {
	m := map[string]bool{}
	for _, c := range wire.AllCodes {
		m[c] = true
	}
	return m
}()

type listedPkg struct {
	ImportPath string
	Dir        string
	GoFiles    []string
	Export     string
	ImportMap  map[string]string
}

// scanRefusals loads and scans the packages.
func scanRefusals(t testing.TB) *refusalScan {
	t.Helper()
	cmd := exec.Command("go", "list", "-deps", "-export", "-json", ".")
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		t.Skipf("go list: %v", err)
	}
	dec := json.NewDecoder(strings.NewReader(string(out)))
	pkgs := map[string]*listedPkg{}
	var order []string
	for {
		var p listedPkg
		if err := dec.Decode(&p); err == io.EOF {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		pkgs[p.ImportPath] = &p
		order = append(order, p.ImportPath)
	}
	fset := token.NewFileSet()
	imp := importer.ForCompiler(fset, "gc", func(path string) (io.ReadCloser, error) {
		p := pkgs[path]
		if p == nil || p.Export == "" {
			return nil, fmt.Errorf("no export data for %s", path)
		}
		return os.Open(p.Export)
	}).(types.ImporterFrom)
	s := &refusalScan{nodes: map[string]*scanNode{}, routes: map[string]string{}}
	cmdHandlers := map[string][]ast.Expr{} // fsm.Cmd const -> registered handler expressions
	type checked struct {
		files []*ast.File
		info  *types.Info
	}
	var all []checked
	for _, path := range order {
		if !scanned(path) {
			continue
		}
		p := pkgs[path]
		var files []*ast.File
		for _, f := range p.GoFiles {
			af, err := parser.ParseFile(fset, filepath.Join(p.Dir, f), nil, 0)
			if err != nil {
				t.Fatal(err)
			}
			files = append(files, af)
		}
		info := &types.Info{Types: map[ast.Expr]types.TypeAndValue{}, Defs: map[*ast.Ident]types.Object{}, Uses: map[*ast.Ident]types.Object{}}
		conf := types.Config{Importer: importerMap{imp, p.ImportMap}, Error: func(error) {}}
		if _, err := conf.Check(path, fset, files, info); err != nil {
			t.Fatalf("type-check %s: %v", path, err)
		}
		all = append(all, checked{files, info})
	}
	for _, c := range all {
		for _, f := range c.files {
			for _, d := range f.Decls {
				fd, ok := d.(*ast.FuncDecl)
				if !ok || fd.Body == nil {
					continue
				}
				obj, _ := c.info.Defs[fd.Name].(*types.Func)
				if obj == nil {
					continue
				}
				key := funcKey(obj)
				s.scanBody(key, fd.Body, c.info)
				s.nodes[key].carrier = isCarrier(obj)
			}
			// The route table: Route literals with their handler; the
			// command table: register(CmdX, handler) calls.
			ast.Inspect(f, func(n ast.Node) bool {
				switch n := n.(type) {
				case *ast.CompositeLit:
					if !isRouteType(c.info.Types[n].Type) {
						return true
					}
					var method, path string
					var handler ast.Expr
					for _, e := range n.Elts {
						kv, ok := e.(*ast.KeyValueExpr)
						if !ok {
							continue
						}
						switch kv.Key.(*ast.Ident).Name {
						case "Method":
							method = constString(c.info, kv.Value)
						case "Path":
							path = constString(c.info, kv.Value)
						case "Handler":
							handler = kv.Value
						}
					}
					if method != "" && path != "" && handler != nil {
						key := "route:" + method + " " + path
						s.scanBody(key, handler, c.info)
						s.nodes[key].carrier = true
						s.routes[method+" "+path] = key
					}
				case *ast.CallExpr:
					fn, ok := n.Fun.(*ast.Ident)
					if !ok || (fn.Name != "register" && fn.Name != "registerDomain") || len(n.Args) != 2 {
						return true
					}
					if obj, ok := c.info.Uses[fn].(*types.Func); !ok || obj.Pkg().Path() != "github.com/perpd/perpd/fsm" {
						return true
					}
					if id := cmdConst(c.info, n.Args[0]); id != "" {
						cmdHandlers[id] = append(cmdHandlers[id], n.Args[1])
						key := "cmd:" + id
						s.scanBody(key, n.Args[1], c.info)
						// The wrapper (registerDomain's level check) and
						// the machine's refusals of any command.
						nd := s.nodes[key]
						nd.carrier = true
						nd.edges[funcKey(c.info.Uses[fn].(*types.Func))] = true
						nd.edges["(*github.com/perpd/perpd/fsm.Machine).dispatch"] = true
						nd.edges["github.com/perpd/perpd/fsm.haltedResult"] = true
					}
				}
				return true
			})
		}
	}
	// registerDomain's closure refuses any command of the domains below
	// their level: the command node names it explicitly.
	if nd := s.nodes["github.com/perpd/perpd/fsm.registerDomain"]; nd != nil {
		nd.carrier = true
	}
	return s
}

// isCarrier reports whether a refusal made in f (or in a carrier it
// calls) can reach the client: f writes the answer itself (it takes the
// gin context or a response writer, or makes a handler), or it returns a
// *wire.Refusal or an *fsm.Result. A refusal
// a function keeps to itself (a read view that computes why mints are
// halted, a hedge order that panics on one) never does.
func isCarrier(f *types.Func) bool {
	sig := f.Type().(*types.Signature)
	named := func(t types.Type) string {
		if p, ok := t.(*types.Pointer); ok {
			t = p.Elem()
		}
		if n, ok := t.(*types.Named); ok && n.Obj().Pkg() != nil {
			return n.Obj().Pkg().Path() + "." + n.Obj().Name()
		}
		return ""
	}
	// A function that writes an answer (it has the request's context or
	// writer) or makes a handler.
	for i := 0; i < sig.Params().Len(); i++ {
		switch named(sig.Params().At(i).Type()) {
		case "github.com/gin-gonic/gin.Context", "net/http.ResponseWriter":
			return true
		}
	}
	res := sig.Results()
	for i := 0; i < res.Len(); i++ {
		if named(res.At(i).Type()) == "github.com/gin-gonic/gin.HandlerFunc" {
			return true
		}
		t := res.At(i).Type()
		if p, ok := t.(*types.Pointer); ok {
			t = p.Elem()
		}
		if n, ok := t.(*types.Named); ok && n.Obj().Pkg() != nil {
			switch n.Obj().Pkg().Path() + "." + n.Obj().Name() {
			case "github.com/perpd/perpd/fsm/wire.Refusal", "github.com/perpd/perpd/fsm.Result":
				return true
			}
		}
	}
	return false
}

// importerMap resolves a package's import paths through its ImportMap.
type importerMap struct {
	imp types.ImporterFrom
	m   map[string]string
}

func (i importerMap) Import(path string) (*types.Package, error) {
	return i.ImportFrom(path, "", 0)
}

func (i importerMap) ImportFrom(path, dir string, mode types.ImportMode) (*types.Package, error) {
	if p, ok := i.m[path]; ok {
		path = p
	}
	return i.imp.ImportFrom(path, dir, mode)
}

func isRouteType(t types.Type) bool {
	if p, ok := t.(*types.Pointer); ok {
		t = p.Elem()
	}
	n, ok := t.(*types.Named)
	return ok && n.Obj().Name() == "Route" && n.Obj().Pkg() != nil && n.Obj().Pkg().Path() == "github.com/perpd/perpd/httpapi"
}

func constString(info *types.Info, e ast.Expr) string {
	if tv, ok := info.Types[e]; ok && tv.Value != nil && tv.Value.Kind() == constant.String {
		return constant.StringVal(tv.Value)
	}
	return ""
}

// cmdConst names the fsm command constant e refers to ("" if none).
func cmdConst(info *types.Info, e ast.Expr) string {
	var id *ast.Ident
	switch x := e.(type) {
	case *ast.Ident:
		id = x
	case *ast.SelectorExpr:
		id = x.Sel
	default:
		return ""
	}
	c, ok := info.Uses[id].(*types.Const)
	if !ok {
		return ""
	}
	n, ok := c.Type().(*types.Named)
	if !ok || n.Obj().Name() != "CmdType" || c.Pkg().Path() != "github.com/perpd/perpd/fsm" {
		return ""
	}
	return c.Name()
}

func funcKey(f *types.Func) string { return f.Origin().FullName() }

// scanBody records the edges and refusal sites of one body under key.
func (s *refusalScan) scanBody(key string, body ast.Node, info *types.Info) {
	nd := s.nodes[key]
	if nd == nil {
		nd = newScanNode()
		s.nodes[key] = nd
	}
	inHTTP := strings.HasPrefix(key, "route:") || strings.Contains(key, "github.com/perpd/perpd/httpapi.")
	ast.Inspect(body, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.Ident:
			switch obj := info.Uses[n].(type) {
			case *types.Func:
				if obj.Pkg() != nil && scanned(obj.Pkg().Path()) {
					nd.edges[funcKey(obj)] = true
				}
			case *types.Const:
				if obj.Val().Kind() == constant.String && isCode[constant.StringVal(obj.Val())] {
					nd.refCodes[constant.StringVal(obj.Val())] = true
				}
				if inHTTP {
					if id := cmdConst(info, n); id != "" {
						nd.edges["cmd:"+id] = true
					}
				}
			}
		case *ast.CallExpr:
			var status []int
			var code []string
			varCode := false
			for _, a := range n.Args {
				tv := info.Types[a]
				if tv.Value == nil {
					if b, ok := tv.Type.Underlying().(*types.Basic); ok && b.Kind() == types.String {
						if isCodeExpr(a) {
							varCode = true
						}
					}
					continue
				}
				switch tv.Value.Kind() {
				case constant.Int:
					if v, ok := constant.Int64Val(tv.Value); ok && v >= 400 && v <= 599 {
						status = append(status, int(v))
					}
				case constant.String:
					if c := wireCode(info, a); c != "" {
						code = append(code, c)
					}
				}
			}
			callee := calleeKey(info, n.Fun)
			switch {
			case len(status) > 0 && len(code) > 0:
				for _, st := range status {
					for _, c := range code {
						nd.pairs[refusalPair{st, c}] = true
					}
				}
			case len(code) > 0 && callee != "":
				if nd.codeOnly[callee] == nil {
					nd.codeOnly[callee] = map[string]bool{}
				}
				for _, c := range code {
					nd.codeOnly[callee][c] = true
				}
			case len(status) > 0 && varCode:
				for _, st := range status {
					nd.fixed[st] = true
				}
			case varCode && callee != "":
				nd.varCodeCalls[callee] = true
			}
		case *ast.CompositeLit:
			for _, e := range n.Elts {
				kv, ok := e.(*ast.KeyValueExpr)
				if !ok {
					continue
				}
				if k, ok := kv.Key.(*ast.Ident); ok && k.Name == "Code" {
					if c := wireCode(info, kv.Value); c != "" {
						nd.pairs[refusalPair{0, c}] = true
					}
				}
			}
		}
		return true
	})
}

// wireCode is the ErrorCode e names, when e is one of fsm/wire's Code
// constants ("" otherwise: a reason such as "oracle_stale" is not a code).
func wireCode(info *types.Info, e ast.Expr) string {
	id := nameOf(e)
	if id == nil {
		return ""
	}
	c, ok := info.Uses[id].(*types.Const)
	if !ok || c.Pkg() == nil || c.Pkg().Path() != "github.com/perpd/perpd/fsm/wire" || !strings.HasPrefix(c.Name(), "Code") {
		return ""
	}
	return constant.StringVal(c.Val())
}

// isCodeExpr reports whether a non-constant string argument looks like an
// error code (a variable or field named code or Code).
func isCodeExpr(e ast.Expr) bool {
	switch x := e.(type) {
	case *ast.Ident:
		return x.Name == "code"
	case *ast.SelectorExpr:
		return x.Sel.Name == "Code" || x.Sel.Name == "code"
	}
	return false
}

// nameOf is the identifier e names: itself, or a selector's last name
// (nil for anything else).
func nameOf(e ast.Expr) *ast.Ident {
	switch x := e.(type) {
	case *ast.Ident:
		return x
	case *ast.SelectorExpr:
		return x.Sel
	}
	return nil
}

func calleeKey(info *types.Info, fun ast.Expr) string {
	if x, ok := fun.(*ast.IndexExpr); ok {
		return calleeKey(info, x.X)
	}
	id := nameOf(fun)
	if id == nil {
		return ""
	}
	if f, ok := info.Uses[id].(*types.Func); ok {
		return funcKey(f)
	}
	return ""
}

// scanCuts are calls whose refusal the caller maps to its own: the scan
// does not follow them.
var scanCuts = map[string]bool{
	// A USDx price whose hedge fill cannot be planned is usdx_capacity
	// (mint) or usdx_dust (redemption), never the trading refusal.
	"(*github.com/perpd/perpd/fsm/usdx.State).price -> github.com/perpd/perpd/fsm/trade.PlanFillLeveraged": true,
}

// reach returns the refusals reachable from key.
func (s *refusalScan) reach(key string) map[refusalPair]bool {
	out := map[refusalPair]bool{}
	seen := map[string]bool{}
	var walk func(k string)
	walk = func(k string) {
		if seen[k] {
			return
		}
		seen[k] = true
		nd := s.nodes[k]
		if nd == nil || !nd.carrier {
			return
		}
		for p := range nd.pairs {
			out[p] = true
		}
		for callee, codes := range nd.codeOnly {
			if cn := s.nodes[callee]; cn != nil {
				for st := range cn.fixed {
					for c := range codes {
						out[refusalPair{st, c}] = true
					}
				}
			}
		}
		for callee := range nd.varCodeCalls {
			if cn := s.nodes[callee]; cn != nil {
				for st := range cn.fixed {
					for c := range nd.refCodes {
						out[refusalPair{st, c}] = true
					}
				}
			}
		}
		for e := range nd.edges {
			if !scanCuts[k+" -> "+e] {
				walk(e)
			}
		}
	}
	walk(key)
	return out
}

func sortedPairs(m map[refusalPair]bool) []refusalPair {
	out := make([]refusalPair, 0, len(m))
	for p := range m {
		out = append(out, p)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Status != out[j].Status {
			return out[i].Status < out[j].Status
		}
		return out[i].Code < out[j].Code
	})
	return out
}

// TestEveryRefusalIsDescribed: every refusal a route's handler can reach
// (read from the source, through the state machine's apply of the
// commands it proposes) is declared in the description under its status,
// with its code. A refusal added to a handler or to apply without its
// route's Refuses entry fails here.
func TestEveryRefusalIsDescribed(t *testing.T) {
	s := scanRefusals(t)
	a := newTestAPI(t)
	byRoute := map[string]*Route{}
	for _, r := range a.srv.Routes {
		byRoute[r.Method+" "+r.Path] = r
	}
	doc := a.srv.OpenAPI()
	var bad []string
	for rk, node := range s.routes {
		r := byRoute[rk]
		if r == nil {
			continue // a route the test server does not mount
		}
		codes := refusalCodes(r)
		op := doc["paths"].(map[string]any)[openapiPath(r.Path)].(map[string]any)[strings.ToLower(r.Method)].(map[string]any)
		responses := op["responses"].(map[string]any)
		for _, p := range sortedPairs(s.reach(node)) {
			if p.Code == wire.CodeIdempotencyReused && !r.Idem && !r.IdemOptional {
				// Without a client key the node draws a random one per
				// request: it is never reused with another body.
				continue
			}
			if p.Status == 0 { // a body literal: its code under some status
				found := false
				for _, cs := range codes {
					found = found || contains(cs, p.Code)
				}
				if !found {
					bad = append(bad, rk+": code "+p.Code+" under no status")
				}
				continue
			}
			st := p.Status
			if r.Refuses400 && slices.Contains(refusedAs400, st) {
				st = http.StatusBadRequest // status400Writer
			}
			if _, ok := responses[fmt.Sprint(st)]; !ok {
				bad = append(bad, fmt.Sprintf("%s: status %d (%s) not declared", rk, st, p.Code))
			} else if !contains(codes[st], p.Code) {
				bad = append(bad, fmt.Sprintf("%s: %d %s not listed", rk, st, p.Code))
			}
		}
	}
	sort.Strings(bad)
	if len(bad) > 0 {
		t.Fatalf("refusals the handlers can give that the description does not list (add them to the route's Refuses):\n%s", strings.Join(bad, "\n"))
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// TestRefusalScanDump prints what the scan finds per route, for a review
// of the description against SPEC: DUMP_REFUSALS=1 go test ./httpapi/ -run
// TestRefusalScanDump -v.
func TestRefusalScanDump(t *testing.T) {
	if os.Getenv("DUMP_REFUSALS") == "" {
		t.Skip("set DUMP_REFUSALS=1 to print the refusals each route can reach")
	}
	s := scanRefusals(t)
	var keys []string
	for k := range s.routes {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		fmt.Println(k, sortedPairs(s.reach(s.routes[k])))
	}
}
