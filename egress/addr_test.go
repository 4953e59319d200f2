package egress_test

import (
	"math/rand/v2"
	"net/netip"
	"testing"

	"outerloop/egress"
)

// refusedV4 are the IPv4 ranges the proxy never reaches: the specification the property tests
// hold Reachable to (docs/sandbox-network.md, "Never reachable").
var refusedV4 = []netip.Prefix{
	netip.MustParsePrefix("0.0.0.0/8"),
	netip.MustParsePrefix("10.0.0.0/8"),
	netip.MustParsePrefix("100.64.0.0/10"),
	netip.MustParsePrefix("127.0.0.0/8"),
	netip.MustParsePrefix("169.254.0.0/16"),
	netip.MustParsePrefix("172.16.0.0/12"),
	netip.MustParsePrefix("192.0.0.0/24"),
	netip.MustParsePrefix("192.168.0.0/16"),
	netip.MustParsePrefix("198.18.0.0/15"),
	netip.MustParsePrefix("224.0.0.0/4"),
	netip.MustParsePrefix("240.0.0.0/4"),
}

// refusedSpecials are addresses an attack names first.
var refusedSpecials = []string{"127.0.0.1", "169.254.169.254", "169.254.170.2", "100.100.100.200", "10.0.0.1",
	"172.17.0.1", "192.168.1.1", "0.0.0.0", "255.255.255.255", "192.0.0.192", "224.0.0.251"}

func isRefusedV4(a netip.Addr) bool {
	for _, p := range refusedV4 {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// v4In returns a random address of p.
func v4In(rng *rand.Rand, p netip.Prefix) netip.Addr {
	b := p.Addr().As4()
	host := rng.Uint32() >> p.Bits()
	v := uint32(b[0])<<24 | uint32(b[1])<<16 | uint32(b[2])<<8 | uint32(b[3]) | host
	return netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)})
}

// publicV4 returns a random address outside every refused range.
func publicV4(rng *rand.Rand) netip.Addr {
	for {
		a := v4In(rng, netip.MustParsePrefix("0.0.0.0/0"))
		if !isRefusedV4(a) {
			return a
		}
	}
}

// An embedding writes an IPv4 address into an IPv6 one; noise fills the bits the form leaves
// free (subnet, interface id, Teredo's flags and port), other is Teredo's other end (bothEnds).
type embedding struct {
	name     string
	embed    func(v4, other netip.Addr, noise [16]byte) netip.Addr
	bothEnds bool
}

func v6(b [16]byte) netip.Addr { return netip.AddrFrom16(b) }

var embeddings = []embedding{
	{"IPv4-mapped ::ffff:0:0/96", func(v4, _ netip.Addr, _ [16]byte) netip.Addr {
		return netip.AddrFrom16(v4.As16()) // As16 of an IPv4 address is its mapped form
	}, false},
	{"SIIT IPv4-translated ::ffff:0:0:0/96", func(v4, _ netip.Addr, _ [16]byte) netip.Addr {
		b, a := [16]byte{8: 0xff, 9: 0xff}, v4.As4()
		copy(b[12:], a[:])
		return v6(b)
	}, false},
	{"IPv4-compatible ::/96", func(v4, _ netip.Addr, _ [16]byte) netip.Addr {
		var b [16]byte
		a := v4.As4()
		copy(b[12:], a[:])
		return v6(b)
	}, false},
	{"NAT64 well-known 64:ff9b::/96", func(v4, _ netip.Addr, _ [16]byte) netip.Addr {
		b, a := [16]byte{1: 0x64, 2: 0xff, 3: 0x9b}, v4.As4()
		copy(b[12:], a[:])
		return v6(b)
	}, false},
	{"6to4 2002::/16", func(v4, _ netip.Addr, n [16]byte) netip.Addr {
		b, a := n, v4.As4()
		b[0], b[1] = 0x20, 0x02
		copy(b[2:6], a[:])
		return v6(b)
	}, false},
	{"Teredo 2001::/32 server", func(v4, other netip.Addr, n [16]byte) netip.Addr {
		return teredoAddr(v4, other, n)
	}, true},
	{"Teredo 2001::/32 client", func(v4, other netip.Addr, n [16]byte) netip.Addr {
		return teredoAddr(other, v4, n)
	}, true},
}

// teredoAddr is 2001:0:server:flags:port:^client (RFC 4380 section 4).
func teredoAddr(server, client netip.Addr, n [16]byte) netip.Addr {
	b, s, c := n, server.As4(), client.As4()
	b[0], b[1], b[2], b[3] = 0x20, 0x01, 0, 0
	copy(b[4:8], s[:])
	for i := range 4 {
		b[12+i] = ^c[i]
	}
	return v6(b)
}

// nat64LocalUse48 embeds v4 as RFC 6052 section 2.2 does for a /48 prefix, here the local-use
// 64:ff9b:1::/48: v4's first two bytes in bits 48..63, the u octet (bits 64..71) zero, its last
// two in bits 72..87, then the suffix.
func nat64LocalUse48(v4 netip.Addr, n [16]byte) netip.Addr {
	b, a := n, v4.As4()
	copy(b[:6], []byte{0, 0x64, 0xff, 0x9b, 0, 1})
	b[6], b[7], b[8], b[9], b[10] = a[0], a[1], 0, a[2], a[3]
	return v6(b)
}

func noise(rng *rand.Rand) [16]byte {
	var n [16]byte
	for i := range n {
		n[i] = byte(rng.UintN(256))
	}
	return n
}

// Every IPv6 form that embeds a refused IPv4 address is refused, for many addresses of every
// refused range and for the addresses attacks name first; the same forms of public addresses
// stay reachable, except NAT64's local-use prefix, which is refused whole.
func TestEveryIPv6FormOfARefusedIPv4AddressIsRefused(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(36, 6052))
	var refused []netip.Addr
	for _, s := range refusedSpecials {
		refused = append(refused, netip.MustParseAddr(s))
	}
	for _, p := range refusedV4 {
		for range 500 {
			refused = append(refused, v4In(rng, p))
		}
	}
	for _, v4 := range refused {
		if !isRefusedV4(v4) {
			t.Fatalf("test generator: %s is outside the refused ranges", v4)
		}
		if egress.Reachable(v4) {
			t.Errorf("%s is reachable", v4)
		}
		for _, e := range embeddings {
			if a := e.embed(v4, publicV4(rng), noise(rng)); egress.Reachable(a) {
				t.Errorf("%s: %s embeds %s and is reachable", e.name, a, v4)
			}
		}
		if a := nat64LocalUse48(v4, noise(rng)); egress.Reachable(a) {
			t.Errorf("NAT64 local-use /48: %s embeds %s and is reachable", a, v4)
		}
	}
	for range 5000 {
		v4 := publicV4(rng)
		if !egress.Reachable(v4) {
			t.Errorf("%s is public and refused", v4)
		}
		for _, e := range embeddings {
			if a := e.embed(v4, publicV4(rng), noise(rng)); !egress.Reachable(a) {
				t.Errorf("%s: %s embeds only public addresses (%s) and is refused", e.name, a, v4)
			}
		}
		if a := nat64LocalUse48(v4, noise(rng)); egress.Reachable(a) {
			t.Errorf("NAT64 local-use: %s is reachable, want the whole prefix refused", a)
		}
	}
}

// FuzzAnEmbeddingIsReachableExactlyWhenItsIPv4AddressesAre: for any IPv4 address (and any
// filler bits), each IPv6 form embedding it is reachable exactly when every IPv4 address it
// embeds is, and no address of NAT64's local-use prefix is reachable. The seed corpus runs as
// an ordinary test.
func FuzzAnEmbeddingIsReachableExactlyWhenItsIPv4AddressesAre(f *testing.F) {
	pub := netip.MustParseAddr("198.51.100.7").As4()
	for _, s := range append(refusedSpecials, "8.8.8.8", "203.0.113.10", "1.1.1.1", "100.63.255.255", "100.128.0.0", "172.32.0.1",
		"198.17.255.255", "198.20.0.0", "223.255.255.255", "192.0.1.1") {
		a := netip.MustParseAddr(s).As4()
		f.Add(a[0], a[1], a[2], a[3], pub[0], pub[1], pub[2], pub[3], []byte("free bits of the form"))
	}
	f.Fuzz(func(t *testing.T, a0, a1, a2, a3, o0, o1, o2, o3 byte, fill []byte) {
		v4, other := netip.AddrFrom4([4]byte{a0, a1, a2, a3}), netip.AddrFrom4([4]byte{o0, o1, o2, o3})
		var n [16]byte
		copy(n[:], fill)
		want := egress.Reachable(v4)
		if want == isRefusedV4(v4) {
			t.Fatalf("Reachable(%s) = %v, but the refused ranges say %v", v4, want, !isRefusedV4(v4))
		}
		for _, e := range embeddings {
			a := e.embed(v4, other, n)
			w := want
			if e.bothEnds {
				w = want && egress.Reachable(other)
			}
			if got := egress.Reachable(a); got != w {
				t.Errorf("%s: Reachable(%s) = %v, want %v (%s, other end %s)", e.name, a, got, w, v4, other)
			}
		}
		if a := nat64LocalUse48(v4, n); egress.Reachable(a) {
			t.Errorf("NAT64 local-use: %s is reachable", a)
		}
	})
}
