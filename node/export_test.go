package node

// SetBeforeBatch runs hook before each batch the state machine applies
// (nil removes it): a test holds a replica's apply back with it.
func (n *Node) SetBeforeBatch(hook func()) {
	if hook == nil {
		n.fsm.beforeBatch.Store(nil)
		return
	}
	n.fsm.beforeBatch.Store(&hook)
}

// SetPoRBesideApplyFrom sets the number of accounts from which the node
// builds its Proof of Reserves trees beside apply (PoRBesideApplyFrom).
func (n *Node) SetPoRBesideApplyFrom(accounts int64) { n.porBuilds.minAccounts.Store(accounts) }
