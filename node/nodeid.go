package node

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/hashicorp/raft"
)

// nodeIDFile names, inside the data directory, the member whose raft log,
// term and vote the directory holds. Raft itself records no id: a
// directory started under another --id (swapped volumes, a copied
// directory) would run as that member, casting a second vote in a term
// under another name and counting entries the real member acknowledged as
// its own. New refuses such a start.
const nodeIDFile = "node-id"

// checkNodeIDFile reads the id the data directory was marked with, and
// refuses another. It reports whether the mark was there.
func checkNodeIDFile(dataDir, id string) (bool, error) {
	b, err := os.ReadFile(filepath.Join(dataDir, nodeIDFile))
	if errors.Is(err, os.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	got := strings.TrimSpace(string(b))
	if got == "" {
		// A write a crash cut short (the mark is synced before its rename
		// since 2026-11-29, not before): no mark, so the stored
		// configuration's check decides, and the start marks it again.
		return false, nil
	}
	if got != id {
		return true, fmt.Errorf("data directory %s belongs to node %q, not %q: start it as %q, or give %q an empty data directory "+
			"(remove the old member first if it is still one)", dataDir, got, id, got, id)
	}
	return true, nil
}

// checkStoredConfiguration covers a directory from a build that wrote no
// mark: its stored configuration must not name another member at this
// node's raft address (the one the directory was serving).
func checkStoredConfiguration(r *raft.Raft, dataDir, id string, addr raft.ServerAddress) error {
	f := r.GetConfiguration()
	if err := f.Error(); err != nil {
		return err
	}
	for _, s := range f.Configuration().Servers {
		if s.Address == addr && string(s.ID) != id {
			return fmt.Errorf("data directory %s holds the raft state of node %q (at %s in its configuration), not %q: "+
				"start it as %q, or give %q an empty data directory", dataDir, s.ID, addr, id, s.ID, id)
		}
	}
	return nil
}

func writeNodeIDFile(dataDir, id string) error {
	return writePrivate(filepath.Join(dataDir, nodeIDFile), []byte(id+"\n"))
}

// voterDataLostFile, in a data directory, records that the cluster
// refused this directory's node as a voter that lost its data
// (MarkVoterDataLost). New refuses to start on it: a node whose raft was
// not held (no Config.AwaitJoin, or a member of an older build without the
// join check) ran raft before its join was asked, the leader may have sent
// the directory entries, and a restart would then look like a member's and
// rejoin without asking.
const voterDataLostFile = "voter-data-lost"

// MarkVoterDataLost records the refusal of this node's join as a voter
// whose data is lost (why is the cluster's message), so that no start on
// this directory takes part in the cluster until the operator has removed
// the member and emptied the directory.
func (n *Node) MarkVoterDataLost(why string) error {
	return writePrivate(filepath.Join(n.cfg.DataDir, voterDataLostFile), []byte(why+"\n"))
}

func checkVoterDataLost(dataDir string) error {
	b, err := os.ReadFile(filepath.Join(dataDir, voterDataLostFile))
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	return fmt.Errorf("the cluster refused this data directory's node as a voter whose data is lost (%s): remove the member "+
		"(perpd admin remove --id ID on any member), then empty %s (raft.db, snapshots, node-id, %s; keep the secret files you put "+
		"there) and start it again: it joins as a new member", strings.TrimSpace(string(b)), dataDir, voterDataLostFile)
}
