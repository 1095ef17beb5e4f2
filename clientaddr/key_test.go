package clientaddr

import "testing"

// Addresses of one client share a key: an IPv4 address and its
// IPv4-mapped IPv6 form, any two addresses of one IPv6 /64.
func TestKeyCountsOneClientOnce(t *testing.T) {
	for _, p := range [][2]string{
		{"203.0.113.7", "::ffff:203.0.113.7"},
		{"2001:db8:1:2:3:4:5:6", "2001:db8:1:2:ffff::9"},
		{"2001:db8:1:2::", "2001:db8:1:2:ffff:ffff:ffff:ffff"},
	} {
		if Key(p[0]) != Key(p[1]) {
			t.Errorf("%s and %s are one client, but their keys are %q and %q", p[0], p[1], Key(p[0]), Key(p[1]))
		}
	}
	if got := Key("2001:db8:1:2:3:4:5:6"); got != "2001:db8:1:2::/64" {
		t.Errorf("an IPv6 address's key is %q, want its /64", got)
	}
	if got := Key("::ffff:203.0.113.7"); got != "203.0.113.7" {
		t.Errorf("an IPv4-mapped address's key is %q, want the IPv4 address", got)
	}
}

// Different clients get different keys: neighbouring IPv4 addresses,
// neighbouring /64s, and anything that is no address, which is its own key.
func TestKeySeparatesClients(t *testing.T) {
	for _, p := range [][2]string{
		{"203.0.113.7", "203.0.113.8"},
		{"2001:db8:1:2::1", "2001:db8:1:3::1"},
		{"203.0.113.7", "2001:db8::cb00:7107"},
		{"not an address", "also not one"},
	} {
		if Key(p[0]) == Key(p[1]) {
			t.Errorf("%s and %s are different clients, but share the key %q", p[0], p[1], Key(p[0]))
		}
	}
	if got := Key("not an address"); got != "not an address" {
		t.Errorf("a string that is no address has the key %q, want itself", got)
	}
}

// An IPv6 address's site is its /48; IPv4 addresses and non-addresses
// have none.
func TestSiteIsAnIPv6Slash48(t *testing.T) {
	if Site("2001:db8:1:2::1") != "2001:db8:1::/48" || Site("2001:db8:1:ffff::9") != Site("2001:db8:1:2::1") {
		t.Errorf("sites %q and %q", Site("2001:db8:1:2::1"), Site("2001:db8:1:ffff::9"))
	}
	for _, ip := range []string{"203.0.113.7", "::ffff:203.0.113.7", "not an address"} {
		if Site(ip) != "" {
			t.Errorf("site of %s is %q, want none", ip, Site(ip))
		}
	}
}
