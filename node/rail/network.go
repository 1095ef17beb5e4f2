package rail

import "fmt"

// Network is the Bitcoin network a rail serves. A rail accepts destinations
// of its own network only, so a testnet deployment refuses a mainnet invoice
// or Spark address instead of trying to pay it.
type Network string

// Networks. The testnet deployment runs Testnet; the local development
// deployment may run Regtest.
const (
	Mainnet Network = "mainnet"
	Testnet Network = "testnet"
	Signet  Network = "signet"
	Regtest Network = "regtest"
)

// networkParams are a network's human-readable prefixes.
type networkParams struct {
	// lnCurrency is the BOLT11 currency prefix after "ln" (BIP-173 HRPs).
	lnCurrency string
	// sparkHRP is the Spark address prefix that Spark wallets emit today;
	// sparkLegacyHRP is the shorter prefix of earlier Spark SDKs, still
	// accepted when parsing and normalized to sparkHRP.
	sparkHRP       string
	sparkLegacyHRP string
}

var networks = map[Network]networkParams{
	Mainnet: {lnCurrency: "bc", sparkHRP: "spark", sparkLegacyHRP: "sp"},
	Testnet: {lnCurrency: "tb", sparkHRP: "sparkt", sparkLegacyHRP: "spt"},
	Signet:  {lnCurrency: "tbs", sparkHRP: "sparks", sparkLegacyHRP: "sps"},
	Regtest: {lnCurrency: "bcrt", sparkHRP: "sparkrt", sparkLegacyHRP: "sprt"},
}

// lnCurrencies lists BOLT11 currency prefixes longest first, so that "bcrt"
// is tried before "bc" and "tbs" before "tb" (an amount always starts with
// a digit, so the longest match is the only one).
var lnCurrencies = []struct {
	prefix  string
	network Network
}{
	{"bcrt", Regtest},
	{"tbs", Signet},
	{"bc", Mainnet},
	{"tb", Testnet},
}

func (n Network) params() (networkParams, error) {
	p, ok := networks[n]
	if !ok {
		return networkParams{}, fmt.Errorf("rail: unknown network %q (want mainnet, testnet, signet or regtest)", string(n))
	}
	return p, nil
}

// InvoicePrefix is the BOLT11 prefix of the network's invoices: lnbc, lntb,
// lntbs or lnbcrt.
func (n Network) InvoicePrefix() string {
	p, _ := n.params()
	return "ln" + p.lnCurrency
}

// SparkPrefix is the HRP of the network's Spark addresses: spark, sparkt,
// sparks or sparkrt.
func (n Network) SparkPrefix() string {
	p, _ := n.params()
	return p.sparkHRP
}

// sparkNetworkOf maps a Spark HRP, current or legacy, to its network.
func sparkNetworkOf(hrp string) (Network, bool) {
	for n, p := range networks {
		if hrp == p.sparkHRP || hrp == p.sparkLegacyHRP {
			return n, true
		}
	}
	return "", false
}
