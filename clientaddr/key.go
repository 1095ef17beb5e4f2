package clientaddr

import "net/netip"

// Key is the unit a per-address limit counts for the client at ip: an
// IPv4 address (an IPv4-mapped IPv6 address counts as its IPv4 address),
// or an IPv6 address's /64, one subscriber's usual allocation, from which
// a single client can draw source addresses at will. Anything that does
// not parse as an address is its own key.
func Key(ip string) string {
	a, err := netip.ParseAddr(ip)
	if err != nil {
		return ip
	}
	a = a.Unmap()
	if a.Is4() {
		return a.String()
	}
	p, _ := a.Prefix(64)
	return p.String()
}
