package cli

import (
	"github.com/hashicorp/go-hclog"

	"github.com/perpd/perpd/cluster"
	"github.com/perpd/perpd/httpapi"
	"github.com/perpd/perpd/node"
	"github.com/perpd/perpd/node/rail"
)

// Parts are the pieces of one node that domain wirings plug into.
type Parts struct {
	Node  *node.Node
	Admin *cluster.AdminServer
	Rail  *rail.SimRail
	Log   hclog.Logger
	// HTTPOptions are handed to httpapi.New.
	HTTPOptions []httpapi.Option
}

// wirings connect a domain to a node: leader drivers (node.AddLeaderDriver),
// admin routes (Admin.Handle) and HTTP options. Each domain adds one from an
// init function in its own file (wire_<domain>.go).
var wirings []func(p *Parts) error

// Assemble builds a node's admin listener, rail and public API, and wires
// every domain in. The caller starts the node (Node.Start) afterwards and
// serves the returned handlers. Tests use it to get exactly what `serve`
// runs.
func Assemble(n *node.Node, log hclog.Logger) (*cluster.AdminServer, *httpapi.Server, error) {
	cfg := n.Config()
	rl, err := newRail(cfg.Deployment, cfg.AdminToken)
	if err != nil {
		return nil, nil, err
	}
	p := &Parts{Node: n, Admin: cluster.NewAdminServer(n), Rail: rl, Log: log}
	p.HTTPOptions = append(p.HTTPOptions, httpapi.WithRail(rl))
	for _, w := range wirings {
		if err := w(p); err != nil {
			return nil, nil, err
		}
	}
	return p.Admin, httpapi.New(n, log.Named("http"), p.HTTPOptions...), nil
}

// newRail builds the simulated rail of testnet and local deployments; its
// node key is derived from the cluster's shared admin token, so every
// member signs and recognises the same invoices.
func newRail(deployment, token string) (*rail.SimRail, error) {
	key, err := rail.NodeKeyFromSecret(token)
	if err != nil {
		return nil, err
	}
	return rail.NewSimRail(rail.SimConfig{Network: httpapi.RailNetwork(deployment), NodeKey: key})
}
