package kongdouble

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strings"
)

// upstreamTLS is how Kong 3.9 speaks TLS to an https service's upstream:
// nginx_kong.lua sets proxy_ssl_server_name on and proxy_ssl_name
// $upstream_host (the Host Kong sends), and runloop/upstream_ssl.lua sets,
// per request, the service's client_certificate, tls_verify,
// tls_verify_depth and the store built from its ca_certificates.
type upstreamTLS struct {
	// serverName is proxy_ssl_name: nginx drops a ":port" and sends no SNI
	// for an IP address, but still verifies the certificate against it.
	serverName string
	verify     bool
	depth      int // nginx's proxy_ssl_verify_depth defaults to 1
	roots      *x509.CertPool
	client     *tls.Certificate
	key        string // tells transports apart
}

// serviceTLS reads the TLS settings of a service entity for one upstream Host.
func (p *DataPlane) serviceTLS(svc map[string]any, upstreamHost string) upstreamTLS {
	name := upstreamHost
	if h, _, err := net.SplitHostPort(upstreamHost); err == nil {
		name = h
	} else if i := strings.LastIndexByte(upstreamHost, ':'); i >= 0 && !strings.Contains(upstreamHost[:i], ":") {
		name = upstreamHost[:i]
	}
	u := upstreamTLS{serverName: name, depth: 1}
	u.verify, _ = svc["tls_verify"].(bool)
	if d, ok := svc["tls_verify_depth"].(float64); ok {
		u.depth = int(d)
	}
	p.d.mu.Lock()
	defer p.d.mu.Unlock()
	var ids []string
	if list, ok := svc["ca_certificates"].([]any); ok && p.d.config != nil {
		u.roots = x509.NewCertPool()
		for _, id := range list {
			s, _ := id.(string)
			if ca := p.d.config.entities["ca_certificates"][s]; ca != nil {
				pem, _ := ca["cert"].(string)
				u.roots.AppendCertsFromPEM([]byte(pem))
				ids = append(ids, s)
			}
		}
	}
	clientID := refID(svc["client_certificate"])
	if clientID != "" && p.d.config != nil {
		if c := p.d.config.entities["certificates"][clientID]; c != nil {
			certPEM, _ := c["cert"].(string)
			keyPEM, _ := c["key"].(string)
			if pair, err := tls.X509KeyPair([]byte(certPEM), []byte(keyPEM)); err == nil {
				u.client = &pair
			}
		}
	}
	u.key = fmt.Sprintf("%s|%t|%d|%v|%s", u.serverName, u.verify, u.depth, ids, clientID)
	return u
}

// config is the client side of the handshake as OpenSSL in nginx makes it.
func (u upstreamTLS) config() *tls.Config {
	cfg := &tls.Config{InsecureSkipVerify: true} //nolint:gosec // verified below, as nginx does, when tls_verify is on
	if _, err := netip.ParseAddr(u.serverName); err != nil {
		cfg.ServerName = u.serverName
	}
	if u.client != nil {
		// OpenSSL presents the configured certificate whatever CAs the
		// server says it accepts.
		client := u.client
		cfg.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return client, nil }
	}
	if u.verify {
		roots, name, depth := u.roots, u.serverName, u.depth
		cfg.VerifyConnection = func(cs tls.ConnectionState) error {
			if roots == nil || len(cs.PeerCertificates) == 0 {
				// tls_verify without ca_certificates: Kong's template sets
				// no proxy_ssl_trusted_certificate, so nothing is trusted.
				return errors.New("upstream SSL certificate verify error: (20:unable to get local issuer certificate)")
			}
			inter := x509.NewCertPool()
			for _, c := range cs.PeerCertificates[1:] {
				inter.AddCert(c)
			}
			chains, err := cs.PeerCertificates[0].Verify(x509.VerifyOptions{Roots: roots, Intermediates: inter})
			if err != nil {
				return fmt.Errorf("upstream SSL certificate verify error: %w", err)
			}
			ok := false
			for _, chain := range chains {
				ok = ok || len(chain)-1 <= depth
			}
			if !ok {
				return errors.New("upstream SSL certificate verify error: (22:certificate chain too long)")
			}
			if err := cs.PeerCertificates[0].VerifyHostname(name); err != nil {
				return fmt.Errorf("upstream SSL certificate does not match %q", name)
			}
			return nil
		}
	}
	return cfg
}
