// Package egress is the sandbox's registries network: an HTTP proxy (CONNECT for HTTPS, and
// absolute-URI forwarding for plain HTTP) that runs in the worker, outside the sandbox, and
// lets a sandboxed command reach only listed hosts (DefaultAllow plus the template's allow).
//
// The proxy resolves every name itself and connects to the address it vetted, never to the
// name, so a listed name that resolves (or re-resolves) to loopback, a private network, a
// link-local or metadata address is refused (Reachable) with no DNS-rebinding window. Every
// refused connection is reported with its host, port and reason. The sandbox reaches the
// proxy through a Unix socket bound into it (proc's egress bridge).
package egress

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"os"
	"path"
	"strconv"
	"strings"
	"sync"
	"time"

	"outerloop/workitems"
)

// Reason says why a connection was refused.
type Reason string

// Reasons.
const (
	ReasonNotAllowed     Reason = "not_allowed"     // the host (or port) is not listed
	ReasonPrivateAddress Reason = "private_address" // listed, but resolves only to addresses never reached
	ReasonResolveFailed  Reason = "resolve_failed"  // listed, but its name did not resolve
	// ReasonOriginForm: a request in origin form (GET /path) sent to the proxy as if it were
	// the server; Host and Port are its Host header's.
	ReasonOriginForm Reason = "origin_form"
	// ReasonBadTarget: a CONNECT target or absolute URI the proxy cannot carry (no port, a
	// bad port, a scheme other than http).
	ReasonBadTarget Reason = "bad_target"
)

// Reasons lists the reasons a connection is refused.
func Reasons() []Reason {
	return []Reason{ReasonNotAllowed, ReasonPrivateAddress, ReasonResolveFailed, ReasonOriginForm, ReasonBadTarget}
}

// Refusal is one refused connection.
type Refusal struct {
	Host   string
	Port   int
	Reason Reason
}

// Resolver resolves a host name to addresses (*net.Resolver is one).
type Resolver interface {
	LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error)
}

// Dialer connects to a vetted address (*net.Dialer is one).
type Dialer interface {
	DialContext(ctx context.Context, network, address string) (net.Conn, error)
}

// Options configures a Proxy.
type Options struct {
	Allow    []string      // host or host:port entries (a bare host allows 80 and 443)
	Resolver Resolver      // nil: net.DefaultResolver
	Dialer   Dialer        // nil: a net.Dialer with DialTimeout
	Refused  func(Refusal) // called for each refused connection (may be nil)
	Logger   *slog.Logger  // nil: slog.Default()
	// Files are read-only trees the proxy serves itself over plain HTTP under a host name,
	// never dialing out (the worker's Go module cache: ModuleCacheFS).
	Files map[string]fs.FS
	// DialTimeout bounds resolving and connecting (default 15s); HeaderTimeout bounds reading
	// a client's request head (default 30s).
	DialTimeout   time.Duration
	HeaderTimeout time.Duration
	// Clock sets the connections' read deadlines (nil: the system clock; a net.Conn deadline
	// is wall time, so only a test would pass another).
	Clock workitems.Clock
}

// Proxy is an allowlisting HTTP proxy. Serve it on any listener; Close ends it and every
// connection it carries.
type Proxy struct {
	o     Options
	allow allowList

	mu        sync.Mutex
	closed    bool
	listeners map[net.Listener]struct{}
	conns     map[net.Conn]struct{}
	wg        sync.WaitGroup
}

// New returns a proxy.
func New(o Options) *Proxy {
	if o.Resolver == nil {
		o.Resolver = net.DefaultResolver
	}
	if o.DialTimeout <= 0 {
		o.DialTimeout = 15 * time.Second
	}
	if o.Clock == nil {
		o.Clock = workitems.SystemClock{}
	}
	if o.HeaderTimeout <= 0 {
		o.HeaderTimeout = 30 * time.Second
	}
	if o.Dialer == nil {
		o.Dialer = &net.Dialer{Timeout: o.DialTimeout}
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	return &Proxy{o: o, allow: newAllowList(o.Allow), listeners: map[net.Listener]struct{}{}, conns: map[net.Conn]struct{}{}}
}

// ErrClosed is returned by Serve once the proxy is closed.
var ErrClosed = errors.New("egress: proxy closed")

// Serve accepts connections on l until l or the proxy is closed.
func (p *Proxy) Serve(l net.Listener) error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		_ = l.Close()
		return ErrClosed
	}
	p.listeners[l] = struct{}{}
	p.wg.Add(1)
	p.mu.Unlock()
	defer p.wg.Done()
	for {
		c, err := l.Accept()
		if err != nil {
			p.mu.Lock()
			closed := p.closed
			delete(p.listeners, l)
			p.mu.Unlock()
			if closed {
				return ErrClosed
			}
			return fmt.Errorf("egress: accept: %w", err)
		}
		if !p.track(c) {
			_ = c.Close()
			return ErrClosed
		}
		go func() {
			defer p.wg.Done()
			defer p.untrack(c)
			p.handle(c)
		}()
	}
}

// Close stops every listener and connection and waits for their handlers.
func (p *Proxy) Close() error {
	p.mu.Lock()
	p.closed = true
	for l := range p.listeners {
		_ = l.Close()
	}
	for c := range p.conns {
		_ = c.Close()
	}
	p.mu.Unlock()
	p.wg.Wait()
	return nil
}

func (p *Proxy) track(c net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return false
	}
	p.conns[c] = struct{}{}
	p.wg.Add(1)
	return true
}

func (p *Proxy) untrack(c net.Conn) {
	_ = c.Close()
	p.mu.Lock()
	delete(p.conns, c)
	p.mu.Unlock()
}

// handle serves one client connection: one CONNECT tunnel, or plain-HTTP requests forwarded
// one upstream connection each.
func (p *Proxy) handle(c net.Conn) {
	br := bufio.NewReader(c)
	for {
		_ = c.SetReadDeadline(p.o.Clock.Now().Add(p.o.HeaderTimeout))
		req, err := http.ReadRequest(br)
		if err != nil {
			return
		}
		_ = c.SetReadDeadline(time.Time{})
		if req.Method == http.MethodConnect {
			p.tunnel(c, br, req)
			return
		}
		if !p.forward(c, req) {
			return
		}
	}
}

// tunnel answers a CONNECT: vets the target, connects to the vetted address and splices.
func (p *Proxy) tunnel(c net.Conn, br *bufio.Reader, req *http.Request) {
	host, port, err := splitHostPort(req.Host, 443)
	if err != nil {
		p.refused(Refusal{Host: req.Host, Reason: ReasonBadTarget})
		writeStatus(c, http.StatusBadRequest, "egress: bad CONNECT target "+strconv.Quote(req.Host))
		return
	}
	up, status, msg := p.connect(req.Context(), host, port)
	if up == nil {
		writeStatus(c, status, msg)
		return
	}
	defer up.Close()
	if !p.track(up) {
		return
	}
	defer func() { p.untrack(up); p.wg.Done() }()
	if _, err := io.WriteString(c, "HTTP/1.1 200 Connection established\r\n\r\n"); err != nil {
		return
	}
	// Bytes the client sent right behind its request head (a TLS hello) go first.
	if n := br.Buffered(); n > 0 {
		b, _ := br.Peek(n)
		if _, err := up.Write(b); err != nil {
			return
		}
	}
	splice(c, up)
}

// forward sends one plain-HTTP request in absolute form to its vetted host and copies the
// response back; it reports whether the client connection may carry another request.
func (p *Proxy) forward(c net.Conn, req *http.Request) bool {
	if req.URL.Host == "" {
		// Origin form: a client that took the proxy for the server (or probes it). What it
		// meant to reach is its Host header, if anything.
		host, port, err := splitHostPort(req.Host, 80)
		if err != nil {
			host, port = req.Host, 0
		}
		p.refused(Refusal{Host: host, Port: port, Reason: ReasonOriginForm})
		writeStatus(c, http.StatusBadRequest, "egress: this is a proxy: send an absolute http:// URI, or CONNECT for https")
		return false
	}
	def := 80
	if req.URL.Scheme == "https" {
		def = 443
	}
	host, port, err := splitHostPort(req.URL.Host, def)
	if err != nil || req.URL.Scheme != "http" {
		if err != nil {
			host, port = req.URL.Host, 0
		}
		p.refused(Refusal{Host: host, Port: port, Reason: ReasonBadTarget})
		writeStatus(c, http.StatusBadRequest, "egress: only absolute http:// URIs are forwarded (CONNECT for https), not "+strconv.Quote(req.URL.Scheme+"://"+req.URL.Host))
		return false
	}
	if fsys, ok := p.o.Files[normalHost(host)]; ok {
		return serveFile(c, req, fsys)
	}
	up, status, msg := p.connect(req.Context(), host, port)
	if up == nil {
		writeStatus(c, status, msg)
		return false // the answer said Connection: close
	}
	if !p.track(up) {
		_ = up.Close()
		return false
	}
	defer func() { p.untrack(up); p.wg.Done() }()
	for _, h := range []string{"Proxy-Connection", "Proxy-Authorization", "Keep-Alive", "Te", "Trailer", "Upgrade"} {
		req.Header.Del(h)
	}
	req.RequestURI = ""
	req.Close = true // one upstream connection per request: the response ends with it
	if err := req.Write(up); err != nil {
		writeStatus(c, http.StatusBadGateway, "egress: "+host+": "+err.Error())
		return false
	}
	resp, err := http.ReadResponse(bufio.NewReader(up), req)
	if err != nil {
		writeStatus(c, http.StatusBadGateway, "egress: "+host+": "+err.Error())
		return false
	}
	defer resp.Body.Close()
	keep := !req.Close && !resp.Close
	resp.Close = !keep
	if err := resp.Write(c); err != nil {
		return false
	}
	return keep
}

// connect vets host:port and connects to its first reachable address. On refusal it reports
// it and returns the status and message for the client.
func (p *Proxy) connect(ctx context.Context, host string, port int) (net.Conn, int, string) {
	ctx, cancel := context.WithTimeout(ctx, p.o.DialTimeout)
	defer cancel()
	addrs, r := p.Vet(ctx, host, port)
	if r != nil {
		p.refused(*r)
		switch r.Reason {
		case ReasonNotAllowed:
			return nil, http.StatusForbidden, fmt.Sprintf("egress: %s:%d is not in the sandbox's allow list (sandbox: {allow: [...]})", host, port)
		case ReasonPrivateAddress:
			return nil, http.StatusForbidden, fmt.Sprintf("egress: %s resolves only to addresses the sandbox never reaches (loopback, private, link-local, metadata)", host)
		}
		return nil, http.StatusBadGateway, fmt.Sprintf("egress: %s does not resolve", host)
	}
	var last error
	for _, a := range addrs {
		up, err := p.o.Dialer.DialContext(ctx, "tcp", netip.AddrPortFrom(a, uint16(port)).String())
		if err == nil {
			return up, 0, ""
		}
		last = err
	}
	p.o.Logger.Debug("egress: connect failed", "host", host, "port", port, "err", last)
	return nil, http.StatusBadGateway, fmt.Sprintf("egress: %s:%d: %v", host, port, last)
}

// Vet returns the addresses host:port may be reached at, or why it may not: the host must be
// listed for that port, resolve, and resolve to at least one Reachable address (only those
// are returned). An IP literal is reached only when listed, and never when not Reachable.
func (p *Proxy) Vet(ctx context.Context, host string, port int) ([]netip.Addr, *Refusal) {
	host = normalHost(host)
	refuse := func(r Reason) ([]netip.Addr, *Refusal) { return nil, &Refusal{Host: host, Port: port, Reason: r} }
	if !p.allow.allows(host, port) {
		return refuse(ReasonNotAllowed)
	}
	var addrs []netip.Addr
	if a, err := netip.ParseAddr(host); err == nil {
		addrs = []netip.Addr{a}
	} else {
		addrs, err = p.o.Resolver.LookupNetIP(ctx, "ip", host)
		if err != nil || len(addrs) == 0 {
			return refuse(ReasonResolveFailed)
		}
	}
	var ok []netip.Addr
	for _, a := range addrs {
		if Reachable(a) {
			ok = append(ok, a.Unmap())
		}
	}
	if len(ok) == 0 {
		return refuse(ReasonPrivateAddress)
	}
	return ok, nil
}

// refused reports r, its host normalised and clipped: it is the client's to write.
func (p *Proxy) refused(r Refusal) {
	r.Host = normalHost(r.Host)
	if len(r.Host) > maxReportedHost {
		r.Host = strings.ToValidUTF8(r.Host[:maxReportedHost], "") + "…"
	}
	p.o.Logger.Debug("egress: connection refused", "host", r.Host, "port", r.Port, "reason", r.Reason)
	if p.o.Refused != nil {
		p.o.Refused(r)
	}
}

// maxReportedHost bounds the host a refusal names: a DNS name has at most 253 bytes, and a
// request head may carry far more.
const maxReportedHost = 253

// serveFile answers a GET or HEAD from fsys (404 for anything it does not hold); it reports
// whether the client connection may carry another request.
func serveFile(c net.Conn, req *http.Request, fsys fs.FS) bool {
	name := strings.TrimPrefix(path.Clean("/"+req.URL.Path), "/")
	keep := !req.Close
	notFound := func() bool {
		msg := "not found\n"
		_, err := fmt.Fprintf(c, "HTTP/1.1 404 Not Found\r\nContent-Type: text/plain\r\nContent-Length: %d\r\n%s\r\n%s", len(msg), connHeader(keep), msg)
		return keep && err == nil
	}
	if (req.Method != http.MethodGet && req.Method != http.MethodHead) || !fs.ValidPath(name) {
		return notFound()
	}
	f, err := fsys.Open(name)
	if err != nil {
		return notFound()
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil || !st.Mode().IsRegular() {
		return notFound()
	}
	if _, err := fmt.Fprintf(c, "HTTP/1.1 200 OK\r\nContent-Type: application/octet-stream\r\nContent-Length: %d\r\n%s\r\n", st.Size(), connHeader(keep)); err != nil {
		return false
	}
	if req.Method == http.MethodGet {
		if n, err := io.Copy(c, f); err != nil || n != st.Size() {
			return false
		}
	}
	return keep
}

func connHeader(keep bool) string {
	if keep {
		return ""
	}
	return "Connection: close\r\n"
}

// ModuleCacheFS is a Go module cache's download directory (GOMODCACHE/cache/download) as a
// GOPROXY serves it, immutable files only: a version's .info, .mod and .zip. Version lists,
// @latest and the checksum database are not served, so a client asks its next GOPROXY entry
// for them and sees every published version, not only the cached ones.
func ModuleCacheFS(dir string) fs.FS { return moduleCache{os.DirFS(dir)} }

type moduleCache struct{ fsys fs.FS }

func (m moduleCache) Open(name string) (fs.File, error) {
	ext := path.Ext(name)
	if !strings.Contains(name, "/@v/") || strings.HasPrefix(name, "sumdb/") || (ext != ".info" && ext != ".mod" && ext != ".zip") {
		return nil, &fs.PathError{Op: "open", Path: name, Err: fs.ErrNotExist}
	}
	return m.fsys.Open(name)
}

// splitHostPort splits an authority with def as the port when it names none.
func splitHostPort(hostport string, def int) (string, int, error) {
	host, ps, err := net.SplitHostPort(hostport)
	if err != nil {
		if strings.Contains(err.Error(), "missing port") {
			return strings.Trim(hostport, "[]"), def, nil
		}
		return "", 0, err
	}
	port, err := strconv.Atoi(ps)
	if err != nil || port < 1 || port > 65535 {
		return "", 0, fmt.Errorf("bad port %q", ps)
	}
	if host == "" {
		return "", 0, errors.New("empty host")
	}
	return host, port, nil
}

// writeStatus answers with status and a one-line text body.
func writeStatus(w io.Writer, status int, msg string) {
	_, _ = fmt.Fprintf(w, "HTTP/1.1 %d %s\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s\n",
		status, http.StatusText(status), len(msg)+1, msg)
}

// splice copies both ways until both directions ended, passing a half-close on.
func splice(a, b net.Conn) {
	done := make(chan struct{}, 2)
	cp := func(dst, src net.Conn) {
		_, _ = io.Copy(dst, src)
		if cw, ok := dst.(interface{ CloseWrite() error }); ok {
			_ = cw.CloseWrite()
		} else {
			_ = dst.Close()
		}
		done <- struct{}{}
	}
	go cp(a, b)
	go cp(b, a)
	<-done
	<-done
}
