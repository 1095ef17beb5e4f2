package cli

import (
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/spf13/cobra"

	"github.com/perpd/perpd/fsm/por"
)

// errProofInvalid is the verdict of a proof that does not verify; the
// command exits non-zero with it.
var errProofInvalid = errors.New("proof INVALID")

func porCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "por", Short: "Proof of Reserves tools"}
	cmd.AddCommand(porVerifyCmd())
	return cmd
}

func porVerifyCmd() *cobra.Command {
	var proofPath, root, treeTs, account, keyEnv string
	cmd := &cobra.Command{
		Use:   "verify --proof FILE [--root HASH]",
		Short: "Verify a Proof of Reserves inclusion proof offline",
		Long: `Verify recomputes the root from a proof saved from GET /v1/por/proof: the leaf hash
SHA-256(rootSalt || accountTag), then each parent SHA-256(L.hash || L.sum || R.hash || R.sum) with
8-byte big-endian sums, checking that every sum is a non-negative integer, that the sides agree with
the leaf index, and that the path ends at the proof's rootHash and total. With --root it also checks
that root is the one you expect (the rootHash GET /por publishes, liability or liabilityUsdx); pass
--ts with that tree's tsMs too: the root does not bind the proof's treeTsMs, so without it a leaf
tagged for an older tree (an older, smaller balance) placed in the current tree passes as "the tree
of" that older time.
--proof - reads the proof from standard input. With --account it also checks that the leaf is
that account's: its accountTag must be HMAC-SHA256(SHA-256(key), "perpd/por/tag/v1" 0 asset 0
account 0 treeTsMs), with the key the proof's leaf.tagKeyId names (GET /v1/sessions lists key ids):
the account's oldest live key with the read scope (in trees before feature level 8, its oldest API
key still on record, revoked or not), read from the environment variable --key-env names (never
from the command line). Without it the path proves a balance is in the tree, not whose. Exit
status 0 means the proof is valid.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if proofPath == "" {
				return errors.New("--proof FILE is required (- for standard input)")
			}
			var r io.Reader = cmd.InOrStdin()
			if proofPath != "-" {
				f, err := os.Open(proofPath)
				if err != nil {
					return err
				}
				defer f.Close()
				r = f
			}
			var apiKey string
			if account != "" {
				if apiKey = os.Getenv(keyEnv); apiKey == "" {
					return fmt.Errorf("--account needs the account's API key in the environment variable %s", keyEnv)
				}
			}
			out := cmd.OutOrStdout()
			d, err := por.DecodeProof(io.LimitReader(r, 1<<20))
			if err == nil {
				var v por.Verdict
				v, err = d.Verify(root)
				if err == nil && treeTs != "" && d.TreeTsMs != treeTs {
					// The leaf's tag binds treeTsMs, the root does not.
					err = fmt.Errorf("the proof is of the tree of %s, not the expected tree of %s", d.TreeTsMs, treeTs)
				}
				if err == nil && account != "" {
					err = d.CheckTag(apiKey, account)
				}
				if err == nil {
					unit := "msat"
					if v.Asset == por.AssetUsdx {
						unit = "micro-USDx"
					}
					fmt.Fprintf(out, "VALID: the %s tree of %s includes leaf %d with balance %d %s\n", v.Asset, d.TreeTsMs, v.Index, v.Balance, unit)
					fmt.Fprintf(out, "  root %s, total %d %s, %d steps, every sum non-negative\n", v.RootHash, v.Total, unit, v.Depth)
					if root == "" {
						fmt.Fprintln(out, "  checked against the proof's own root; compare it with GET /por or pass --root")
					} else {
						fmt.Fprintln(out, "  the root is the expected one")
					}
					if account == "" {
						fmt.Fprintln(out, "  the leaf's owner is not checked; pass --account (key in $"+keyEnv+") to check it is yours")
					} else {
						fmt.Fprintf(out, "  the leaf is account %s's (its tag matches the key)\n", account)
					}
					return nil
				}
			}
			fmt.Fprintf(out, "INVALID: %v\n", err)
			return errProofInvalid
		},
	}
	cmd.Flags().StringVar(&proofPath, "proof", "", "proof file (JSON from GET /v1/por/proof), or - for standard input")
	cmd.Flags().StringVar(&root, "root", "", "expected root hash (hex)")
	cmd.Flags().StringVar(&treeTs, "ts", "", "expected tree time: the tsMs GET /por publishes beside the root")
	cmd.Flags().StringVar(&account, "account", "", "check that the leaf is this account's (needs its API key in --key-env)")
	cmd.Flags().StringVar(&keyEnv, "key-env", "PERPD_API_KEY", "environment variable holding the account's API key (used with --account)")
	return cmd
}
