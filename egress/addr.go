package egress

import "net/netip"

// neverPrefixes are the address ranges the proxy never connects to besides what netip's
// predicates cover (loopback, private, link-local, multicast, unspecified).
var neverPrefixes = []netip.Prefix{
	netip.MustParsePrefix("0.0.0.0/8"),         // "this network"
	netip.MustParsePrefix("100.64.0.0/10"),     // carrier-grade NAT: often a cloud's internal network
	netip.MustParsePrefix("192.0.0.0/24"),      // IETF protocol assignments
	netip.MustParsePrefix("198.18.0.0/15"),     // benchmarking
	netip.MustParsePrefix("240.0.0.0/4"),       // reserved, and the broadcast address
	netip.MustParsePrefix("fd00:ec2::254/128"), // EC2's IPv6 metadata (inside fc00::/7 too)
}

// Reachable reports whether the proxy may connect to a: a public unicast address. Never
// loopback, private (RFC 1918, IPv6 ULA), link-local (so never the cloud metadata address
// 169.254.169.254), CGNAT, unspecified, multicast or reserved, nor an IPv6 address that embeds
// one of those (IPv4-mapped, NAT64, 6to4).
func Reachable(a netip.Addr) bool {
	a = a.Unmap()
	if !a.IsValid() || a.IsLoopback() || a.IsPrivate() || a.IsLinkLocalUnicast() || a.IsLinkLocalMulticast() ||
		a.IsInterfaceLocalMulticast() || a.IsMulticast() || a.IsUnspecified() {
		return false
	}
	for _, p := range neverPrefixes {
		if p.Contains(a) {
			return false
		}
	}
	if a.Is6() {
		b := a.As16()
		switch {
		case b[0] == 0x20 && b[1] == 0x02: // 6to4: 2002:V4ADDR::/48
			return Reachable(netip.AddrFrom4([4]byte{b[2], b[3], b[4], b[5]}))
		case netip.MustParsePrefix("64:ff9b::/96").Contains(a), netip.MustParsePrefix("::/96").Contains(a): // NAT64, IPv4-compatible
			return Reachable(netip.AddrFrom4([4]byte{b[12], b[13], b[14], b[15]}))
		}
	}
	return true
}
