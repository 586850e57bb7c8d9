package kongdouble_test

import (
	"bufio"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"testing"
	"time"

	"github.com/konglet/konglet/test/kongdouble"
)

// lineServer answers every connection with its name (and the SNI it was
// reached with, over TLS), then closes it.
func lineServer(t *testing.T, name string, cfg *tls.Config) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				msg := name
				if cfg != nil {
					tc := tls.Server(c, cfg)
					if tc.Handshake() != nil {
						return
					}
					c, msg = tc, name+" sni="+tc.ConnectionState().ServerName
				}
				_, _ = fmt.Fprintln(c, msg)
				_, _ = io.Copy(io.Discard, c)
			}()
		}
	}()
	return l.Addr().String()
}

func udpEcho(t *testing.T, name string) string {
	t.Helper()
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = pc.Close() })
	go func() {
		buf := make([]byte, 1024)
		for {
			n, from, err := pc.ReadFrom(buf)
			if err != nil {
				return
			}
			_, _ = pc.WriteTo([]byte(name+":"+string(buf[:n])), from)
		}
	}()
	return pc.LocalAddr().String()
}

// streamFront serves a Kong stream listen on a loopback port.
func streamFront(t *testing.T, dp *kongdouble.DataPlane, listenPort int, udp bool) string {
	t.Helper()
	if udp {
		pc, err := net.ListenPacket("udp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = pc.Close() })
		go func() { _ = kongdouble.ServeUDP(pc, listenPort, func() *kongdouble.DataPlane { return dp }) }()
		return pc.LocalAddr().String()
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go dp.ServeConn(listenPort, c)
		}
	}()
	return l.Addr().String()
}

func upstream(name string, targets ...string) M {
	var ts L
	for _, t := range targets {
		ts = append(ts, M{"target": t})
	}
	return M{"name": name, "targets": ts}
}

func TestStreamDataPlane(t *testing.T) {
	termPEM, termKey := certPair(t, "term.example.com")
	backendPEM, backendKey := certPair(t, "pass.example.com")
	backendCert, err := tls.X509KeyPair([]byte(backendPEM), []byte(backendKey))
	if err != nil {
		t.Fatal(err)
	}
	backends := map[string]string{
		"198.18.0.1:3000": lineServer(t, "plain", nil),
		"198.18.0.2:8443": lineServer(t, "secure", &tls.Config{Certificates: []tls.Certificate{backendCert}, MinVersion: tls.VersionTLS12}),
		"198.18.0.3:8080": udpEcho(t, "udp"),
	}
	udpSvc := streamSvc("udp-a", route("udp", M{"protocols": L{"udp"}, "expression": `net.dst.port == 9999`}))
	udpSvc["protocol"] = "udp"
	d := newDouble(t, streamOptions("expressions"))
	load(t, d, config(M{
		"certificates": L{M{"id": "11111111-0000-4000-8000-000000000000", "cert": termPEM, "key": termKey, "snis": L{M{"name": "term.example.com"}}}},
		"services": L{
			streamSvc("tcp-a",
				route("tcp", M{"protocols": L{"tcp"}, "expression": `net.dst.port == 5000`}),
				route("term", M{"protocols": L{"tls"}, "expression": `tls.sni == "term.example.com"`})),
			streamSvc("pass-a", route("pass", M{"protocols": L{"tls_passthrough"}, "expression": `tls.sni == "pass.example.com"`})),
			udpSvc,
		},
		"upstreams": L{
			// an unreachable target first: the balancer moves on
			upstream("tcp-a-up", "198.18.0.9:3000", "198.18.0.1:3000"),
			upstream("pass-a-up", "198.18.0.2:8443"),
			upstream("udp-a-up", "198.18.0.3:8080"),
		},
	}))
	dp := kongdouble.NewDataPlane(d, func(target string) (string, bool) {
		addr, ok := backends[target]
		return addr, ok
	})
	t.Cleanup(dp.Close)
	tcpAddr, sslAddr := streamFront(t, dp, 9000, false), streamFront(t, dp, 9443, false)
	udpAddr := streamFront(t, dp, 9999, true)

	readLine := func(c net.Conn) (string, error) {
		_ = c.SetDeadline(time.Now().Add(5 * time.Second))
		line, err := bufio.NewReader(c).ReadString('\n')
		return line, err
	}
	for range 3 { // every connection, whatever the balancer picks first
		c, err := net.Dial("tcp", tcpAddr)
		if err != nil {
			t.Fatal(err)
		}
		if line, err := readLine(c); line != "plain\n" {
			t.Errorf("tcp: %q, %v", line, err)
		}
		c.Close()
	}

	dialTLS := func(sni string) (*tls.Conn, string, error) {
		c, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", sslAddr,
			&tls.Config{ServerName: sni, InsecureSkipVerify: true, MinVersion: tls.VersionTLS12}) //nolint:gosec // the test reads the served certificate
		if err != nil {
			return nil, "", err
		}
		line, err := readLine(c)
		return c, line, err
	}
	c, line, err := dialTLS("term.example.com")
	if err != nil || line != "plain\n" {
		t.Fatalf("terminate: %q, %v", line, err)
	}
	if cn := c.ConnectionState().PeerCertificates[0].Subject.CommonName; cn != "term.example.com" {
		t.Errorf("terminate: Kong served %q, want its certificate for the SNI", cn)
	}
	c.Close()
	c, line, err = dialTLS("pass.example.com")
	if err != nil || line != "secure sni=pass.example.com\n" {
		t.Fatalf("passthrough: %q, %v", line, err)
	}
	if cn := c.ConnectionState().PeerCertificates[0].Subject.CommonName; cn != "pass.example.com" {
		t.Errorf("passthrough: %q served, want the backend's certificate", cn)
	}
	c.Close()
	if _, _, err := dialTLS("other.example.com"); err == nil {
		t.Error("an SNI no route matches: the connection was not closed")
	}
	// A plain client on the ssl listen: ssl_preread finds no ClientHello
	// once the client sends, no route matches, the connection is closed.
	pc, err := net.Dial("tcp", sslAddr)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = fmt.Fprintln(pc, "hello")
	if _, err := readLine(pc); !errors.Is(err, io.EOF) {
		t.Errorf("plain tcp on the ssl listen: %v, want the connection closed", err)
	}
	pc.Close()

	u, err := net.Dial("udp", udpAddr)
	if err != nil {
		t.Fatal(err)
	}
	defer u.Close()
	_ = u.SetDeadline(time.Now().Add(5 * time.Second))
	for _, msg := range []string{"one", "two"} {
		if _, err := u.Write([]byte(msg)); err != nil {
			t.Fatal(err)
		}
		buf := make([]byte, 64)
		n, err := u.Read(buf)
		if got := string(buf[:n]); got != "udp:"+msg {
			t.Errorf("udp: %q, %v", got, err)
		}
	}
}

// An idle TCP session ends after the service's read_timeout (nginx's
// proxy_timeout), whichever side is silent.
func TestStreamIdleTimeout(t *testing.T) {
	s := streamSvc("tcp-a", route("tcp", M{"protocols": L{"tcp"}, "expression": `net.dst.port == 5000`}))
	s["read_timeout"] = 300
	d := newDouble(t, streamOptions("expressions"))
	load(t, d, config(M{"services": L{s}, "upstreams": L{upstream("tcp-a-up", "198.18.0.1:3000")}}))
	backend := lineServer(t, "plain", nil)
	dp := kongdouble.NewDataPlane(d, func(string) (string, bool) { return backend, true })
	t.Cleanup(dp.Close)
	c, err := net.Dial("tcp", streamFront(t, dp, 9000, false))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	r := bufio.NewReader(c)
	if line, err := r.ReadString('\n'); line != "plain\n" {
		t.Fatalf("%q, %v", line, err)
	}
	start := time.Now()
	if _, err := r.ReadString('\n'); !errors.Is(err, io.EOF) {
		t.Fatalf("idle session: %v, want it closed", err)
	}
	if waited := time.Since(start); waited < 250*time.Millisecond {
		t.Errorf("closed after %v, before the read_timeout", waited)
	}
}
