package egress_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"outerloop/egress"
	"outerloop/lib/testwait"
)

// fakeNet is the test's DNS and network: names resolve to what the test says; a dial to a
// "public" address lands on a local test server instead. It records every lookup and dial.
type fakeNet struct {
	mu      sync.Mutex
	names   map[string][]netip.Addr
	routes  map[string]string // vetted ip:port → local server address
	lookups []string
	dials   []string
}

func (f *fakeNet) LookupNetIP(_ context.Context, _, host string) ([]netip.Addr, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.lookups = append(f.lookups, host)
	if a, ok := f.names[host]; ok {
		return a, nil
	}
	return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
}

func (f *fakeNet) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	f.mu.Lock()
	f.dials = append(f.dials, addr)
	to, ok := f.routes[addr]
	f.mu.Unlock()
	if !ok {
		return nil, fmt.Errorf("fake network: no route to %s", addr)
	}
	var d net.Dialer
	return d.DialContext(ctx, network, to)
}

func (f *fakeNet) seen() ([]string, []string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.lookups), slices.Clone(f.dials)
}

type refusals struct {
	mu  sync.Mutex
	got []egress.Refusal
}

func (r *refusals) add(x egress.Refusal) { r.mu.Lock(); r.got = append(r.got, x); r.mu.Unlock() }
func (r *refusals) list() []egress.Refusal {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.got)
}

// start serves a proxy with the allow list on loopback (the test is the sandbox's side).
func start(t *testing.T, fn *fakeNet, allow ...string) (*url.URL, *refusals, *egress.Proxy) {
	t.Helper()
	rs := &refusals{}
	p := egress.New(egress.Options{Allow: allow, Resolver: fn, Dialer: fn, Refused: rs.add, DialTimeout: 5 * time.Second})
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- p.Serve(l) }()
	t.Cleanup(func() {
		_ = p.Close()
		if err := <-done; !errors.Is(err, egress.ErrClosed) {
			t.Errorf("Serve ended with %v, want ErrClosed", err)
		}
	})
	return &url.URL{Scheme: "http", Host: l.Addr().String()}, rs, p
}

func public(s string) netip.Addr { return netip.MustParseAddr(s) }

func TestHTTPSThroughCONNECTReachesTheVettedAddressOfAListedHost(t *testing.T) {
	t.Parallel()
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = fmt.Fprintf(w, "module zip for %s", r.URL.Path)
	}))
	defer srv.Close()
	fn := &fakeNet{names: map[string][]netip.Addr{"example.com": {public("203.0.113.10")}},
		routes: map[string]string{"203.0.113.10:443": srv.Listener.Addr().String()}}
	proxyURL, rs, _ := start(t, fn, "example.com")
	tr := srv.Client().Transport.(*http.Transport).Clone()
	tr.Proxy = http.ProxyURL(proxyURL)
	c := &http.Client{Transport: tr, Timeout: 10 * time.Second}
	defer tr.CloseIdleConnections()
	resp, err := c.Get("https://example.com/golang.org/x/mod/@v/v0.1.0.zip")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || string(body) != "module zip for /golang.org/x/mod/@v/v0.1.0.zip" {
		t.Fatalf("got %d %q", resp.StatusCode, body)
	}
	lookups, dials := fn.seen()
	if !slices.Equal(lookups, []string{"example.com"}) || !slices.Equal(dials, []string{"203.0.113.10:443"}) {
		t.Fatalf("lookups %q dials %q: want the proxy to resolve the name itself and dial the vetted address", lookups, dials)
	}
	if got := rs.list(); len(got) != 0 {
		t.Fatalf("refusals %+v", got)
	}
}

func TestPlainHTTPIsForwardedInOriginForm(t *testing.T) {
	t.Parallel()
	var gotHost, gotURI, gotProxyHdr string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		gotHost, gotURI, gotProxyHdr = r.Host, r.RequestURI, r.Header.Get("Proxy-Authorization")
		_, _ = io.WriteString(w, "simple index")
	}))
	defer srv.Close()
	fn := &fakeNet{names: map[string][]netip.Addr{"pypi.example": {public("203.0.113.11")}},
		routes: map[string]string{"203.0.113.11:80": srv.Listener.Addr().String()}}
	proxyURL, _, _ := start(t, fn, "pypi.example")
	tr := &http.Transport{Proxy: http.ProxyURL(proxyURL)}
	defer tr.CloseIdleConnections()
	req, _ := http.NewRequest("GET", "http://pypi.example/simple/requests/?x=1", nil)
	req.Header.Set("Proxy-Authorization", "Basic c2VjcmV0")
	resp, err := (&http.Client{Transport: tr, Timeout: 10 * time.Second}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || string(body) != "simple index" {
		t.Fatalf("got %d %q", resp.StatusCode, body)
	}
	if gotHost != "pypi.example" || gotURI != "/simple/requests/?x=1" || gotProxyHdr != "" {
		t.Fatalf("upstream saw host %q uri %q proxy auth %q", gotHost, gotURI, gotProxyHdr)
	}
}

// connect sends a CONNECT through the proxy and returns the status line.
func connect(t *testing.T, proxy *url.URL, target string) string {
	t.Helper()
	c, err := net.DialTimeout("tcp", proxy.Host, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(testwait.Deadline(t))
	fmt.Fprintf(c, "CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n", target, target)
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		t.Fatalf("CONNECT %s: %v", target, err)
	}
	return strings.TrimSpace(line)
}

func TestRefusedConnectionsAreReportedAndNeverDialed(t *testing.T) {
	t.Parallel()
	fn := &fakeNet{names: map[string][]netip.Addr{
		"loopback.example":  {public("127.0.0.1")},
		"redis.example":     {public("::ffff:127.0.0.1")},
		"lan.example":       {public("10.1.2.3"), public("192.168.1.1"), public("fd12::1")},
		"metadata.example":  {public("169.254.169.254"), public("fd00:ec2::254")},
		"cgnat.example":     {public("100.64.1.1")},
		"zero.example":      {public("0.0.0.0")},
		"nat64.example":     {public("64:ff9b::7f00:1")},
		"sixtofour.example": {public("2002:a00:1::1")},
	}}
	allow := []string{"loopback.example", "redis.example:6379", "lan.example", "metadata.example:80", "cgnat.example",
		"zero.example", "nat64.example", "sixtofour.example", "gone.example"}
	proxyURL, rs, _ := start(t, fn, allow...)
	cases := []struct {
		target string
		status string
		want   egress.Refusal
	}{
		{"unlisted.example:443", "403", egress.Refusal{Host: "unlisted.example", Port: 443, Reason: egress.ReasonNotAllowed}},
		{"127.0.0.1:6379", "403", egress.Refusal{Host: "127.0.0.1", Port: 6379, Reason: egress.ReasonNotAllowed}},
		{"[::1]:443", "403", egress.Refusal{Host: "::1", Port: 443, Reason: egress.ReasonNotAllowed}},
		{"loopback.example:22", "403", egress.Refusal{Host: "loopback.example", Port: 22, Reason: egress.ReasonNotAllowed}},
		{"loopback.example:443", "403", egress.Refusal{Host: "loopback.example", Port: 443, Reason: egress.ReasonPrivateAddress}},
		{"Redis.Example.:6379", "403", egress.Refusal{Host: "redis.example", Port: 6379, Reason: egress.ReasonPrivateAddress}},
		{"lan.example:443", "403", egress.Refusal{Host: "lan.example", Port: 443, Reason: egress.ReasonPrivateAddress}},
		{"metadata.example:80", "403", egress.Refusal{Host: "metadata.example", Port: 80, Reason: egress.ReasonPrivateAddress}},
		{"cgnat.example:443", "403", egress.Refusal{Host: "cgnat.example", Port: 443, Reason: egress.ReasonPrivateAddress}},
		{"zero.example:443", "403", egress.Refusal{Host: "zero.example", Port: 443, Reason: egress.ReasonPrivateAddress}},
		{"nat64.example:443", "403", egress.Refusal{Host: "nat64.example", Port: 443, Reason: egress.ReasonPrivateAddress}},
		{"sixtofour.example:443", "403", egress.Refusal{Host: "sixtofour.example", Port: 443, Reason: egress.ReasonPrivateAddress}},
		{"gone.example:443", "502", egress.Refusal{Host: "gone.example", Port: 443, Reason: egress.ReasonResolveFailed}},
	}
	var want []egress.Refusal
	for _, tc := range cases {
		if got := connect(t, proxyURL, tc.target); !strings.Contains(got, " "+tc.status+" ") {
			t.Errorf("CONNECT %s: %q, want %s", tc.target, got, tc.status)
		}
		want = append(want, tc.want)
	}
	if got := rs.list(); !slices.Equal(got, want) {
		t.Errorf("refusals:\n got %+v\nwant %+v", got, want)
	}
	lookups, dials := fn.seen()
	if len(dials) != 0 {
		t.Errorf("the proxy dialed %q", dials)
	}
	for _, l := range lookups {
		if l == "unlisted.example" || l == "127.0.0.1" {
			t.Errorf("the proxy resolved %q, which is not listed", l)
		}
	}
}

func TestPlainHTTPToAnUnlistedHostIsRefused(t *testing.T) {
	t.Parallel()
	fn := &fakeNet{}
	proxyURL, rs, _ := start(t, fn, "pypi.org")
	tr := &http.Transport{Proxy: http.ProxyURL(proxyURL)}
	defer tr.CloseIdleConnections()
	resp, err := (&http.Client{Transport: tr, Timeout: 10 * time.Second}).Get("http://169.254.169.254/latest/meta-data/")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden || !strings.Contains(string(body), "allow list") {
		t.Fatalf("got %d %q, want 403 naming the allow list", resp.StatusCode, body)
	}
	if got := rs.list(); len(got) != 1 || got[0] != (egress.Refusal{Host: "169.254.169.254", Port: 80, Reason: egress.ReasonNotAllowed}) {
		t.Fatalf("refusals %+v", got)
	}
}

// request sends raw as a client's request head to the proxy and returns the status line.
func request(t *testing.T, proxy *url.URL, raw string) string {
	t.Helper()
	c, err := net.DialTimeout("tcp", proxy.Host, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(testwait.Deadline(t))
	if _, err := io.WriteString(c, raw); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		t.Fatalf("%q: %v", raw, err)
	}
	return strings.TrimSpace(line)
}

// A request the proxy cannot carry is answered 400 and, like any refusal, reported with what
// was wrong: a request in origin form (the client took the proxy for the server) under the host
// its Host header names, an absolute URI of another scheme or a target without a usable port.
func TestARequestInOriginFormOrWithABadTargetIsRefusedAndReported(t *testing.T) {
	t.Parallel()
	fn := &fakeNet{names: map[string][]netip.Addr{"pypi.example": {public("203.0.113.11")}}}
	proxyURL, rs, _ := start(t, fn, "pypi.example")
	cases := []struct {
		raw  string
		want egress.Refusal
	}{
		{"GET /latest/meta-data/ HTTP/1.1\r\nHost: 169.254.169.254\r\n\r\n",
			egress.Refusal{Host: "169.254.169.254", Port: 80, Reason: egress.ReasonOriginForm}},
		{"GET /simple/ HTTP/1.1\r\nHost: PyPI.example:8080\r\n\r\n",
			egress.Refusal{Host: "pypi.example", Port: 8080, Reason: egress.ReasonOriginForm}},
		{"GET //pypi.example/simple/ HTTP/1.1\r\nHost: pypi.example\r\n\r\n",
			egress.Refusal{Host: "pypi.example", Port: 80, Reason: egress.ReasonOriginForm}},
		{"GET https://pypi.example/simple/ HTTP/1.1\r\nHost: pypi.example\r\n\r\n",
			egress.Refusal{Host: "pypi.example", Port: 443, Reason: egress.ReasonBadTarget}},
		{"GET ftp://pypi.example/simple/ HTTP/1.1\r\nHost: pypi.example\r\n\r\n",
			egress.Refusal{Host: "pypi.example", Port: 80, Reason: egress.ReasonBadTarget}},
		{"GET http://pypi.example:99999/ HTTP/1.1\r\nHost: pypi.example\r\n\r\n",
			egress.Refusal{Host: "pypi.example:99999", Port: 0, Reason: egress.ReasonBadTarget}},
		{"CONNECT pypi.example:0 HTTP/1.1\r\nHost: pypi.example:0\r\n\r\n",
			egress.Refusal{Host: "pypi.example:0", Port: 0, Reason: egress.ReasonBadTarget}},
	}
	var want []egress.Refusal
	for _, tc := range cases {
		if got := request(t, proxyURL, tc.raw); !strings.Contains(got, " 400 ") {
			t.Errorf("%q: %q, want 400", tc.raw, got)
		}
		want = append(want, tc.want)
	}
	if got := rs.list(); !slices.Equal(got, want) {
		t.Errorf("refusals:\n got %+v\nwant %+v", got, want)
	}
	if lookups, dials := fn.seen(); len(lookups)+len(dials) != 0 {
		t.Errorf("the proxy looked up %q and dialed %q", lookups, dials)
	}
}

// A refusal names at most a DNS name's length of the host a client wrote.
func TestARefusalClipsAHostNoNameCouldHave(t *testing.T) {
	t.Parallel()
	proxyURL, rs, _ := start(t, &fakeNet{})
	long := strings.Repeat("a", 4000) + ".example"
	if got := connect(t, proxyURL, long+":443"); !strings.Contains(got, " 403 ") {
		t.Fatalf("CONNECT: %q, want 403", got)
	}
	got := rs.list()
	if len(got) != 1 || got[0].Reason != egress.ReasonNotAllowed || got[0].Port != 443 ||
		!strings.HasPrefix(long, strings.TrimSuffix(got[0].Host, "…")) || len(got[0].Host) > 253+len("…") {
		t.Fatalf("refusals %+v, want the host clipped to 253 bytes", got)
	}
}

func TestAMixedAnswerIsReachedOnlyAtItsPublicAddress(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "ok") }))
	defer srv.Close()
	fn := &fakeNet{names: map[string][]netip.Addr{"mixed.example": {public("127.0.0.1"), public("10.0.0.1"), public("198.51.100.7")}},
		routes: map[string]string{"198.51.100.7:80": srv.Listener.Addr().String(), "127.0.0.1:80": srv.Listener.Addr().String()}}
	proxyURL, _, _ := start(t, fn, "mixed.example")
	tr := &http.Transport{Proxy: http.ProxyURL(proxyURL)}
	defer tr.CloseIdleConnections()
	resp, err := (&http.Client{Transport: tr, Timeout: 10 * time.Second}).Get("http://mixed.example/")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if _, dials := fn.seen(); !slices.Equal(dials, []string{"198.51.100.7:80"}) {
		t.Fatalf("dials %q, want only the public address", dials)
	}
}

func TestCloseEndsOpenTunnels(t *testing.T) {
	t.Parallel()
	// An upstream that accepts and never writes: the tunnel stays open until the proxy closes.
	up, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer up.Close()
	go func() {
		for {
			c, err := up.Accept()
			if err != nil {
				return
			}
			defer c.Close()
		}
	}()
	fn := &fakeNet{names: map[string][]netip.Addr{"slow.example": {public("203.0.113.20")}},
		routes: map[string]string{"203.0.113.20:443": up.Addr().String()}}
	proxyURL, _, p := start(t, fn, "slow.example")
	c, err := net.DialTimeout("tcp", proxyURL.Host, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(testwait.Deadline(t))
	fmt.Fprintf(c, "CONNECT slow.example:443 HTTP/1.1\r\nHost: slow.example:443\r\n\r\n")
	br := bufio.NewReader(c)
	if line, _ := br.ReadString('\n'); !strings.Contains(line, " 200 ") {
		t.Fatalf("CONNECT: %q", line)
	}
	closed := make(chan struct{})
	go func() { _ = p.Close(); close(closed) }()
	select {
	case <-closed:
	case <-testwait.After(t):
		t.Fatal("Close did not end the open tunnel")
	}
	if _, err := io.ReadAll(br); err != nil && !errors.Is(err, net.ErrClosed) && !strings.Contains(err.Error(), "reset") {
		t.Fatalf("tunnel after Close: %v", err)
	}
}

func TestReachable(t *testing.T) {
	t.Parallel()
	for _, s := range []string{"8.8.8.8", "142.250.1.1", "2607:f8b0::1", "198.51.100.7"} {
		if !egress.Reachable(netip.MustParseAddr(s)) {
			t.Errorf("%s is public", s)
		}
	}
	for _, s := range []string{"127.0.0.1", "127.1.2.3", "::1", "10.0.0.1", "172.16.5.4", "192.168.0.1", "fc00::1", "fd00:ec2::254",
		"169.254.169.254", "fe80::1", "100.64.0.1", "100.127.255.254", "0.0.0.0", "::", "224.0.0.1", "ff02::1",
		"255.255.255.255", "::ffff:10.0.0.1", "64:ff9b::a9fe:a9fe", "2002:c0a8:101::1", "::127.0.0.1"} {
		if egress.Reachable(netip.MustParseAddr(s)) {
			t.Errorf("%s must never be reached", s)
		}
	}
}

func TestDefaultAllowListsTheRegistries(t *testing.T) {
	t.Parallel()
	fn := &fakeNet{names: map[string][]netip.Addr{}}
	p := egress.New(egress.Options{Allow: egress.DefaultAllow(), Resolver: fn, Dialer: fn})
	for _, h := range []string{"proxy.golang.org", "sum.golang.org", "registry.npmjs.org", "pypi.org", "files.pythonhosted.org",
		"crates.io", "static.crates.io", "index.crates.io", "repo.maven.apache.org", "repo1.maven.org", "rubygems.org", "index.rubygems.org"} {
		if _, r := p.Vet(context.Background(), h, 443); r == nil || r.Reason != egress.ReasonResolveFailed {
			t.Errorf("%s: %+v, want it listed (then refused only for not resolving here)", h, r)
		}
	}
	if _, r := p.Vet(context.Background(), "github.com", 443); r == nil || r.Reason != egress.ReasonNotAllowed {
		t.Errorf("github.com: %+v, want not_allowed by default", r)
	}
}

func TestTheModuleCacheIsServedWithoutVersionLists(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	v := filepath.Join(dir, "rsc.io", "quote", "@v")
	if err := os.MkdirAll(v, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{"list", "v1.5.2.info", "v1.5.2.mod", "v1.5.2.zip", "v1.5.2.lock"} {
		if err := os.WriteFile(filepath.Join(v, n), []byte("content of "+n), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	fn := &fakeNet{}
	rs := &refusals{}
	p := egress.New(egress.Options{Resolver: fn, Dialer: fn, Refused: rs.add, Files: map[string]fs.FS{"cache.invalid": egress.ModuleCacheFS(dir)}})
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = p.Serve(l) }()
	defer p.Close()
	tr := &http.Transport{Proxy: http.ProxyURL(&url.URL{Scheme: "http", Host: l.Addr().String()})}
	defer tr.CloseIdleConnections()
	c := &http.Client{Transport: tr, Timeout: 10 * time.Second}
	for path, want := range map[string]int{"/rsc.io/quote/@v/v1.5.2.zip": 200, "/rsc.io/quote/@v/v1.5.2.mod": 200, "/rsc.io/quote/@v/v1.5.2.info": 200,
		"/rsc.io/quote/@v/list": 404, "/rsc.io/quote/@v/v1.5.2.lock": 404, "/rsc.io/quote/@latest": 404, "/../../etc/passwd": 404, "/sumdb/sum.golang.org/supported": 404} {
		resp, err := c.Get("http://cache.invalid" + path)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Errorf("%s: %d %q, want %d", path, resp.StatusCode, body, want)
		} else if want == 200 && string(body) != "content of "+filepath.Base(path) {
			t.Errorf("%s: body %q", path, body)
		}
	}
	if lookups, dials := fn.seen(); len(lookups)+len(dials) != 0 || len(rs.list()) != 0 {
		t.Fatalf("serving the cache looked up %q, dialed %q, refused %+v", lookups, dials, rs.list())
	}
}
