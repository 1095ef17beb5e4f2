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
	var err error
	visit := func(f *pflag.Flag) {
		if err != nil || f.Changed {
			return
		}
		key := "PERPD_" + strings.ToUpper(strings.ReplaceAll(f.Name, "-", "_"))
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
