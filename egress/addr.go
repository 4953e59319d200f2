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
	// NAT64's local-use prefix (RFC 8215). A network may use any RFC 6052 prefix length inside
	// it (/48 up to /96), and where the IPv4 address sits depends on that length, which only
	// the local translator knows: the proxy cannot tell which IPv4 address such an address
	// reaches, and a local translator's reach is the local network. So all of it is refused.
	netip.MustParsePrefix("64:ff9b:1::/48"),
}

// IPv6 forms that embed an IPv4 address at a fixed place (see embeddedIPv4).
var (
	nat64WellKnown = netip.MustParsePrefix("64:ff9b::/96")    // RFC 6052: the v4 address is the last 32 bits
	siitTranslated = netip.MustParsePrefix("::ffff:0:0:0/96") // SIIT's IPv4-translated ::ffff:0:a.b.c.d (RFC 2765)
	ipv4Compatible = netip.MustParsePrefix("::/96")           // deprecated IPv4-compatible ::a.b.c.d (RFC 4291)
	sixToFour      = netip.MustParsePrefix("2002::/16")       // 6to4: 2002:V4ADDR::/48 (RFC 3056)
	teredo         = netip.MustParsePrefix("2001::/32")       // Teredo: server v4, flags, port, client v4 (RFC 4380)
)

// Reachable reports whether the proxy may connect to a: a public unicast address. Never
// loopback, private (RFC 1918, IPv6 ULA), link-local (so never the cloud metadata address
// 169.254.169.254), CGNAT, unspecified, multicast or reserved, nor the NAT64 local-use prefix
// 64:ff9b:1::/48. An IPv6 address that embeds IPv4 addresses (IPv4-mapped, SIIT's
// IPv4-translated, IPv4-compatible, NAT64's well-known prefix, 6to4, Teredo) is reachable
// exactly when every IPv4 address it embeds is: 64:ff9b::808:808 is, 64:ff9b::a9fe:a9fe is not.
func Reachable(a netip.Addr) bool {
	// IPv4-mapped ::ffff:a.b.c.d is the IPv4 address itself; a zone would hide the address
	// from netip.Prefix.Contains.
	a = a.Unmap().WithZone("")
	if !a.IsValid() || a.IsLoopback() || a.IsPrivate() || a.IsLinkLocalUnicast() || a.IsLinkLocalMulticast() ||
		a.IsInterfaceLocalMulticast() || a.IsMulticast() || a.IsUnspecified() {
		return false
	}
	for _, p := range neverPrefixes {
		if p.Contains(a) {
			return false
		}
	}
	for _, v4 := range embeddedIPv4(a) {
		if !Reachable(v4) {
			return false
		}
	}
	return true
}

// embeddedIPv4 returns the IPv4 addresses an IPv6 address a carries in one of the forms a
// host, a translator or a tunnel on the way may turn into IPv4 traffic to them: none for an
// ordinary IPv6 address (or an IPv4 one).
func embeddedIPv4(a netip.Addr) []netip.Addr {
	if !a.Is6() {
		return nil
	}
	b := a.As16()
	last := netip.AddrFrom4([4]byte{b[12], b[13], b[14], b[15]})
	switch {
	case nat64WellKnown.Contains(a), siitTranslated.Contains(a), ipv4Compatible.Contains(a):
		return []netip.Addr{last}
	case sixToFour.Contains(a):
		return []netip.Addr{netip.AddrFrom4([4]byte{b[2], b[3], b[4], b[5]})}
	case teredo.Contains(a):
		// 2001:0:SSSS:SSSS:flags:port:CCCC:CCCC, the client's address inverted (RFC 4380 4).
		server := netip.AddrFrom4([4]byte{b[4], b[5], b[6], b[7]})
		client := netip.AddrFrom4([4]byte{^b[12], ^b[13], ^b[14], ^b[15]})
		return []netip.Addr{server, client}
	}
	return nil
}
