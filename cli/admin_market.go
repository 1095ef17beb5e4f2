package cli

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/perpd/perpd/fsm/wire"
)

func init() { adminExtras = append(adminExtras, adminMarketCmd, adminOracleCmd) }

func adminMarketCmd(f *adminFlags) *cobra.Command {
	cmd := &cobra.Command{Use: "market", Short: "List markets; change a market's status or parameters"}
	cmd.AddCommand(adminMarketListCmd(f), adminMarketSetCmd(f))
	return cmd
}

func adminOracleCmd(f *adminFlags) *cobra.Command {
	cmd := &cobra.Command{Use: "oracle", Short: "Pin a feed's price, play a scripted path, or hand it back to the source"}
	cmd.AddCommand(adminOraclePinCmd(f), adminOracleScriptCmd(f), adminOracleUnpinCmd(f))
	return cmd
}

// adminCall sends one admin request and prints the JSON answer.
func adminCall(cmd *cobra.Command, f *adminFlags, method, path string, in any) error {
	c, err := f.client()
	if err != nil {
		return err
	}
	ctx, cancel := f.ctx()
	defer cancel()
	var out json.RawMessage
	if err := c.Do(ctx, method, path, in, &out); err != nil {
		return err
	}
	return printRaw(cmd.OutOrStdout(), out)
}

func adminMarketListCmd(f *adminFlags) *cobra.Command {
	return &cobra.Command{
		Use:   "list",
		Short: "Every market with operator figures, and every feed's last print and override",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if !f.humanOutput() {
				return adminCall(cmd, f, http.MethodGet, "/admin/market/list", nil)
			}
			c, err := f.client()
			if err != nil {
				return err
			}
			ctx, cancel := f.ctx()
			defer cancel()
			var v AdminMarketsView
			if err := c.Do(ctx, http.MethodGet, "/admin/market/list", nil, &v); err != nil {
				return err
			}
			return printMarketsTable(cmd.OutOrStdout(), v)
		},
	}
}

func printMarketsTable(w io.Writer, v AdminMarketsView) error {
	tw := tabwriter.NewWriter(w, 0, 2, 2, ' ', 0)
	fmt.Fprintln(tw, "MARKET\tSTATUS\tFEED\tLAST\tSTALE\tOI\tFUNDING/H (q9)")
	for _, m := range v.Markets {
		last := "-"
		if m.LastPrice != nil {
			last = formatQ8(int64(m.LastPrice.MidQ8))
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%v\t%d\t%d\n", m.MarketID, m.Status, m.OracleFeedID, last, m.Stale,
			m.OpenInterestContracts, m.FundingRateHourlyQ9)
	}
	fmt.Fprintln(tw, "\nFEED\tLAST\tTS (ms)\tHELD\tOVERRIDE")
	for _, fd := range v.Feeds {
		last, ts, held, ov := "-", "-", "-", "-"
		if fd.Last != nil {
			last, ts = formatQ8(int64(fd.Last.MidQ8)), fmt.Sprint(int64(fd.Last.TsMs))
		}
		if fd.Held != nil {
			held = fmt.Sprintf("%s at %d", formatQ8(int64(fd.Held.MidQ8)), int64(fd.Held.TsMs))
		}
		if fd.Override != nil {
			ov = fmt.Sprintf("%s, %d point(s) from %d", fd.Override.Mode, len(fd.Override.Points), fd.Override.StartMs)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", fd.FeedID, last, ts, held, ov)
	}
	return tw.Flush()
}

// formatQ8 prints a q8 price as dollars, exactly.
func formatQ8(v int64) string {
	sign := ""
	if v < 0 {
		sign, v = "-", -v
	}
	return fmt.Sprintf("%s%d.%08d", sign, v/1e8, v%1e8)
}

func adminMarketSetCmd(f *adminFlags) *cobra.Command {
	var id, status string
	var params []string
	cmd := &cobra.Command{
		Use:   "set",
		Short: "Change a market's status (live, reduce_only, halted) and/or parameters through the log",
		Long: "Change a market. --param takes a Market field name and its value, e.g. --param takerFeeQ9=400000;\n" +
			"integers are given in the field's unit (q8, q9, ms, contracts). The whole resulting parameter set is\n" +
			"validated by the state machine; underlying, contractType and quantoMultiplierMsat cannot change.\n" +
			"From feature level 8 baseSpreadQ9 plus one maxOrderContracts order's impact (25000 q9) must stay below\n" +
			"(imRateQ9 - mmRateQ9) / (1 + imRateQ9), so that an open at the most leverage is not under maintenance\n" +
			"at birth; a market already past it may change in any way that does not take it further past.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			body, err := marketSetBody(id, status, params)
			if err != nil {
				return err
			}
			return adminCall(cmd, f, http.MethodPost, "/admin/market/set", body)
		},
	}
	cmd.Flags().StringVar(&id, "market", "", "market id, e.g. BTC-PERP")
	cmd.Flags().StringVar(&status, "status", "", "new status: live, reduce_only or halted")
	cmd.Flags().StringArrayVar(&params, "param", nil, "name=value of a parameter to change (repeatable)")
	return cmd
}

// marketSetBody builds the request; every value travels as a string and
// the admin route decodes it by field, refusing unknown names.
func marketSetBody(id, status string, params []string) (map[string]string, error) {
	if id == "" {
		return nil, errors.New("--market is required")
	}
	body := map[string]string{"marketId": id}
	if status != "" {
		body["status"] = status
	}
	for _, p := range params {
		name, value, ok := strings.Cut(p, "=")
		if !ok || name == "" || value == "" {
			return nil, fmt.Errorf("--param %q: want name=value", p)
		}
		if name == "marketId" {
			return nil, errors.New("--param cannot set marketId; use --market")
		}
		if _, dup := body[name]; dup {
			return nil, fmt.Errorf("--param %s given twice", name)
		}
		body[name] = value
	}
	if len(body) == 1 {
		return nil, errors.New("nothing to change: give --status and/or --param")
	}
	return body, nil
}

func adminOraclePinCmd(f *adminFlags) *cobra.Command {
	var feed, price string
	cmd := &cobra.Command{
		Use:   "pin",
		Short: "Hold a feed at a price (replicated: a new leader keeps it) until unpin",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if feed == "" || price == "" {
				return errors.New("--feed and --price are required")
			}
			q8, err := parsePriceQ8(price)
			if err != nil {
				return fmt.Errorf("--price: %w", err)
			}
			return adminCall(cmd, f, http.MethodPost, "/admin/oracle/pin",
				map[string]string{"feedId": feed, "midQ8": fmt.Sprint(q8)})
		},
	}
	cmd.Flags().StringVar(&feed, "feed", "", "feed id, e.g. BTCUSD")
	cmd.Flags().StringVar(&price, "price", "", "price in dollars, up to 8 decimals, e.g. 97000.5")
	return cmd
}

// scriptFile is the file of `oracle script`: points at offsets from the
// moment the script is applied, each with midQ8 (a q8 integer) or price
// (decimal dollars).
type scriptFile struct {
	Mode   string `json:"mode"`
	Points []struct {
		OffsetMs adminInt  `json:"offsetMs"`
		MidQ8    *adminInt `json:"midQ8"`
		Price    *string   `json:"price"`
	} `json:"points"`
}

func adminOracleScriptCmd(f *adminFlags) *cobra.Command {
	var feed, file, mode string
	cmd := &cobra.Command{
		Use:   "script",
		Short: "Play a scripted price path on a feed (replicated), then hold its last point until unpin",
		Long: "The file is JSON: {\"mode\": \"step\"|\"linear\", \"points\": [{\"offsetMs\": 0, \"price\": \"97000\"},\n" +
			"{\"offsetMs\": 60000, \"midQ8\": \"9600000000000\"}]}. Offsets count from the moment the script\n" +
			"is applied; --mode overrides the file's mode (default step).",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if feed == "" || file == "" {
				return errors.New("--feed and --file are required")
			}
			raw, err := os.ReadFile(file)
			if err != nil {
				return err
			}
			body, err := scriptBody(feed, mode, raw)
			if err != nil {
				return fmt.Errorf("%s: %w", file, err)
			}
			return adminCall(cmd, f, http.MethodPost, "/admin/oracle/script", body)
		},
	}
	cmd.Flags().StringVar(&feed, "feed", "", "feed id, e.g. BTCUSD")
	cmd.Flags().StringVar(&file, "file", "", "script file (JSON)")
	cmd.Flags().StringVar(&mode, "mode", "", "step or linear (default: the file's, else step)")
	return cmd
}

func scriptBody(feed, mode string, raw []byte) (map[string]any, error) {
	var sf scriptFile
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&sf); err != nil {
		return nil, err
	}
	if mode == "" {
		mode = sf.Mode
	}
	if mode == "" {
		mode = "step"
	}
	points := make([]map[string]string, 0, len(sf.Points))
	for i, p := range sf.Points {
		var q8 int64
		switch {
		case p.MidQ8 != nil && p.Price == nil:
			q8 = int64(*p.MidQ8)
		case p.Price != nil && p.MidQ8 == nil:
			v, err := parsePriceQ8(*p.Price)
			if err != nil {
				return nil, fmt.Errorf("point %d: %w", i, err)
			}
			q8 = v
		default:
			return nil, fmt.Errorf("point %d: give exactly one of midQ8 and price", i)
		}
		points = append(points, map[string]string{"offsetMs": fmt.Sprint(int64(p.OffsetMs)), "midQ8": fmt.Sprint(q8)})
	}
	return map[string]any{"feedId": feed, "mode": mode, "points": points}, nil
}

func adminOracleUnpinCmd(f *adminFlags) *cobra.Command {
	var feed string
	cmd := &cobra.Command{
		Use:   "unpin",
		Short: "Hand a feed back to its source, which continues from the last pinned price",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if feed == "" {
				return errors.New("--feed is required")
			}
			return adminCall(cmd, f, http.MethodPost, "/admin/oracle/unpin", map[string]string{"feedId": feed})
		},
	}
	cmd.Flags().StringVar(&feed, "feed", "", "feed id, e.g. BTCUSD")
	return cmd
}

// parsePriceQ8 converts a decimal dollar price ("97000.5") to q8 exactly,
// with string arithmetic: digits, optionally a point and at most eight more
// digits. Anything finer than the q8 grid is refused, not rounded.
func parsePriceQ8(s string) (int64, error) {
	whole, frac, dot := strings.Cut(strings.TrimSpace(s), ".")
	if whole == "" || (dot && frac == "") {
		return 0, fmt.Errorf("%q is not a decimal price like 97000.5", s)
	}
	if len(frac) > 8 {
		return 0, fmt.Errorf("%q has more than 8 decimals (a q8 price is 1e-8 dollars)", s)
	}
	for _, part := range []string{whole, frac} {
		for _, c := range part {
			if c < '0' || c > '9' {
				return 0, fmt.Errorf("%q is not a decimal price like 97000.5", s)
			}
		}
	}
	v, err := wire.ParseDecimal(whole + frac + strings.Repeat("0", 8-len(frac)))
	if err != nil {
		return 0, fmt.Errorf("%q: %w", s, err)
	}
	if v <= 0 {
		return 0, fmt.Errorf("%q: a price must be positive", s)
	}
	return v, nil
}
