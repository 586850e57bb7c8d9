package kongdouble

import (
	"bytes"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"strconv"
	"time"
)

// The stream data plane: what Kong 3.9's stream subsystem does with a real
// TCP connection or UDP datagram once RouteStream picked a route (see
// stream.go for the routing and its two layers on an ssl listen):
//
//   - ssl listen: nginx's ssl_preread reads the ClientHello without
//     answering it (up to preread_timeout, 30 s); a "tls" route hands the
//     connection to Kong's TLS terminator, which serves the certificate Kong
//     has for the SNI (the same lookup as the http subsystem's, else Kong's
//     default certificate) and proxies the plaintext; a "tls_passthrough"
//     route proxies the bytes as they came, ClientHello included.
//   - tcp listen: the bytes are proxied as they come.
//   - udp listen: each client address is a session with its own upstream
//     socket; datagrams go both ways.
//   - the balancer picks a target of the service's upstream as for http
//     (weighted round robin) and moves to the next one when it cannot
//     connect, up to the service's retries; with none left, or no service,
//     no target or a service protocol other than tcp/udp (Kong would speak
//     TLS to a "tls" service; konglet never asks for it, and the double
//     refuses to guess), the connection is closed.
//   - a session ends when either side closes (proxy_half_close is off), or
//     after the service's read_timeout without data either way
//     (proxy_timeout).

// prereadTimeout is nginx's preread_timeout default.
const prereadTimeout = 30 * time.Second

// ServeConn proxies one TCP connection accepted on the stream listen
// listenPort, and closes it when the session ends.
func (p *DataPlane) ServeConn(listenPort int, conn net.Conn) {
	if !p.track(conn) {
		_ = conn.Close()
		return
	}
	defer p.untrack(conn)
	defer conn.Close()
	req := StreamRequest{ListenPort: listenPort}
	req.SrcIP, req.SrcPort = hostPort(conn.RemoteAddr())
	req.DstIP, _ = hostPort(conn.LocalAddr())
	client := conn
	if l, ok := p.d.streamListener(listenPort); ok && l.SSL {
		consumed, sni, isTLS := prereadHello(conn)
		req.TLS, req.SNI = isTLS, sni
		client = &replayConn{Conn: conn, r: io.MultiReader(bytes.NewReader(consumed), conn)}
	}
	dec, ok := p.d.RouteStream(req)
	if !ok {
		return
	}
	if dec.TerminateTLS {
		tc := tls.Server(client, p.streamTLSConfig())
		if err := tc.Handshake(); err != nil {
			return
		}
		client = tc
	}
	up := p.dialStream(dec, "tcp")
	if up == nil {
		return
	}
	defer up.Close()
	idle := msField(p.serviceEntity(dec.ServiceName), "read_timeout")
	touch := func() {
		deadline := time.Now().Add(idle)
		_ = client.SetReadDeadline(deadline)
		_ = up.SetReadDeadline(deadline)
	}
	done := make(chan struct{}, 2)
	go func() { pipe(up, client, touch); done <- struct{}{} }()
	go func() { pipe(client, up, touch); done <- struct{}{} }()
	<-done
	_ = conn.Close()
	_ = up.Close()
	<-done
}

// pipe copies src to dst until either fails; touch runs before every read
// (both directions share the session's idle deadline, nginx's
// proxy_timeout, which Kong sets from the service's timeouts).
func pipe(dst, src net.Conn, touch func()) {
	buf := make([]byte, 32*1024)
	for {
		touch()
		n, err := src.Read(buf)
		if n > 0 {
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// streamTLSConfig is the stream TLS terminator's: the certificate by SNI,
// no ALPN.
func (p *DataPlane) streamTLSConfig() *tls.Config {
	return &tls.Config{
		MinVersion: tls.VersionTLS12,
		GetCertificate: func(hello *tls.ClientHelloInfo) (*tls.Certificate, error) {
			if c := p.certificateFor(hello); c != nil {
				return c, nil
			}
			return p.defaultCertificate()
		},
	}
}

// dialStream connects to a target of the decision's service over network
// ("tcp" or "udp"), nil when none can be reached.
func (p *DataPlane) dialStream(dec Decision, network string) net.Conn {
	svc := p.serviceEntity(dec.ServiceName)
	if svc == nil {
		return nil
	}
	if proto, _ := svc["protocol"].(string); proto != network {
		return nil
	}
	var targets []Target
	if dec.UpstreamName != "" {
		targets = p.order(dec.UpstreamName, dec.Targets)
	} else {
		targets = []Target{{Target: net.JoinHostPort(dec.ServiceHost, strconv.Itoa(dec.ServicePort)), Weight: 100}}
	}
	if len(targets) == 0 {
		return nil
	}
	retries := 5
	if rv, ok := svc["retries"].(float64); ok {
		retries = int(rv)
	}
	timeout := msField(svc, "connect_timeout")
	for attempt := 0; attempt <= retries; attempt++ {
		addr := targets[attempt%len(targets)].Target
		if p.resolve != nil {
			resolved, ok := p.resolve(addr)
			if !ok {
				continue
			}
			addr = resolved
		}
		if c, err := net.DialTimeout(network, addr, timeout); err == nil {
			return c
		}
	}
	return nil
}

// ServeUDP serves the udp stream listen listenPort on pc until pc is
// closed, with the data plane dataPlane returns for each datagram (it may
// change as the Kong behind the listen does).
func ServeUDP(pc net.PacketConn, listenPort int, dataPlane func() *DataPlane) error {
	buf := make([]byte, 64*1024)
	for {
		n, from, err := pc.ReadFrom(buf)
		if err != nil {
			return err
		}
		dataPlane().datagram(pc, listenPort, from, bytes.Clone(buf[:n]))
	}
}

type udpSession struct {
	up      net.Conn
	timeout time.Duration
}

// datagram forwards one datagram from a client, opening its session on
// the first one.
func (p *DataPlane) datagram(pc net.PacketConn, listenPort int, from net.Addr, payload []byte) {
	key := strconv.Itoa(listenPort) + "/" + from.String()
	p.mu.Lock()
	s := p.udp[key]
	p.mu.Unlock()
	if s == nil {
		req := StreamRequest{ListenPort: listenPort, UDP: true}
		req.SrcIP, req.SrcPort = hostPort(from)
		req.DstIP, _ = hostPort(pc.LocalAddr())
		dec, ok := p.d.RouteStream(req)
		if !ok {
			return
		}
		up := p.dialStream(dec, "udp")
		if up == nil {
			return
		}
		s = &udpSession{up: up, timeout: msField(p.serviceEntity(dec.ServiceName), "read_timeout")}
		if !p.track(up) {
			_ = up.Close()
			return
		}
		p.mu.Lock()
		p.udp[key] = s
		p.mu.Unlock()
		go p.udpReplies(pc, from, key, s)
	}
	_ = s.up.SetReadDeadline(time.Now().Add(s.timeout))
	_, _ = s.up.Write(payload)
}

func (p *DataPlane) udpReplies(pc net.PacketConn, client net.Addr, key string, s *udpSession) {
	defer func() {
		p.mu.Lock()
		delete(p.udp, key)
		p.mu.Unlock()
		p.untrack(s.up)
		_ = s.up.Close()
	}()
	buf := make([]byte, 64*1024)
	for {
		n, err := s.up.Read(buf)
		if err != nil {
			return
		}
		_ = s.up.SetReadDeadline(time.Now().Add(s.timeout))
		if _, err := pc.WriteTo(buf[:n], client); err != nil {
			return
		}
	}
}

// track records a connection that Close must end; false once closed.
func (p *DataPlane) track(c io.Closer) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return false
	}
	p.streams[c] = struct{}{}
	return true
}

func (p *DataPlane) untrack(c io.Closer) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.streams, c)
}

func hostPort(a net.Addr) (string, int) {
	if a == nil {
		return "", 0
	}
	host, port, err := net.SplitHostPort(a.String())
	if err != nil {
		return "", 0
	}
	n, _ := strconv.Atoi(port)
	return host, n
}

var errPreread = errors.New("preread done")

// prereadHello reads the client's first bytes as ssl_preread does: up to
// the end of a TLS ClientHello, without answering. It returns the bytes
// read (to replay), the ClientHello's server name and whether it was one.
func prereadHello(conn net.Conn) (consumed []byte, sni string, isTLS bool) {
	var buf bytes.Buffer
	_ = conn.SetReadDeadline(time.Now().Add(prereadTimeout))
	defer func() { _ = conn.SetReadDeadline(time.Time{}) }()
	peek := &replayConn{Conn: conn, r: io.TeeReader(conn, &buf), discardWrites: true}
	_ = tls.Server(peek, &tls.Config{GetConfigForClient: func(h *tls.ClientHelloInfo) (*tls.Config, error) {
		sni, isTLS = h.ServerName, true
		return nil, errPreread
	}}).Handshake()
	return buf.Bytes(), sni, isTLS
}

// replayConn reads from r instead of the connection, and with
// discardWrites never writes to it.
type replayConn struct {
	net.Conn
	r             io.Reader
	discardWrites bool
}

func (c *replayConn) Read(b []byte) (int, error) { return c.r.Read(b) }

func (c *replayConn) Write(b []byte) (int, error) {
	if c.discardWrites {
		return len(b), nil
	}
	return c.Conn.Write(b)
}
