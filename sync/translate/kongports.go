package translate

import (
	"fmt"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/konglet/konglet/sync/snapshot"
)

// listenerPorts is what a Kong route needs to know of the listeners beside
// its own.
type listenerPorts struct {
	// hosts are the hostnames of the usable listeners of each port.
	hosts map[gwv1.PortNumber][]string
	// ofProtocol are the ports of the usable listeners of each Kong
	// protocol (http, https, tcp...).
	ofProtocol map[string]map[gwv1.PortNumber]bool
}

func listenerPortsOf(gws []*gateway) listenerPorts {
	ports := listenerPorts{hosts: map[gwv1.PortNumber][]string{}, ofProtocol: map[string]map[gwv1.PortNumber]bool{}}
	for _, l := range allListeners(gws) {
		port := l.spec.Port
		if l.usable() {
			ports.hosts[port] = append(ports.hosts[port], hostnameOf(l.spec.Hostname))
		}
		// A port that asks client certificates still counts among the
		// protocol's ports, so that the other listeners' routes match
		// their own ports, not connections to it.
		if l.usable() || l.asksClientCerts {
			if ports.ofProtocol[l.kongProtocol] == nil {
				ports.ofProtocol[l.kongProtocol] = map[gwv1.PortNumber]bool{}
			}
			ports.ofProtocol[l.kongProtocol][port] = true
		}
	}
	return ports
}

// kongListen follows a listener port (a port of the publish Service) to the
// Kong listen that serves it (DESIGN decision 2): a proxy listen for HTTP,
// a stream listen for TCP, UDP and TLS.
func (t *translator) kongListen(port gwv1.PortNumber, stream, udp bool) (snapshot.Listen, error) {
	protocol := corev1.ProtocolTCP
	if udp {
		protocol = corev1.ProtocolUDP
	}
	listens, kind := t.snap.Kong.ProxyListens, "proxy"
	if stream {
		listens, kind = t.snap.Kong.StreamListens, "stream"
	}
	kongPort, err := t.targetPort(port, protocol)
	if err != nil {
		return snapshot.Listen{}, err
	}
	for _, listen := range listens {
		if listen.Port == kongPort {
			return listen, nil
		}
	}
	ports := make([]string, 0, len(listens))
	for _, listen := range listens {
		ports = append(ports, strconv.Itoa(listen.Port))
	}
	return snapshot.Listen{}, fmt.Errorf("port %d leads to port %d, where Kong has no %s listen (Kong %s listens: %s)",
		port, kongPort, kind, kind, strings.Join(ports, ", "))
}

func (t *translator) targetPort(port gwv1.PortNumber, protocol corev1.Protocol) (int, error) {
	svc := t.snap.PublishService
	if svc == nil {
		if mapped, ok := t.snap.Kong.PortMaps[int(port)]; ok {
			return mapped, nil
		}
		return int(port), nil
	}
	for _, sp := range svc.Ports {
		if sp.Port != int32(port) || (sp.Protocol != protocol && (sp.Protocol != "" || protocol != corev1.ProtocolTCP)) {
			continue
		}
		if sp.TargetPort.IntValue() > 0 {
			return sp.TargetPort.IntValue(), nil
		}
		if sp.TargetPort.String() == "" || sp.TargetPort.String() == "0" {
			return int(sp.Port), nil
		}
		if p, ok := t.namedContainerPort(sp.TargetPort.String()); ok {
			return p, nil
		}
		return 0, fmt.Errorf("Service %s/%s port %d targets the named port %q, which this Pod does not declare",
			svc.Namespace, svc.Name, port, sp.TargetPort.String())
	}
	return 0, fmt.Errorf("Service %s/%s has no %s port %d", svc.Namespace, svc.Name, protocol, port)
}

func (t *translator) namedContainerPort(name string) (int, bool) {
	if t.snap.Pod == nil {
		return 0, false
	}
	for _, c := range t.snap.Pod.Spec.Containers {
		for _, p := range c.Ports {
			if p.Name == name {
				return int(p.ContainerPort), true
			}
		}
	}
	return 0, false
}

// streamDstPort is what Kong's net.dst.port is for a stream connection on
// a listen: the host port port_maps maps it from, else the listen port.
// Kong routes a TLS connection twice, on its ssl listen (mapped port) and
// again after terminating or passing it (the listen port): when the two
// differ no port can match both, and 0 says "do not match on the port".
func (t *translator) streamDstPort(listenPort int, tls bool) int {
	host, ok := t.hostPort(listenPort)
	if ok && tls && host != listenPort {
		return 0
	}
	return host
}

// hostPort is Kong's ctx.host_port for a listen: the host port port_maps
// maps to it (ok), else the listen port itself. Of several host ports
// mapped to one listen, Kong keeps the last it reads; konglet takes the
// lowest, so that the choice does not depend on map order.
func (t *translator) hostPort(listenPort int) (port int, ok bool) {
	for host, container := range t.snap.Kong.PortMaps {
		if container == listenPort && (!ok || host < port) {
			port, ok = host, true
		}
	}
	if !ok {
		return listenPort, false
	}
	return port, true
}
