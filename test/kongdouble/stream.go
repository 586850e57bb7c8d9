package kongdouble

import (
	"net/netip"
	"strings"
)

// Stream (L4) routing, as Kong 3.9's stream subsystem does it. Read from
// kong/templates/nginx_kong_stream.lua, kong/runloop/handler.lua (preread),
// kong/router/atc.lua and kong/router/fields.lua (stream branches) and
// kong/router/transform.lua:
//
//   - A non-ssl stream_listen (tcp or udp) is one nginx server block: Kong
//     routes in preread once. No ssl_preread runs there, so a TLS client on
//     a non-ssl listen has no SNI and is routed as plain "tcp".
//   - An ssl stream_listen is listened on without "ssl", with ssl_preread and
//     proxy_protocol on: Kong routes once on the ClientHello's SNI (first
//     layer), then hands the connection, with a PROXY header, to a unix
//     socket: the TLS terminator if the matched route's protocols contain
//     "tls", the passthrough block if they contain "tls_passthrough"; any
//     other route closes the connection. Kong routes a second time there,
//     and that second match picks the service.
//   - net.protocol is "udp" for udp, else "tls" when the router has an SNI
//     for the connection, else "tcp". The value "tls_passthrough" never
//     occurs: such routes match as "tls" (their protocol clause, if any,
//     reads "tcp"). The SNI is read only when some route of the stream
//     router uses tls.sni (fields.lua fills only the router's fields), so
//     with none, every connection is "tcp" or "udp".
//   - tls.sni is ngx.ssl.server_name() (terminated TLS) or
//     $ssl_preread_server_name (ssl_preread; "" for a ClientHello without
//     SNI, unset for a non-TLS first packet).
//   - net.dst.port / net.dst.ip: in the TLS terminator and passthrough
//     blocks, the PROXY header's server port and address, i.e. the port the
//     client connected to, NOT mapped by port_maps; elsewhere the host port
//     port_maps maps the listen port to, else the listen port, and
//     $server_addr.

// StreamRequest is one TCP connection or UDP datagram arriving on a Kong
// stream listen.
type StreamRequest struct {
	ListenPort int    // the Kong stream listen port that accepted it
	UDP        bool   // a UDP datagram (the listen must be a udp one)
	TLS        bool   // the client speaks TLS (ClientHello with SNI)
	SNI        string // the ClientHello's server name ("" for none)
	SrcIP      string // client address, default 127.0.0.1
	SrcPort    int    // client port, default 40000
	DstIP      string // address the connection arrived on, default the listen's (127.0.0.1 for a wildcard)
}

// streamConn is what the stream router's fields are read from, for one
// routing pass.
type streamConn struct {
	sni     *string // nil: no SNI known to Kong in this pass
	udp     bool
	dstPort int
	dstIP   string
	srcIP   string
	srcPort int
}

// streamPriority is transform.lua's stream_get_priority, used for stream
// routes defined with traditional fields (both flavors).
func streamPriority(route map[string]any) uint64 {
	const sniBit = uint64(1) << 61
	var weight uint64
	if !isEmptyField(route["snis"]) {
		weight = sniBit
	}
	if !isEmptyField(route["sources"]) && !isEmptyField(route["destinations"]) {
		weight = sniBit
	}
	ipWeight := func(v any) uint64 {
		const ipBit, portBit, cidrBit = 1 << 3, 1 << 2, 1 << 0
		var w uint64
		seq, _ := asSeq(v)
		for _, e := range seq {
			m, _ := e.(map[string]any)
			if ip, ok := m["ip"].(string); ok {
				if strings.Contains(ip, "/") {
					w |= cidrBit
				} else {
					w |= ipBit
				}
			}
			if _, ok := m["port"].(float64); ok {
				w |= portBit
			}
		}
		return w
	}
	return weight | ipWeight(route["sources"])<<4 | ipWeight(route["destinations"])
}

// streamListener finds the stream listen on port.
func (d *Double) streamListener(port int) (Listener, bool) {
	for _, l := range d.opts.StreamListeners {
		if l.Port == port {
			return l, true
		}
	}
	return Listener{}, false
}

// streamContext fills the stream fields the router uses (fields.lua's
// stream accessors and atc.lua's stream exec).
func streamContext(fields map[string]int, c streamConn) atcContext {
	ctx := atcContext{}
	str := func(f, v string) { ctx[f] = []atcValue{{kind: vString, str: v}} }
	sni := c.sni
	if fields["tls.sni"] == 0 {
		sni = nil // never read, so the scheme below cannot see it
	}
	switch {
	case c.udp:
		str("net.protocol", "udp")
	case sni != nil:
		str("net.protocol", "tls")
	default:
		str("net.protocol", "tcp")
	}
	if sni != nil {
		str("tls.sni", *sni)
	}
	ctx["net.dst.port"] = []atcValue{{kind: vInt, num: int64(c.dstPort)}}
	ctx["net.src.port"] = []atcValue{{kind: vInt, num: int64(c.srcPort)}}
	if a, err := netip.ParseAddr(c.srcIP); err == nil {
		ctx["net.src.ip"] = []atcValue{{kind: vIP, ip: a}}
	}
	if a, err := netip.ParseAddr(c.dstIP); err == nil {
		ctx["net.dst.ip"] = []atcValue{{kind: vIP, ip: a}}
	}
	return ctx
}

// match returns the first matcher (in priority order) the context passes.
func (rt *router) match(ctx atcContext) (matcher, bool) {
	for _, m := range rt.matchers {
		if evalATC(m.expr, ctx) {
			return m, true
		}
	}
	return matcher{}, false
}

// RouteStream answers which route, service and upstream targets Kong would
// pick, or false (connection closed).
//
// It is false when ListenPort is not a stream listen, when the listen is
// not of the request's kind (udp or tcp), when no stream route matches,
// and on an ssl listen when the first match is neither a "tls" nor a
// "tls_passthrough" route, when a "tls" route must terminate TLS for a
// client that does not speak it, or when the second match fails.
func (d *Double) RouteStream(req StreamRequest) (Decision, bool) {
	d.mu.Lock()
	rt, cfg := d.streamRouter, d.config
	d.mu.Unlock()
	if rt == nil || cfg == nil {
		return Decision{}, false
	}
	l, ok := d.streamListener(req.ListenPort)
	if !ok || l.UDP != req.UDP {
		return Decision{}, false
	}
	c := streamConn{udp: req.UDP, srcIP: req.SrcIP, srcPort: req.SrcPort, dstIP: req.DstIP}
	if c.srcIP == "" {
		c.srcIP = "127.0.0.1"
	}
	if c.srcPort == 0 {
		c.srcPort = 40000
	}
	if c.dstIP == "" {
		c.dstIP = "127.0.0.1"
		if ip := strings.Trim(l.IP, "[]"); ip != "0.0.0.0" && ip != "::" {
			c.dstIP = ip
		}
	}
	c.dstPort = l.Port
	if hp := d.portMaps[l.Port]; hp != 0 {
		c.dstPort = hp
	}

	if !l.SSL || req.UDP {
		m, ok := rt.match(streamContext(rt.fields, c))
		if !ok {
			return Decision{}, false
		}
		return decideStream(cfg, m.route), true
	}

	// ssl listen, first layer: ssl_preread reads the SNI, nothing is
	// terminated, dst is the (mapped) listen port.
	sni := req.SNI
	if req.TLS {
		c.sni = &sni
	}
	first, ok := rt.match(streamContext(rt.fields, c))
	if !ok {
		return Decision{}, false
	}
	protocols := strList(first.route["protocols"])
	// Second layer: dst comes from the PROXY header (the unmapped listen
	// port); the SNI from the terminated handshake (server_name(), unset
	// without SNI) or again from ssl_preread in the passthrough block.
	c.dstPort = l.Port
	switch {
	case containsStr(protocols, "tls"):
		if !req.TLS {
			return Decision{}, false // the TLS handshake with Kong fails
		}
		c.sni = nil
		if req.SNI != "" {
			c.sni = &sni
		}
	case containsStr(protocols, "tls_passthrough"):
	default:
		return Decision{}, false // "unexpected protocols in matched Route": exit(500)
	}
	m, ok := rt.match(streamContext(rt.fields, c))
	if !ok {
		return Decision{}, false
	}
	dec := decideStream(cfg, m.route)
	dec.TerminateTLS = containsStr(protocols, "tls")
	return dec, true
}

// decideStream fills a Decision for a stream route. Plugins are those whose
// protocols include a stream protocol (the stream plugins iterator's
// should_process_plugin), scoped and ordered as for http.
func decideStream(cfg *loaded, route map[string]any) Decision {
	dec, serviceID := routeDecision(cfg, route, true)
	dec.Plugins = pluginsFor(cfg, dec.RouteID, serviceID, func(protocols []string) bool {
		for _, p := range protocols {
			if subsystemOf(p) {
				return true
			}
		}
		return false
	})
	return dec
}
