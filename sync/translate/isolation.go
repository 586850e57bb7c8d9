package translate

import (
	"cmp"
	"slices"

	"github.com/konglet/konglet/sync/snapshot"
)

// placement is one Kong route's worth of "where": a hostname on some ports,
// minus the hostnames that more specific listeners on those ports own.
type placement struct {
	host      string // "" for any
	ports     []int
	protocols []string
	// excluded are hostnames of more specific listeners on these ports:
	// their requests belong to those listeners' routes only (Gateway API
	// listener isolation).
	excluded []string
	// matchPort is false when one port carries all listeners of the
	// protocol: without the Host normalizer (hostplugin.go), Kong takes
	// net.dst.port from a port in the Host header, so matching it is only
	// worth its risk where ports must be told apart.
	matchPort bool
}

// hostSpecificity orders listener hostnames: exact over wildcard, a longer
// wildcard over a shorter one, any hostname last.
func hostSpecificity(h string) int {
	switch {
	case h == "":
		return 0
	case isWildcard(h):
		return len(h)
	}
	return 1 << 16
}

// covers tells whether every request for host also matches pattern.
func covers(pattern, host string) bool {
	return pattern == "" || pattern == host || (isWildcard(pattern) && wildcardMatches(pattern, host))
}

// onlyProtocol lists each of Kong's route protocols alone: most Kong
// routes have one, and share its list (a first translation makes tens of
// thousands). Never written through; placements clips before an append.
var onlyProtocol = map[string][]string{}

func init() {
	for _, p := range []string{"http", "https", "grpc", "grpcs", "tcp", "udp", "tls", "tls_passthrough"} {
		onlyProtocol[p] = []string{p}
	}
}

// placements splits where a route is served into Kong routes, appended to
// out: ports of a hostname that need the same exclusions share one.
func (t *translator) placements(out []placement, where attachment, listeners listenerPorts) []placement {
	start := len(out)
	for i, first := range where {
		if slices.ContainsFunc(where[:i], func(at servedAt) bool { return at.host == first.host }) {
			continue // its hostname's ports are grouped already
		}
		host := first.host
		// out[from:] are the host's placements, one per set of exclusions.
		from := len(out)
		for _, at := range where[i:] {
			if at.host != host {
				continue
			}
			excluded, shadowed := t.exclusions(host, at.listenerHost, listeners.hosts[at.port])
			if shadowed {
				continue
			}
			g := slices.IndexFunc(out[from:], func(p placement) bool { return slices.Equal(p.excluded, excluded) })
			if g < 0 {
				g = len(out) - from
				out = append(out, placement{host: host, excluded: excluded})
			}
			p := &out[from+g]
			p.ports = append(p.ports, at.dstPort)
			p.matchPort = p.matchPort || len(listeners.ofProtocol[at.listener.kongProtocol]) > 1
			if len(p.protocols) == 0 && onlyProtocol[at.protocol] != nil {
				p.protocols = onlyProtocol[at.protocol]
			} else if !slices.Contains(p.protocols, at.protocol) {
				p.protocols = append(slices.Clip(p.protocols), at.protocol)
			}
		}
		for g := from; g < len(out); g++ {
			p := &out[g]
			slices.Sort(p.ports)
			slices.Sort(p.protocols)
			// Kong matches a route that accepts only https on plain HTTP
			// too, and answers 426: its port keeps it on its listeners.
			p.matchPort = p.matchPort || slices.Equal(p.protocols, []string{"https"}) && len(listeners.ofProtocol["http"]) > 0
		}
	}
	slices.SortFunc(out[start:], func(a, b placement) int {
		return cmp.Or(cmp.Compare(a.host, b.host), slices.Compare(a.ports, b.ports))
	})
	return out
}

// exclusions lists the hostnames that listeners more specific than the one
// serving host on a port own there (portHosts are the hostnames of the
// port's listeners). shadowed is true when one of them owns host entirely:
// the route is not served there at all.
func (t *translator) exclusions(host, listenerHost string, portHosts []string) (excluded []string, shadowed bool) {
	for _, other := range portHosts {
		if other == listenerHost || hostSpecificity(other) <= hostSpecificity(listenerHost) || !covers(listenerHost, other) {
			continue
		}
		switch {
		case covers(other, host):
			return nil, true
		case covers(host, other):
			excluded = append(excluded, other)
		}
	}
	if t.snap.Kong.RouterFlavor != snapshot.RouterExpressions {
		// The traditional router has no negation: isolationService
		// answers the more specific listeners' requests instead.
		return nil, false
	}
	slices.Sort(excluded)
	return slices.Compact(excluded), false
}
