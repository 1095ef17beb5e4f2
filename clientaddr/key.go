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

// Site is the wider unit a per-address limit also counts, in aggregate,
// for the client at ip: an IPv6 address's /48, a site's usual allocation
// (65,536 /64s, free from tunnel brokers), so that one site's many /64s
// cannot each take a fresh budget. It is "" for an IPv4 address (a /24 is
// often many unrelated clients) and for anything that does not parse.
func Site(ip string) string {
	a, err := netip.ParseAddr(ip)
	if err != nil {
		return ""
	}
	a = a.Unmap()
	if a.Is4() {
		return ""
	}
	p, _ := a.Prefix(48)
	return p.String()
}
