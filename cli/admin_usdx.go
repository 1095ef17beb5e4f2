package cli

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/spf13/cobra"
)

func init() { adminExtras = append(adminExtras, adminUSDxCmd) }

func adminUSDxCmd(f *adminFlags) *cobra.Command {
	cmd := &cobra.Command{Use: "usdx", Short: "Operate USDx: halt and resume mints, freeze addresses, attest, change parameters"}
	cmd.AddCommand(adminUSDxHaltCmd(f), adminUSDxResumeCmd(f), adminUSDxFreezeCmd(f, true), adminUSDxFreezeCmd(f, false),
		adminUSDxAttestCmd(f), adminUSDxParamsCmd(f), adminUSDxDepositCmd(f))
	return cmd
}

func adminUSDxHaltCmd(f *adminFlags) *cobra.Command {
	var reason string
	cmd := &cobra.Command{
		Use:   "halt",
		Short: "Halt user mints and stakes (redemptions, unstakes, withdrawals and the waterfall go on)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if strings.TrimSpace(reason) == "" {
				return fmt.Errorf("--reason is required")
			}
			return adminCall(cmd, f, http.MethodPost, USDxHaltPath, USDxHaltRequest{Reason: reason})
		},
	}
	cmd.Flags().StringVar(&reason, "reason", "", "why mints are halted (shown as mintsHaltedReason)")
	return cmd
}

func adminUSDxResumeCmd(f *adminFlags) *cobra.Command {
	return &cobra.Command{
		Use:   "resume",
		Short: "Resume mints; after an attestation halt only once the last attestation passed",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return adminCall(cmd, f, http.MethodPost, USDxResumePath, struct{}{})
		},
	}
}

func adminUSDxFreezeCmd(f *adminFlags, freeze bool) *cobra.Command {
	var reason, opID string
	use, short, path := "freeze ADDRESS", "Freeze a token address (logged as requested; applied by the custody worker)", USDxFreezePath
	if !freeze {
		use, short, path = "unfreeze ADDRESS", "Unfreeze a token address", USDxUnfreezePath
	}
	cmd := &cobra.Command{
		Use:   use,
		Short: short,
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return adminCall(cmd, f, http.MethodPost, path, USDxFreezeRequest{SparkAddress: args[0], Reason: reason, OpID: opID})
		},
	}
	cmd.Flags().StringVar(&reason, "reason", "", "reason recorded in the freeze log")
	cmd.Flags().StringVar(&opID, "op-id", "", "operator's reference recorded in the freeze log")
	return cmd
}

func adminUSDxAttestCmd(f *adminFlags) *cobra.Command {
	var supply, issued, burned, custody int64
	cmd := &cobra.Command{
		Use:   "attest",
		Short: "Record the issuer's attestation; a mismatch with the ledger halts mints until an operator resumes",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return adminCall(cmd, f, http.MethodPost, USDxAttestPath, USDxAttestRequest{AsOfTsMs: adminInt(time.Now().UnixMilli()),
				IssuerSupply: adminInt(supply), IssuerIssued: adminInt(issued), IssuerBurned: adminInt(burned), IssuerCustody: adminInt(custody)})
		},
	}
	cmd.Flags().Int64Var(&supply, "supply", 0, "issuer's token supply")
	cmd.Flags().Int64Var(&issued, "issued", 0, "tokens the issuer ever issued")
	cmd.Flags().Int64Var(&burned, "burned", 0, "tokens the issuer ever burned")
	cmd.Flags().Int64Var(&custody, "custody", 0, "tokens in the venue's custody")
	// A figure left out would be attested as 0 and halt mints: the ones
	// compared with the ledger are required (0 burned is an ordinary figure).
	for _, name := range []string{"supply", "issued", "custody"} {
		_ = cmd.MarkFlagRequired(name)
	}
	return cmd
}

func adminUSDxParamsCmd(f *adminFlags) *cobra.Command {
	return &cobra.Command{
		Use:   "params JSON",
		Short: `Change USDx parameters, e.g. '{"hardCap":"5000000","unstakeCooldownMs":"600000"}'; absent fields stay`,
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var req USDxParamsRequest
			dec := json.NewDecoder(strings.NewReader(args[0]))
			dec.DisallowUnknownFields()
			if err := dec.Decode(&req); err != nil {
				return fmt.Errorf("params: %w", err)
			}
			return adminCall(cmd, f, http.MethodPost, USDxParamsPath, req)
		},
	}
}

func adminUSDxDepositCmd(f *adminFlags) *cobra.Command {
	var usdx int64
	cmd := &cobra.Command{
		Use:   "deposit ACCOUNT",
		Short: "Send USDx tokens to an account's deposit address (simulated token rail only)",
		Long:  "Plays someone outside sending tokens to the account's deposit address; only tokens outside custody (withdrawn before) can arrive.",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if usdx < 1 {
				return fmt.Errorf("--usdx must be at least 1")
			}
			return adminCall(cmd, f, http.MethodPost, USDxDepositPath, USDxDepositRequest{AccountID: args[0], Usdx: adminInt(usdx)})
		},
	}
	cmd.Flags().Int64Var(&usdx, "usdx", 0, "whole USDx to send")
	return cmd
}
