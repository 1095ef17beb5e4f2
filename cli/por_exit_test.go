package cli_test

import (
	"encoding/hex"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/perpd/perpd/fsm/por"
)

// The binary's exit status says the verdict.
func TestPorVerifyExitStatus(t *testing.T) {
	bin := perpdBinary(t)
	salt := por.RootSalt(por.AssetUsdx, 60_000, 1)
	leaves := []por.Leaf{{Tag: por.AccountTag([]byte("k"), por.AssetUsdx, "a", 60_000), Amount: 3_000_000}}
	tr, err := por.BuildWidth(salt, leaves, por.MinWidth) // one account, as built from level 7
	if err != nil {
		t.Fatal(err)
	}
	d, _ := por.NewProofDoc(por.AssetUsdx, tr, salt, leaves[0].Tag, 0, 60_000)
	proof, _ := json.Marshal(d)
	r := tr.Root().Hash
	root := hex.EncodeToString(r[:])
	file := filepath.Join(t.TempDir(), "proof.json")
	if err := os.WriteFile(file, proof, 0o600); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(bin, "por", "verify", "--proof", file, "--root", root).CombinedOutput(); err != nil {
		t.Fatalf("valid: %v %s", err, out)
	}
	err = exec.Command(bin, "por", "verify", "--proof", file, "--root", strings.Repeat("1", 64)).Run()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 1 {
		t.Fatalf("invalid proof exited %v", err)
	}
}
