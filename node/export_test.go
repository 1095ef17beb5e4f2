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
