package cli

import (
	"fmt"
	"os"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// Execute runs the perpd command line.
func Execute() int {
	root := &cobra.Command{
		Use:           "perpd",
		Short:         "perpd: a Raft-replicated, sats-denominated perpetual-futures venue",
		SilenceUsage:  true,
		SilenceErrors: true,
		PersistentPreRunE: func(cmd *cobra.Command, args []string) error {
			return applyEnv(cmd)
		},
	}
	root.AddCommand(serveCmd(), devnetCmd(), adminCmd(), benchCmd(), porCmd())
	if err := root.Execute(); err != nil {
		fmt.Fprintln(os.Stderr, "error:", err)
		return 1
	}
	return 0
}

// applyEnv fills every flag the user did not set from PERPD_<NAME>, where
// NAME is the flag name upper-cased with dashes as underscores.
func applyEnv(cmd *cobra.Command) error {
	return applyEnvTo(cmd, nil)
}

// applyEnvTo is applyEnv for the flags only admits (nil: every flag).
func applyEnvTo(cmd *cobra.Command, only func(*pflag.Flag) bool) error {
	var err error
	visit := func(f *pflag.Flag) {
		if err != nil || f.Changed || (only != nil && !only(f)) {
			return
		}
		key := envName(f.Name)
		if v, ok := os.LookupEnv(key); ok {
			if e := f.Value.Set(v); e != nil {
				err = fmt.Errorf("%s: %w", key, e)
			}
		}
	}
	cmd.Flags().VisitAll(visit)
	cmd.InheritedFlags().VisitAll(visit)
	return err
}

// envName is the environment variable of a flag: PERPD_<NAME>.
func envName(flag string) string {
	return "PERPD_" + strings.ToUpper(strings.ReplaceAll(flag, "-", "_"))
}

// flagGiven reports whether the operator gave a flag: on the command line,
// or as its PERPD_<NAME> variable (what applyEnv reads; it sets the value
// without marking the flag changed). The deployment's env files are how a
// production node gets its flags, so a check of what the operator asked
// for must see them too.
func flagGiven(cmd *cobra.Command, name string) bool {
	if cmd.Flags().Changed(name) {
		return true
	}
	_, ok := os.LookupEnv(envName(name))
	return ok
}
