package translate

import (
	"cmp"
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/konglet/konglet/proxy/declarative"
	"github.com/konglet/konglet/sync/snapshot"
)

// A BackendTLSPolicy becomes fields of the Kong service of every rule whose
// backends it governs: protocol https, tls_verify, and ca_certificates
// built from its ConfigMaps. Kong 3.9 (templates/nginx_kong.lua) sends
// $upstream_host as the TLS server name and verifies the certificate against
// it (proxy_ssl_name $upstream_host, proxy_ssl_server_name on), and
// $upstream_host is also the Host header it sends: so the policy's hostname,
// which the Gateway API wants as SNI and verified name, is given to Kong as
// the upstream Host (request-transformer replacing Host), and the backend
// sees that Host rather than the client's (docs/features.md).

const (
	kindConfigMap = "ConfigMap"
	// CACertKey is the ConfigMap key of a policy's CA certificates.
	CACertKey = "ca.crt"
	// reasonInvalidBackendTLSPolicy is told on a route whose backend is
	// governed by a BackendTLSPolicy konglet cannot apply: requests to it
	// fail rather than reach the backend without the TLS it asks for.
	reasonInvalidBackendTLSPolicy gwv1.RouteConditionReason = "InvalidBackendTLSPolicy"
)

// dnsName is a lowercase DNS name (RFC 1123 labels): the only hostnames
// that reach Kong's request-transformer config.
var dnsName = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`)

// backendTLS is what one policy asks of the connections to its backends.
type backendTLS struct {
	policy   types.NamespacedName
	hostname string
	caIDs    []string // Kong ca_certificate ids, sorted
}

func (a *backendTLS) same(b *backendTLS) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a.hostname == b.hostname && slices.Equal(a.caIDs, b.caIDs)
}

// policyVerdict is one BackendTLSPolicy after validation.
type policyVerdict struct {
	obj                *gwv1.BackendTLSPolicy
	accepted, resolved metav1.Condition
	// tls is nil when backends under the policy cannot be served; problem
	// then says why.
	tls     *backendTLS
	problem string
	cas     []*declarative.CACertificate
}

// policyTarget is a Service, or one port of it by name ("" for all).
type policyTarget struct {
	service types.NamespacedName
	section string
}

// backendPolicies are the verdicts of every policy and, per target, the
// one that takes precedence.
type backendPolicies struct {
	verdicts []*policyVerdict
	byTarget map[policyTarget]*policyVerdict
}

// policies validates the BackendTLSPolicies once per translation.
func (t *translator) policies() *backendPolicies {
	t.backendTLSOnce.Do(func() { t.backendTLS = t.validatePolicies() })
	return t.backendTLS
}

func (t *translator) validatePolicies() *backendPolicies {
	p := &backendPolicies{byTarget: map[policyTarget]*policyVerdict{}}
	// Precedence (Gateway API): the oldest policy, then namespace/name.
	ordered := slices.Clone(t.snap.BackendTLSPolicies)
	slices.SortStableFunc(ordered, func(a, b *gwv1.BackendTLSPolicy) int {
		return cmp.Or(a.CreationTimestamp.Compare(b.CreationTimestamp.Time), byNamespacedName(a, b))
	})
	for _, pol := range ordered {
		v := t.validatePolicy(pol)
		conflicted := false
		var mine []policyTarget
		for _, ref := range pol.Spec.TargetRefs {
			if ref.Group != "" || ref.Kind != kindService {
				continue // other kinds are implementation-specific: none is supported
			}
			target := policyTarget{types.NamespacedName{Namespace: pol.Namespace, Name: string(ref.Name)}, ""}
			if ref.SectionName != nil {
				target.section = string(*ref.SectionName)
			}
			if p.byTarget[target] != nil {
				conflicted = true
				continue
			}
			mine = append(mine, target)
		}
		if conflicted {
			v.accepted = condition(string(gwv1.PolicyConditionAccepted), false, string(gwv1.PolicyReasonConflicted),
				"an older BackendTLSPolicy targets the same Service and sectionName", pol.Generation)
			v.tls, v.cas = nil, nil
			v.problem = fmt.Sprintf("BackendTLSPolicy %s/%s is in conflict with an older one", pol.Namespace, pol.Name)
			mine = nil
		}
		for _, target := range mine {
			p.byTarget[target] = v
		}
		p.verdicts = append(p.verdicts, v)
	}
	return p
}

func byNamespacedName[T metav1.Object](a, b T) int {
	return cmp.Or(cmp.Compare(a.GetNamespace(), b.GetNamespace()), cmp.Compare(a.GetName(), b.GetName()))
}

// backendVerifyDepth is the longest chain below a policy's CA that Kong
// accepts: nginx's default (1) refuses a backend certificate issued by an
// intermediate, which is how most PKIs issue them; the spec sets no bound.
const backendVerifyDepth = 8

// hostAsSNI tells an accepted policy's owner the one way Kong departs from
// the spec: the backend is sent the hostname as Host, not the client's.
const hostAsSNI = "served with the hostname as the Host header too: Kong 3.9 sends its upstream Host as the TLS server name, and cannot set them apart"

// validatePolicy checks what Kong can do of a policy and resolves its CA
// certificates (ConfigMaps of its own namespace only).
func (t *translator) validatePolicy(pol *gwv1.BackendTLSPolicy) *policyVerdict {
	gen := pol.Generation
	v := &policyVerdict{obj: pol,
		accepted: condition(string(gwv1.PolicyConditionAccepted), true, string(gwv1.PolicyReasonAccepted), hostAsSNI, gen),
		resolved: condition(string(gwv1.BackendTLSPolicyConditionResolvedRefs), true, string(gwv1.BackendTLSPolicyReasonResolvedRefs), "", gen),
	}
	key := types.NamespacedName{Namespace: pol.Namespace, Name: pol.Name}
	val := pol.Spec.Validation
	reject := func(reason gwv1.PolicyConditionReason, msg string) *policyVerdict {
		v.accepted = condition(string(gwv1.PolicyConditionAccepted), false, string(reason), msg, gen)
		v.tls, v.cas, v.problem = nil, nil, fmt.Sprintf("BackendTLSPolicy %s is not accepted: %s", key, msg)
		return v
	}
	var cas []*declarative.CACertificate
	valid := 0
	for _, ref := range val.CACertificateRefs {
		certs, reason, msg := t.caCertificates(pol.Namespace, ref)
		if reason != "" {
			if v.resolved.Status == metav1.ConditionTrue {
				v.resolved = condition(string(gwv1.BackendTLSPolicyConditionResolvedRefs), false, string(reason), msg, gen)
			}
			continue
		}
		valid++
		for _, c := range certs {
			if !slices.ContainsFunc(cas, func(o *declarative.CACertificate) bool { return o.ID == c.ID }) {
				cas = append(cas, c)
			}
		}
	}
	switch {
	case len(val.CACertificateRefs) > 0 && valid == 0:
		return reject(gwv1.BackendTLSPolicyReasonNoValidCACertificate, "no caCertificateRefs is valid: "+v.resolved.Message)
	case val.WellKnownCACertificates != nil && *val.WellKnownCACertificates != "":
		// Kong verifies an upstream against the service's ca_certificates
		// or nginx's proxy_ssl_trusted_certificate, which Kong's template
		// leaves unset: it has no system store for upstreams.
		return reject(gwv1.PolicyReasonInvalid, fmt.Sprintf("wellKnownCACertificates %q is not supported: Kong 3.9 verifies upstreams only against CA certificates it is given", *val.WellKnownCACertificates))
	case len(val.CACertificateRefs) == 0:
		return reject(gwv1.PolicyReasonInvalid, "validation needs caCertificateRefs")
	case len(val.SubjectAltNames) > 0:
		// nginx checks the upstream certificate against proxy_ssl_name
		// alone; Kong has no setting for other names.
		return reject(gwv1.PolicyReasonInvalid, "subjectAltNames is not supported: Kong 3.9 verifies an upstream certificate against the server name it sends (the hostname) only")
	case !dnsName.MatchString(string(val.Hostname)):
		return reject(gwv1.PolicyReasonInvalid, fmt.Sprintf("hostname %q is not a lowercase DNS name", val.Hostname))
	}
	if v.resolved.Status == metav1.ConditionFalse {
		// Connections must fail while any reference is invalid.
		v.problem = fmt.Sprintf("BackendTLSPolicy %s: %s", key, v.resolved.Message)
		return v
	}
	slices.SortFunc(cas, func(a, b *declarative.CACertificate) int { return cmp.Compare(a.ID, b.ID) })
	v.cas = cas
	v.tls = &backendTLS{policy: key, hostname: string(val.Hostname)}
	for _, c := range cas {
		v.tls.caIDs = append(v.tls.caIDs, c.ID)
	}
	return v
}

// caCertificates reads the CA certificates of one reference: a ConfigMap
// of the policy's namespace with PEM certificates under ca.crt, each a CA
// (Kong refuses a ca_certificate that is not).
func (t *translator) caCertificates(namespace string, ref gwv1.LocalObjectReference) ([]*declarative.CACertificate, gwv1.PolicyConditionReason, string) {
	if ref.Group != "" || ref.Kind != kindConfigMap {
		return nil, gwv1.BackendTLSPolicyReasonInvalidKind, fmt.Sprintf("caCertificateRef %s/%s %q: only core ConfigMaps are supported", ref.Group, ref.Kind, ref.Name)
	}
	key := types.NamespacedName{Namespace: namespace, Name: string(ref.Name)}
	invalid := func(format string, args ...any) ([]*declarative.CACertificate, gwv1.PolicyConditionReason, string) {
		return nil, gwv1.BackendTLSPolicyReasonInvalidCACertificateRef, fmt.Sprintf(format, args...)
	}
	if refusal, ok := t.refused[ObjectRef{"", kindConfigMap, key.Namespace, key.Name}]; ok {
		return invalid("Kong refused the CA certificates of ConfigMap %s: %s", key, refusal)
	}
	if p, ok := t.snap.ConfigMapProblems[key]; ok {
		return invalid("%s", configMapProblem(key, p))
	}
	cm := t.snap.ConfigMaps[key]
	if cm == nil {
		return invalid("ConfigMap %s not found", key)
	}
	rest := []byte(cm.Data[CACertKey])
	var out []*declarative.CACertificate
	for {
		var block *pem.Block
		block, rest = pem.Decode(rest)
		if block == nil {
			break
		}
		if block.Type != "CERTIFICATE" {
			continue
		}
		c, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			return invalid("ConfigMap %s: %s holds a certificate that does not parse: %v", key, CACertKey, err)
		}
		if !c.IsCA {
			return invalid("ConfigMap %s: %s holds a certificate that is not a CA (no CA basic constraint), which Kong refuses", key, CACertKey)
		}
		// Kong takes one certificate per ca_certificate and refuses two of
		// the same digest: the id is the digest.
		sum := sha256.Sum256(block.Bytes)
		digest := hex.EncodeToString(sum[:])
		out = append(out, &declarative.CACertificate{ID: declarative.ID("ca_certificate", "", digest),
			Cert: string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: block.Bytes})), Tags: objectTags(kindConfigMap, cm.Namespace, cm.Name)})
	}
	if len(out) == 0 {
		return invalid("ConfigMap %s has no PEM certificate under %s", key, CACertKey)
	}
	return out, "", ""
}

// configMapProblem explains why a ConfigMap of CA certificates is not usable.
func configMapProblem(key types.NamespacedName, p snapshot.ReadProblem) string {
	switch {
	case p.Forbidden:
		return fmt.Sprintf("konglet may not read ConfigMap %s: its ServiceAccount needs list and watch on configmaps in namespace %s", key, key.Namespace)
	case p.Size > p.Limit:
		return fmt.Sprintf("ConfigMap %s holds %d bytes under %s, more than konglet's limit of %d (--max-configmap-bytes), so konglet does not keep it", key, p.Size, CACertKey, p.Limit)
	case p.Unwatched > 0:
		return fmt.Sprintf("ConfigMap %s is not read: BackendTLSPolicies name more ConfigMaps than konglet watches at once (%d, --max-configmap-watches; those in the Gateways' namespaces come first)", key, p.Unwatched)
	case p.Err != "":
		return fmt.Sprintf("ConfigMap %s could not be read: %s", key, p.Err)
	}
	return fmt.Sprintf("ConfigMap %s has not been read yet", key)
}

// policyFor is the verdict of the policy that governs a Service port (nil
// if none): one naming the port wins over one for the whole Service.
func (t *translator) policyFor(svc *snapshot.Service, port corev1.ServicePort) *policyVerdict {
	if len(t.snap.BackendTLSPolicies) == 0 {
		return nil
	}
	p := t.policies()
	key := types.NamespacedName{Namespace: svc.Namespace, Name: svc.Name}
	if port.Name != "" {
		if v := p.byTarget[policyTarget{key, port.Name}]; v != nil {
			return v
		}
	}
	return p.byTarget[policyTarget{key, ""}]
}

// backendTLSOf applies the policy of a backend: the TLS Kong must speak
// to it, or why it cannot be used (never plain text where a policy asks
// for TLS). Only HTTPRoute backends can be given TLS.
func (t *translator) backendTLSOf(b backend, fromKind gwv1.Kind) (*backendTLS, *refProblem) {
	v := t.policyFor(b.service, b.port)
	if v == nil {
		return nil, nil
	}
	refuse := func(msg string) (*backendTLS, *refProblem) {
		return nil, &refProblem{reasonInvalidBackendTLSPolicy, fmt.Sprintf("Service %s/%s port %d: %s", b.service.Namespace, b.service.Name, b.port.Port, msg)}
	}
	switch {
	case v.tls == nil:
		return refuse(v.problem)
	case fromKind != kindHTTPRoute:
		return refuse(fmt.Sprintf("BackendTLSPolicy %s/%s is applied to HTTPRoute backends only", v.obj.Namespace, v.obj.Name))
	case !t.snap.Kong.PluginEnabled("request-transformer"):
		return refuse("Kong's request-transformer plugin, which sets the name Kong verifies, is not enabled")
	}
	return v.tls, nil
}

// checkRuleTLS drops a rule that Kong cannot serve with its backends' TLS:
// one Kong service speaks one way to all the rule's backends, and the name
// Kong verifies is the Host it sends, which a filter must not change.
func checkRuleTLS(res *ruleResult, label string) {
	if len(res.backends) == 0 || res.dropped != "" {
		return
	}
	first := res.backends[0].tls
	for _, b := range res.backends[1:] {
		if !first.same(b.tls) {
			res.dropped = fmt.Sprintf("rule %s: its backends need different TLS (BackendTLSPolicy), and Kong speaks one way to all the backends of a rule", label)
			return
		}
	}
	if first != nil && res.filters.touchesHost() {
		res.dropped = fmt.Sprintf("rule %s: a filter changes the Host header, which Kong also sends as the TLS server name that BackendTLSPolicy %s sets", label, first.policy)
		return
	}
	if first != nil {
		res.filters.upstreamHost = first.hostname
	}
}

// touchesHost tells whether a filter sets, adds or removes the Host header.
func (f ruleFilters) touchesHost() bool {
	isHost := func(name gwv1.HTTPHeaderName) bool { return strings.EqualFold(string(name), "host") }
	headerOps := func(m *gwv1.HTTPHeaderFilter) bool {
		return m != nil && (slices.ContainsFunc(m.Set, func(h gwv1.HTTPHeader) bool { return isHost(h.Name) }) ||
			slices.ContainsFunc(m.Add, func(h gwv1.HTTPHeader) bool { return isHost(h.Name) }) ||
			slices.ContainsFunc(m.Remove, func(n string) bool { return strings.EqualFold(n, "host") }))
	}
	return slices.ContainsFunc(f.filters, func(flt gwv1.HTTPRouteFilter) bool {
		return flt.URLRewrite != nil && flt.URLRewrite.Hostname != nil || headerOps(flt.RequestHeaderModifier)
	})
}

// caCertificatesOf are the Kong ca_certificates of the policies in use,
// each once.
func (t *translator) caCertificatesOf(services []*declarative.Service) []*declarative.CACertificate {
	if len(t.snap.BackendTLSPolicies) == 0 {
		return nil
	}
	used := map[string]bool{}
	for _, s := range services {
		for _, id := range s.CACertificates {
			used[id] = true
		}
	}
	byID := map[string]*declarative.CACertificate{}
	for _, v := range t.policies().verdicts {
		for _, c := range v.cas {
			if used[c.ID] && byID[c.ID] == nil {
				byID[c.ID] = c
			}
		}
	}
	return slices.SortedFunc(maps.Values(byID), func(a, b *declarative.CACertificate) int { return cmp.Compare(a.ID, b.ID) })
}

// policyStatuses are the BackendTLSPolicies' ancestor entries: one per
// bound Gateway whose routes name a Service (port) the policy targets.
func (t *translator) policyStatuses(routes []*route, gws []*gateway) map[types.NamespacedName][]gwv1.PolicyAncestorStatus {
	if len(t.snap.BackendTLSPolicies) == 0 {
		return nil
	}
	// The Gateways whose routes use each Service port.
	type use struct {
		service types.NamespacedName
		port    int32
	}
	usedBy := map[use][]*gateway{}
	for _, r := range routes {
		var mine []*gateway
		for _, ref := range r.parentRefs {
			listeners, ours := parentListeners(gws, r.meta.Namespace, ref)
			if ours && len(listeners) > 0 && !slices.Contains(mine, listeners[0].gw) {
				mine = append(mine, listeners[0].gw)
			}
		}
		if len(mine) == 0 {
			continue
		}
		for _, rule := range r.rules {
			for _, ref := range rule.backendRefs {
				if ref.Port == nil || ref.Group != nil && *ref.Group != "" || ref.Kind != nil && *ref.Kind != kindService {
					continue
				}
				ns := r.meta.Namespace
				if ref.Namespace != nil {
					ns = string(*ref.Namespace)
				}
				u := use{types.NamespacedName{Namespace: ns, Name: string(ref.Name)}, int32(*ref.Port)}
				for _, g := range mine {
					if !slices.Contains(usedBy[u], g) {
						usedBy[u] = append(usedBy[u], g)
					}
				}
			}
		}
	}
	out := map[types.NamespacedName][]gwv1.PolicyAncestorStatus{}
	for _, v := range t.policies().verdicts {
		var ancestors []*gateway
		for _, ref := range v.obj.Spec.TargetRefs {
			svcKey := types.NamespacedName{Namespace: v.obj.Namespace, Name: string(ref.Name)}
			svc := t.snap.Services[svcKey]
			if ref.Group != "" || ref.Kind != kindService || svc == nil {
				continue
			}
			for _, p := range svc.Ports {
				if ref.SectionName != nil && string(*ref.SectionName) != p.Name {
					continue
				}
				for _, g := range usedBy[use{svcKey, p.Port}] {
					if !slices.Contains(ancestors, g) {
						ancestors = append(ancestors, g)
					}
				}
			}
		}
		if len(ancestors) == 0 {
			continue
		}
		slices.SortFunc(ancestors, func(a, b *gateway) int {
			return cmp.Or(cmp.Compare(a.key.Namespace, b.key.Namespace), cmp.Compare(a.key.Name, b.key.Name))
		})
		key := types.NamespacedName{Namespace: v.obj.Namespace, Name: v.obj.Name}
		for _, g := range ancestors {
			out[key] = append(out[key], gwv1.PolicyAncestorStatus{
				AncestorRef: gwv1.ParentReference{Group: ptr(gwv1.Group(gwv1.GroupName)), Kind: ptr(gwv1.Kind(kindGateway)),
					Namespace: ptr(gwv1.Namespace(g.key.Namespace)), Name: gwv1.ObjectName(g.key.Name)},
				ControllerName: gwv1.GatewayController(t.snap.ControllerName),
				Conditions:     []metav1.Condition{v.accepted, v.resolved},
			})
		}
	}
	return out
}

// BackendTLSConfigMaps are the ConfigMaps BackendTLSPolicies may use: those
// their caCertificateRefs name in their own namespace. konglet reads no
// other ConfigMap.
func BackendTLSConfigMaps(s *snapshot.Snapshot) []types.NamespacedName {
	var out []types.NamespacedName
	for _, pol := range s.BackendTLSPolicies {
		for _, ref := range pol.Spec.Validation.CACertificateRefs {
			if ref.Group == "" && ref.Kind == kindConfigMap {
				out = append(out, types.NamespacedName{Namespace: pol.Namespace, Name: string(ref.Name)})
			}
		}
	}
	slices.SortFunc(out, func(a, b types.NamespacedName) int {
		return cmp.Or(cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Name, b.Name))
	})
	return slices.Compact(out)
}
