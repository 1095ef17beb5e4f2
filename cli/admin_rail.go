package cli

import (
	"encoding/json"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/perpd/perpd/fsm/wire"
)

func init() { adminExtras = append(adminExtras, adminRailCmd) }

func adminRailCmd(f *adminFlags) *cobra.Command {
	cmd := &cobra.Command{Use: "rail", Short: "Operate the payment rail"}
	cmd.AddCommand(adminPayInvoiceCmd(f))
	return cmd
}

func adminPayInvoiceCmd(f *adminFlags) *cobra.Command {
	var amountMsat int64
	cmd := &cobra.Command{
		Use:   "pay-invoice INVOICE",
		Short: "Pay a deposit invoice as an outside payer would (simulated rail only) and print the deposit",
		Long: "Settles a deposit invoice issued by POST /v1/deposit-invoices: the rail checks that the cluster issued it,\n" +
			"that it has not expired and the amount; the state machine credits it once, to the account it was issued to.",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if amountMsat < 0 {
				return fmt.Errorf("--amount-msat must not be negative")
			}
			c, err := f.client()
			if err != nil {
				return err
			}
			req := PayInvoiceRequest{Invoice: args[0]}
			if amountMsat > 0 {
				req.AmountMsat = wire.Ptr(amountMsat)
			}
			ctx, cancel := f.ctx()
			defer cancel()
			var out json.RawMessage
			if err := c.Do(ctx, "POST", PayInvoicePath, req, &out); err != nil {
				return err
			}
			return printRaw(cmd.OutOrStdout(), out)
		},
	}
	cmd.Flags().Int64Var(&amountMsat, "amount-msat", 0, "amount to pay in msat (required for an any-amount invoice; default: the invoice's amount)")
	return cmd
}
