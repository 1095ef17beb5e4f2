package cli

import (
	"errors"
	"strings"
	"testing"

	"github.com/perpd/perpd/fsm/access"
	"github.com/perpd/perpd/httpapi"
)

func TestBenchProfileRaisesBudgetsAndSignupCapOnly(t *testing.T) {
	bench, err := deploymentProfile("bench")
	if err != nil {
		t.Fatal(err)
	}
	if bench.budgetScale != 1000 || bench.signupsPerHour != 10*access.DefaultSignupsPerHour || !bench.payer {
		t.Fatalf("bench profile %+v", bench)
	}
	if bench.signupCap(0) != BenchSignupsPerHour || bench.signupCap(5) != 5 {
		t.Fatalf("bench signup cap: %d without the flag, %d with 5", bench.signupCap(0), bench.signupCap(5))
	}
	if bench.budgetScale > httpapi.MaxBudgetScale {
		t.Fatalf("bench scale %d beyond httpapi's %d", bench.budgetScale, httpapi.MaxBudgetScale)
	}
	for _, name := range []string{"testnet", "local"} {
		p, err := deploymentProfile(name)
		if err != nil || p.budgetScale != 1 || p.signupCap(0) != 0 {
			t.Errorf("%s: %+v %v, want the spec's budgets and the default signup cap", name, p, err)
		}
	}
}

func TestDeploymentProfileRefusals(t *testing.T) {
	if _, err := deploymentProfile("prod"); !errors.Is(err, errProdRail) {
		t.Fatalf("prod: %v", err)
	}
	for _, name := range []string{"", "Bench", "staging", "bench "} {
		if _, err := deploymentProfile(name); err == nil || !strings.Contains(err.Error(), "--deployment must be") {
			t.Errorf("%q: %v", name, err)
		}
	}
}
