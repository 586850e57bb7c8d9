package snapshot

import (
	"bufio"
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"
	"sigs.k8s.io/yaml"
)

// Objects are Kubernetes objects read from YAML, by kind.
type Objects struct {
	GatewayClasses  []*gwv1.GatewayClass
	Gateways        []*gwv1.Gateway
	HTTPRoutes      []*gwv1.HTTPRoute
	GRPCRoutes      []*gwv1.GRPCRoute
	TLSRoutes       []*gwv1.TLSRoute
	TCPRoutes       []*gwv1.TCPRoute
	UDPRoutes       []*gwv1.UDPRoute
	ListenerSets    []*gwv1.ListenerSet
	ReferenceGrants []*gwv1.ReferenceGrant
	// Services by namespace and name, and EndpointSlices by the Service
	// they belong to (each list in name order), as a Snapshot holds them:
	// the caches keep them so as objects change (see Build).
	Services       map[types.NamespacedName]*Service
	EndpointSlices map[types.NamespacedName][]*EndpointSlice
	Namespaces     []*corev1.Namespace
	Secrets        []*corev1.Secret
	// BackendTLSPolicies and the ConfigMaps their caCertificateRefs name.
	BackendTLSPolicies []*gwv1.BackendTLSPolicy
	ConfigMaps         []*corev1.ConfigMap
}

// Decode reads a stream of YAML or JSON documents. Kinds konglet does not use
// are skipped; a document it cannot read is an error naming its position.
func (o *Objects) Decode(r io.Reader, source string) error {
	reader := utilyaml.NewYAMLReader(bufio.NewReader(r))
	for i := 1; ; i++ {
		doc, err := reader.Read()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("%s: document %d: %w", source, i, err)
		}
		if len(bytes.TrimSpace(doc)) == 0 {
			continue
		}
		if err := o.decodeOne(doc); err != nil {
			return fmt.Errorf("%s: document %d: %w", source, i, err)
		}
	}
}

func (o *Objects) decodeOne(doc []byte) error {
	var head struct {
		APIVersion string `json:"apiVersion"`
		Kind       string `json:"kind"`
	}
	if err := yaml.Unmarshal(doc, &head); err != nil {
		return err
	}
	if head.Kind == "List" {
		var list struct {
			Items []map[string]any `json:"items"`
		}
		if err := yaml.Unmarshal(doc, &list); err != nil {
			return err
		}
		for _, item := range list.Items {
			b, err := yaml.Marshal(item)
			if err != nil {
				return err
			}
			if err := o.decodeOne(b); err != nil {
				return err
			}
		}
		return nil
	}
	switch head.Kind {
	case "GatewayClass":
		return into(doc, &o.GatewayClasses, false)
	case "Gateway":
		return into(doc, &o.Gateways, true)
	case "HTTPRoute":
		return into(doc, &o.HTTPRoutes, true)
	case "GRPCRoute":
		return into(doc, &o.GRPCRoutes, true)
	case "TLSRoute":
		return into(doc, &o.TLSRoutes, true)
	case "TCPRoute":
		return into(doc, &o.TCPRoutes, true)
	case "UDPRoute":
		return into(doc, &o.UDPRoutes, true)
	case "ListenerSet":
		return into(doc, &o.ListenerSets, true)
	case "ReferenceGrant":
		return into(doc, &o.ReferenceGrants, true)
	case "Service":
		var list []*corev1.Service
		if err := into(doc, &list, true); err != nil {
			return err
		}
		if o.Services == nil {
			o.Services = map[types.NamespacedName]*Service{}
		}
		svc := ServiceOf(list[0])
		o.Services[svc.Key()] = svc
	case "EndpointSlice":
		var list []*discoveryv1.EndpointSlice
		if err := into(doc, &list, true); err != nil {
			return err
		}
		if o.EndpointSlices == nil {
			o.EndpointSlices = map[types.NamespacedName][]*EndpointSlice{}
		}
		es := EndpointSliceOf(list[0], true)
		o.EndpointSlices[es.ServiceKey()] = WithEndpointSlice(o.EndpointSlices[es.ServiceKey()], es)
	case "Namespace":
		return into(doc, &o.Namespaces, false)
	case "Secret":
		return into(doc, &o.Secrets, true)
	case "BackendTLSPolicy":
		return into(doc, &o.BackendTLSPolicies, true)
	case "ConfigMap":
		return into(doc, &o.ConfigMaps, true)
	}
	return nil
}

// into decodes one object strictly (unknown fields are errors, as the API
// server would say) and, like kubectl, puts it in "default" if it names no
// namespace. A name the API server would refuse is an error too: names
// reach Kong's entity names, which take only what Kubernetes names may
// hold.
func into[T any, P interface {
	*T
	metav1.Object
}](doc []byte, list *[]P, namespaced bool) error {
	obj := P(new(T))
	if err := yaml.UnmarshalStrict(doc, obj); err != nil {
		return err
	}
	if namespaced && obj.GetNamespace() == "" {
		obj.SetNamespace(metav1.NamespaceDefault)
	}
	if err := checkNames(obj, namespaced); err != nil {
		return err
	}
	*list = append(*list, obj)
	return nil
}

// checkNames refuses the names the API server refuses: a Service's and a
// Namespace's must be DNS labels (RFC 1123: a Service's may start with a
// digit since Kubernetes 1.36), any other object's a DNS subdomain; a
// namespace is a Namespace's name. A name is required: offline, no API
// server turns a generateName into one.
func checkNames(obj metav1.Object, namespaced bool) error {
	check := validation.IsDNS1123Subdomain
	switch obj.(type) {
	case *corev1.Service, *corev1.Namespace:
		check = validation.IsDNS1123Label
	}
	if obj.GetName() == "" {
		return errors.New("metadata.name is missing")
	}
	if errs := check(obj.GetName()); len(errs) > 0 {
		return fmt.Errorf("metadata.name %q: %s", obj.GetName(), strings.Join(errs, "; "))
	}
	if errs := validation.IsDNS1123Label(obj.GetNamespace()); namespaced && len(errs) > 0 {
		return fmt.Errorf("metadata.namespace %q: %s", obj.GetNamespace(), strings.Join(errs, "; "))
	}
	return nil
}

// Build makes a snapshot of the objects: the one way to a Snapshot, for
// the sidecar's caches and for offline translation alike. The bound
// Gateways are gateways, in that order (every Gateway when empty); publish
// names the Service in front of Kong (may be empty). Lists are sorted by
// namespace and name, so that two builds of the same objects are alike
// whatever order they came in (the translation's Memo relies on it). The
// snapshot takes the maps of Services and EndpointSlices as they are:
// neither may change afterwards.
func (o *Objects) Build(controller string, gateways []types.NamespacedName, publish types.NamespacedName, kong Kong) *Snapshot {
	s := &Snapshot{
		ControllerName:  controller,
		GatewayClasses:  make(map[string]*gwv1.GatewayClass, len(o.GatewayClasses)),
		HTTPRoutes:      o.HTTPRoutes,
		GRPCRoutes:      o.GRPCRoutes,
		TLSRoutes:       o.TLSRoutes,
		TCPRoutes:       o.TCPRoutes,
		UDPRoutes:       o.UDPRoutes,
		ListenerSets:    o.ListenerSets,
		ReferenceGrants: o.ReferenceGrants,
		Services:        o.Services,
		EndpointSlices:  o.EndpointSlices,
		Namespaces:      make(map[string]*corev1.Namespace, len(o.Namespaces)),
		Secrets:         map[types.NamespacedName]*corev1.Secret{},
		SecretProblems:  map[types.NamespacedName]ReadProblem{},
		Kong:            kong,

		BackendTLSPolicies: o.BackendTLSPolicies,
		ConfigMaps:         map[types.NamespacedName]*corev1.ConfigMap{},
		ConfigMapProblems:  map[types.NamespacedName]ReadProblem{},
	}
	for _, c := range o.GatewayClasses {
		s.GatewayClasses[c.Name] = c
	}
	if len(gateways) == 0 {
		s.Gateways = o.Gateways
	}
	for _, want := range gateways {
		for _, g := range o.Gateways {
			if g.Namespace == want.Namespace && g.Name == want.Name {
				s.Gateways = append(s.Gateways, g)
			}
		}
	}
	if s.Services == nil {
		s.Services = map[types.NamespacedName]*Service{}
	}
	if s.EndpointSlices == nil {
		s.EndpointSlices = map[types.NamespacedName][]*EndpointSlice{}
	}
	if publish.Name != "" {
		s.PublishService = s.Services[publish]
	}
	for _, ns := range o.Namespaces {
		s.Namespaces[ns.Name] = ns
	}
	for _, sec := range o.Secrets {
		s.Secrets[types.NamespacedName{Namespace: sec.Namespace, Name: sec.Name}] = sec
	}
	for _, cm := range o.ConfigMaps {
		s.ConfigMaps[types.NamespacedName{Namespace: cm.Namespace, Name: cm.Name}] = cm
	}
	slices.SortFunc(s.BackendTLSPolicies, byName)
	slices.SortFunc(s.ListenerSets, byName)
	slices.SortFunc(s.ReferenceGrants, byName)
	return s
}

func byName[T metav1.Object](a, b T) int {
	return cmp.Or(cmp.Compare(a.GetNamespace(), b.GetNamespace()), cmp.Compare(a.GetName(), b.GetName()))
}
