package conformance

import (
	"bufio"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"net"
	"strconv"

	"github.com/miekg/dns"
	"sigs.k8s.io/gateway-api/conformance/echo-basic/tcpserver"
	"sigs.k8s.io/gateway-api/conformance/echo-basic/udpechoserver"
)

// The echo-basic image's stream modes (sigs.k8s.io/gateway-api/conformance
// v1.6.3 echo-basic/tcpserver and udpechoserver), for one simulated Pod:
//
//   - TCP_ECHO_SERVER: TCP_PORT (3000) plain, and TLS_PORT (8443) with TLS
//     when TLS_SERVER_CERT and TLS_SERVER_PRIV_KEY name mounted files. A
//     connection gets the welcome line, then answers PING, IS_TLS and TEST
//     (the Pod context and, over TLS, what the handshake negotiated).
//   - UDP_ECHO_SERVER: UDP_PORT (8080); every datagram is answered with
//     its text and the Pod context in JSON.

// startStreamEcho starts the server a TCP or UDP echo Pod runs on port;
// s.mu is held.
func (sp *simPod) startStreamEcho(port int) (string, bool) {
	podContext := tcpserver.Context{Namespace: sp.namespace, Ingress: sp.env["INGRESS_NAME"], Service: sp.env["SERVICE_NAME"], Pod: sp.name}
	if sp.env["UDP_ECHO_SERVER"] != "" {
		if port != envPort(sp.env, "UDP_PORT", 8080) {
			return "", false
		}
		pc, err := net.ListenPacket("udp", "127.0.0.1:0")
		if err != nil {
			return "", false
		}
		go serveUDPEcho(pc, udpechoserver.Context{Namespace: podContext.Namespace, Ingress: podContext.Ingress, Service: podContext.Service, Pod: podContext.Pod})
		sp.servers[port], sp.addrs[port] = pc, pc.LocalAddr().String()
		return pc.LocalAddr().String(), true
	}
	tcpPort, tlsPort := envPort(sp.env, "TCP_PORT", 3000), envPort(sp.env, "TLS_PORT", 8443)
	podContext.TCPPort, podContext.TLSPort = strconv.Itoa(tcpPort), strconv.Itoa(tlsPort)
	var cfg *tls.Config
	switch port {
	case tcpPort:
	case tlsPort:
		if cfg = sp.tlsConfig("TLS_SERVER_CERT", "TLS_SERVER_PRIV_KEY"); cfg == nil {
			return "", false
		}
	default:
		return "", false
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", false
	}
	go func() {
		for {
			conn, err := l.Accept()
			if err != nil {
				return
			}
			if cfg != nil {
				conn = tls.Server(conn, cfg)
			}
			go serveTCPEcho(conn, podContext)
		}
	}()
	sp.servers[port], sp.addrs[port] = l, l.Addr().String()
	return l.Addr().String(), true
}

// tlsConfig is the server TLS configuration from the mounted files that
// the environment variables certEnv and keyEnv name, nil without them.
func (sp *simPod) tlsConfig(certEnv, keyEnv string) *tls.Config {
	certPEM, keyPEM := sp.files[sp.env[certEnv]], sp.files[sp.env[keyEnv]]
	if sp.env[certEnv] == "" || sp.env[keyEnv] == "" {
		return nil
	}
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return nil
	}
	cfg := &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	if caFile := sp.env["TLS_CLIENT_CACERTS"]; caFile != "" {
		// echo-basic verifies a client certificate against these CAs when
		// one is given, and lets clients without one in.
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(sp.files[caFile]) {
			return nil
		}
		cfg.ClientAuth, cfg.ClientCAs = tls.VerifyClientCertIfGiven, pool
	}
	return cfg
}

func serveTCPEcho(conn net.Conn, podContext tcpserver.Context) {
	defer conn.Close()
	assertions := &tcpserver.TCPAssertions{Context: podContext}
	if tc, ok := conn.(*tls.Conn); ok {
		if err := tc.Handshake(); err != nil {
			return
		}
		state := tc.ConnectionState()
		assertions.IsTLS = true
		assertions.TLSAssertion = &tcpserver.TLSAssertions{
			NegotiatedProtocol: state.NegotiatedProtocol, ServerName: state.ServerName,
			Version: tls.VersionName(state.Version), CipherSuite: tls.CipherSuiteName(state.CipherSuite),
			Curves: state.CurveID.String(),
		}
	}
	fmt.Fprint(conn, tcpserver.WelcomeMessage)
	payload, err := json.Marshal(assertions)
	if err != nil {
		return
	}
	scanner := bufio.NewScanner(conn)
	for scanner.Scan() {
		switch scanner.Text() {
		case "TEST":
			fmt.Fprintf(conn, "%s\n", payload)
		case "IS_TLS":
			fmt.Fprintf(conn, "%t\n", assertions.IsTLS)
		case "PING":
			fmt.Fprint(conn, "PONG\n")
		}
	}
}

func serveUDPEcho(pc net.PacketConn, podContext udpechoserver.Context) {
	buf := make([]byte, 1024)
	for {
		n, from, err := pc.ReadFrom(buf)
		if err != nil {
			return
		}
		payload, err := json.Marshal(udpechoserver.EchoResponse{Request: string(buf[:n]), Context: podContext})
		if err != nil {
			continue
		}
		_, _ = pc.WriteTo(payload, from)
	}
}

// tlsAssertions is what echo-basic's HTTP echo reports of a TLS request.
func tlsAssertions(state *tls.ConnectionState) map[string]any {
	version := map[uint16]string{tls.VersionTLS13: "TLSv1.3", tls.VersionTLS12: "TLSv1.2"}[state.Version]
	out := map[string]any{
		"version": version, "serverName": state.ServerName, "negotiatedProtocol": state.NegotiatedProtocol,
		"cipherSuite": tls.CipherSuiteName(state.CipherSuite),
	}
	var peers []string
	for _, c := range state.PeerCertificates {
		peers = append(peers, string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: c.Raw})))
	}
	if len(peers) > 0 {
		out["peerCertificates"] = peers
	}
	return out
}

// coreDNSImage is the DNS server behind the suite's UDPRoute test.
const coreDNSImage = "registry.k8s.io/coredns/coredns:"

// startCoreDNS serves what the suite's Corefile (base/manifests.yaml,
// ConfigMap coredns) asks of CoreDNS on UDP port 53: the whoami plugin for
// foo.bar.com (the client's address and port in the additional section);
// every other name is forwarded to public resolvers, which this machine
// does not reach: SERVFAIL. s.mu is held.
func (sp *simPod) startCoreDNS(port int) (string, bool) {
	if port != 53 {
		return "", false
	}
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		return "", false
	}
	srv := &dns.Server{PacketConn: pc, Handler: dns.HandlerFunc(func(w dns.ResponseWriter, req *dns.Msg) {
		res := new(dns.Msg)
		res.SetReply(req)
		if len(req.Question) != 1 || !dns.IsSubDomain("foo.bar.com.", req.Question[0].Name) {
			res.Rcode = dns.RcodeServerFailure
			_ = w.WriteMsg(res)
			return
		}
		name := req.Question[0].Name
		host, portStr, _ := net.SplitHostPort(w.RemoteAddr().String())
		clientPort, _ := strconv.Atoi(portStr)
		res.Authoritative = true
		res.Extra = []dns.RR{
			&dns.A{Hdr: dns.RR_Header{Name: name, Rrtype: dns.TypeA, Class: dns.ClassINET}, A: net.ParseIP(host)},
			&dns.SRV{Hdr: dns.RR_Header{Name: "_udp." + name, Rrtype: dns.TypeSRV, Class: dns.ClassINET}, Port: uint16(clientPort), Target: "."},
		}
		_ = w.WriteMsg(res)
	})}
	go func() { _ = srv.ActivateAndServe() }()
	sp.servers[port], sp.addrs[port] = closerFunc(srv.Shutdown), pc.LocalAddr().String()
	return pc.LocalAddr().String(), true
}

type closerFunc func() error

func (f closerFunc) Close() error { return f() }
