package translate

import (
	"bytes"
	"cmp"
	"encoding/json"
	"slices"

	"k8s.io/apimachinery/pkg/types"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"
	"sigs.k8s.io/yaml"

	"github.com/konglet/konglet/proxy/declarative"
)

// ObjectStatus is one object's desired status, shaped like the object.
type ObjectStatus struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Metadata   struct {
		Name      string `json:"name"`
		Namespace string `json:"namespace,omitempty"`
	} `json:"metadata"`
	Status any `json:"status"`
}

// Objects lists the statuses in a stable order: GatewayClasses, Gateways,
// ListenerSets, routes by kind, then BackendTLSPolicies, each by namespace
// and name.
func (s Status) Objects() []ObjectStatus {
	var out []ObjectStatus
	add := func(kind string, key types.NamespacedName, status any) {
		o := ObjectStatus{APIVersion: gwv1.GroupVersion.String(), Kind: kind, Status: status}
		o.Metadata.Name, o.Metadata.Namespace = key.Name, key.Namespace
		out = append(out, o)
	}
	for _, name := range sortedKeys(s.GatewayClasses, func(a, b string) int { return cmp.Compare(a, b) }) {
		add(kindGatewayClass, types.NamespacedName{Name: name}, s.GatewayClasses[name])
	}
	for _, key := range sortedKeys(s.Gateways, compareNames) {
		add(kindGateway, key, s.Gateways[key])
	}
	for _, key := range sortedKeys(s.ListenerSets, compareNames) {
		add(kindListenerSet, key, s.ListenerSets[key])
	}
	for _, ref := range sortedKeys(s.Routes, func(a, b ObjectRef) int {
		return cmp.Or(cmp.Compare(routeKindOrder(a.Kind), routeKindOrder(b.Kind)), cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Name, b.Name))
	}) {
		add(ref.Kind, types.NamespacedName{Namespace: ref.Namespace, Name: ref.Name}, map[string]any{"parents": s.Routes[ref]})
	}
	for _, key := range sortedKeys(s.BackendTLSPolicies, compareNames) {
		add("BackendTLSPolicy", key, map[string]any{"ancestors": s.BackendTLSPolicies[key]})
	}
	return out
}

// routeKindOrder lists route kinds in a fixed order in the output.
func routeKindOrder(kind string) int {
	return slices.Index(routeKinds, kind)
}

func compareNames(a, b types.NamespacedName) int {
	return cmp.Or(cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Name, b.Name))
}

func sortedKeys[K comparable, V any](m map[K]V, compare func(a, b K) int) []K {
	keys := make([]K, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, compare)
	return keys
}

// YAML renders the result as a YAML stream: the Kong configuration first,
// then one document per object status.
func (r Result) YAML() ([]byte, error) {
	var buf bytes.Buffer
	docs := []any{redacted(r.Config)}
	for _, o := range r.Status.Objects() {
		docs = append(docs, o)
	}
	for i, d := range docs {
		// Through JSON first so that Kong's field names and omitempty rules
		// apply exactly as in what konglet sends.
		j, err := json.Marshal(d)
		if err != nil {
			return nil, err
		}
		y, err := yaml.JSONToYAML(j)
		if err != nil {
			return nil, err
		}
		if i > 0 {
			buf.WriteString("---\n")
		}
		buf.Write(y)
	}
	return buf.Bytes(), nil
}

// JSON renders the result as one JSON document {config, statuses}.
func (r Result) JSON() ([]byte, error) {
	out, err := json.MarshalIndent(map[string]any{"config": redacted(r.Config), "statuses": r.Status.Objects()}, "", "  ")
	return append(out, '\n'), err
}

// redacted is the config with private keys replaced: they never appear in
// output meant for people (DESIGN decision 8).
func redacted(c *declarative.Config) *declarative.Config {
	if len(c.Certificates) == 0 {
		return c
	}
	out := *c
	out.Certificates = make([]*declarative.Certificate, len(c.Certificates))
	for i, cert := range c.Certificates {
		copied := *cert
		copied.Key = "<redacted>"
		out.Certificates[i] = &copied
	}
	return &out
}
