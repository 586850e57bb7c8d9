package status

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/konglet/konglet/sync/snapshot"
	"github.com/konglet/konglet/sync/translate"
)

// PodConditionType is the condition a readiness gate uses: True while this
// replica's Kong holds a configuration konglet made (any one, not
// necessarily the newest) and a bound Gateway can be served. A failed load
// leaves it True: the Kong keeps serving its last good configuration, and
// every replica would fail the same way, so gating on the newest one would
// empty the Service.
const PodConditionType corev1.PodConditionType = "konglet.dev/config-loaded"

// CurrentConditionType tells whether Kong holds the newest configuration
// konglet built, and if not, why. Readiness does not gate on it.
const CurrentConditionType corev1.PodConditionType = "konglet.dev/config-current"

// Reasons of the Pod conditions.
const (
	ReasonLoaded          = "Loaded"          // config-loaded True
	ReasonNotLoaded       = "NotLoaded"       // config-loaded False: Kong holds nothing from konglet
	ReasonNoUsableGateway = "NoUsableGateway" // config-loaded False: no bound Gateway can be served
	ReasonCurrent         = "Current"         // config-current True
	ReasonLoadFailed      = "LoadFailed"      // config-current False: Kong did not take the newest
	ReasonLoading         = "Loading"         // config-current False: a load is under way
	ReasonNotBuilt        = "NotBuiltYet"     // config-current Unknown: caches not synced yet
)

// The messages start with fixed text and a hash, which the leader reads
// back from its peers' Pods.
const (
	heldPrefix    = "Kong holds configuration "
	currentPrefix = "Kong holds the newest configuration "
	failedPrefix  = "Kong did not load configuration "
)

// Load is what a replica knows of its Kong.
type Load struct {
	// Held is the hash of the konglet configuration Kong holds, "" if none
	// (or not known yet).
	Held string
	// Newest is the hash of the newest configuration built, "" before the
	// first translation.
	Newest string
	// Err is why Kong does not hold Newest, when loading it failed.
	Err error
	// Unusable says why no bound Gateway can be served, "" when one can.
	Unusable string
}

// Ready tells whether the Pod may take traffic: Kong holds a configuration
// from konglet, for a Gateway that exists and is ours.
func (l Load) Ready() bool { return l.Held != "" && l.Unusable == "" }

// Current tells whether Kong holds the newest configuration.
func (l Load) Current() bool { return l.Newest != "" && l.Held == l.Newest }

// Conditions are the Pod conditions for the load.
func (l Load) Conditions() []corev1.PodCondition {
	loaded := corev1.PodCondition{Type: PodConditionType, Status: corev1.ConditionTrue, Reason: ReasonLoaded, Message: heldPrefix + l.Held}
	switch {
	case l.Unusable != "":
		loaded = corev1.PodCondition{Type: PodConditionType, Status: corev1.ConditionFalse, Reason: ReasonNoUsableGateway, Message: l.Unusable}
	case l.Held == "":
		loaded = corev1.PodCondition{Type: PodConditionType, Status: corev1.ConditionFalse, Reason: ReasonNotLoaded, Message: "Kong holds no configuration from konglet"}
	}
	current := corev1.PodCondition{Type: CurrentConditionType, Status: corev1.ConditionTrue, Reason: ReasonCurrent, Message: currentPrefix + l.Newest}
	switch {
	case l.Newest == "":
		current = corev1.PodCondition{Type: CurrentConditionType, Status: corev1.ConditionUnknown, Reason: ReasonNotBuilt, Message: "waiting for the API server"}
	case l.Err != nil:
		current = corev1.PodCondition{Type: CurrentConditionType, Status: corev1.ConditionFalse, Reason: ReasonLoadFailed, Message: failedPrefix + l.Newest + ": " + l.Err.Error()}
	case !l.Current():
		current = corev1.PodCondition{Type: CurrentConditionType, Status: corev1.ConditionFalse, Reason: ReasonLoading, Message: "loading configuration " + l.Newest}
	}
	return []corev1.PodCondition{loaded, current}
}

// PodReporter writes this replica's conditions on its own Pod.
type PodReporter struct {
	kube kubernetes.Interface
	pod  types.NamespacedName
	now  func() time.Time
}

// NewPodReporter returns a reporter for the Pod.
func NewPodReporter(kube kubernetes.Interface, pod types.NamespacedName, now func() time.Time) *PodReporter {
	return &PodReporter{kube: kube, pod: pod, now: now}
}

// Report patches the conditions onto the Pod unless it already shows them,
// and returns the Pod as it now is. current is the Pod as last known; nil
// reads it from the API server (the informer cache may lag behind this
// reporter's own writes, so it is not used).
func (r *PodReporter) Report(ctx context.Context, current *corev1.Pod, want []corev1.PodCondition) (*corev1.Pod, error) {
	if current == nil {
		pod, err := r.kube.CoreV1().Pods(r.pod.Namespace).Get(ctx, r.pod.Name, metav1.GetOptions{})
		if err != nil {
			return nil, fmt.Errorf("reading Pod %s: %w", r.pod, err)
		}
		current = pod
	}
	want = slices.Clone(want)
	same := 0
	for i := range want {
		for _, c := range current.Status.Conditions {
			if c.Type != want[i].Type {
				continue
			}
			if c.Status == want[i].Status && c.Reason == want[i].Reason && c.Message == want[i].Message {
				same++
			}
			if c.Status == want[i].Status {
				want[i].LastTransitionTime = c.LastTransitionTime
			}
		}
		if want[i].LastTransitionTime.IsZero() {
			want[i].LastTransitionTime = metav1.NewTime(r.now())
		}
	}
	if same == len(want) {
		return current, nil
	}
	// A strategic merge patch merges conditions by type: the kubelet's own
	// conditions are left alone.
	patch, err := json.Marshal(map[string]any{"status": map[string]any{"conditions": want}})
	if err != nil {
		return current, err
	}
	pod, err := r.kube.CoreV1().Pods(r.pod.Namespace).Patch(ctx, r.pod.Name, types.StrategicMergePatchType, patch, metav1.PatchOptions{}, "status")
	if err != nil {
		return current, fmt.Errorf("setting konglet's conditions on Pod %s: %w", r.pod, err)
	}
	return pod, nil
}

// Replica is one Pod behind the publish Service, as its conditions tell.
type Replica struct {
	Name string
	// Ready: its endpoint is ready or serving, so it takes traffic.
	Ready bool
	// Held is the hash of the konglet configuration its Kong holds.
	Held string
	// Failed is the hash it could not load, and Error why.
	Failed, Error string
}

// ReplicaFrom reads a replica from its konglet conditions.
func ReplicaFrom(name string, ready bool, conds []corev1.PodCondition) Replica {
	r := Replica{Name: name, Ready: ready}
	for _, c := range conds {
		switch {
		case c.Type == PodConditionType && c.Status == corev1.ConditionTrue:
			r.Held = strings.TrimPrefix(c.Message, heldPrefix)
		case c.Type == CurrentConditionType && c.Reason == ReasonLoadFailed:
			rest := strings.TrimPrefix(c.Message, failedPrefix)
			r.Failed, r.Error, _ = strings.Cut(rest, ": ")
		}
	}
	return r
}

// Replicas are the Pods that the publish Service's EndpointSlices name,
// sorted by name. self, when it is among them, is told by load (this
// replica knows its own state before its Pod shows it).
func Replicas(snap *snapshot.Snapshot, self string, load Load) []Replica {
	svc := snap.PublishService
	if svc == nil {
		return nil
	}
	ready := map[string]bool{}
	for _, es := range snap.EndpointSlices[types.NamespacedName{Namespace: svc.Namespace, Name: svc.Name}] {
		for _, ep := range es.Endpoints {
			if ep.TargetRef == nil || ep.TargetRef.Kind != "Pod" {
				continue
			}
			ready[ep.TargetRef.Name] = ready[ep.TargetRef.Name] || ep.Ready || ep.Serving
		}
	}
	pods := map[string]*corev1.Pod{}
	for _, p := range snap.Pods {
		if p.Namespace == svc.Namespace {
			pods[p.Name] = p
		}
	}
	out := make([]Replica, 0, len(ready))
	for name, r := range ready {
		switch {
		case name == self:
			out = append(out, ReplicaFrom(name, r, load.Conditions()))
		case pods[name] != nil:
			out = append(out, ReplicaFrom(name, r, pods[name].Status.Conditions))
		default:
			out = append(out, Replica{Name: name, Ready: r})
		}
	}
	slices.SortFunc(out, func(a, b Replica) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// Programmed decides a Gateway's Programmed from the replicas behind the
// publish Service and the hash of the current configuration. Only ready
// (or serving) replicas count: one that has not loaded yet is not ready
// (the readiness gate) and is pending, not failing, so scaling out and
// rolling updates never turn Programmed False. A ready replica behind the
// current configuration is loading it; one that tried and failed makes
// Programmed False, as does having no ready replica at all.
func Programmed(replicas []Replica, hash string) (bool, string) {
	var current, total int
	var loading, failed, pending []string
	for _, r := range replicas {
		switch {
		case !r.Ready:
			pending = append(pending, r.Name)
			continue
		case r.Held == hash:
			current++
		case r.Failed == hash:
			failed = append(failed, r.Name+": "+r.Error)
		default:
			loading = append(loading, r.Name)
		}
		total++
	}
	msg := fmt.Sprintf("%d of %d ready replicas hold the current configuration", current, total)
	if len(failed) > 0 {
		msg += "; failed to load it: " + strings.Join(failed, "; ")
	}
	if len(loading) > 0 {
		msg += "; loading it: " + strings.Join(loading, ", ")
	}
	if len(pending) > 0 {
		msg += "; not ready yet: " + strings.Join(pending, ", ")
	}
	return total > 0 && len(failed) == 0, msg
}

// ApplyReplicas returns st with each Gateway's Programmed (where the
// translation made it True) decided by Programmed. Without replicas to
// count (no publish Service or no endpoints) st is returned as it is. st
// is not modified: the loop applies replicas again to the same statuses
// when a peer's conditions change.
func ApplyReplicas(st translate.Status, replicas []Replica, hash string) translate.Status {
	if len(replicas) == 0 {
		return st
	}
	ok, msg := Programmed(replicas, hash)
	gateways := make(map[types.NamespacedName]gwv1.GatewayStatus, len(st.Gateways))
	for key, g := range st.Gateways {
		g.Conditions = slices.Clone(g.Conditions)
		for i, c := range g.Conditions {
			if c.Type != string(gwv1.GatewayConditionProgrammed) || c.Status != metav1.ConditionTrue {
				continue
			}
			g.Conditions[i].Message = msg
			if !ok {
				g.Conditions[i].Status = metav1.ConditionFalse
				g.Conditions[i].Reason = string(gwv1.GatewayReasonPending)
			}
		}
		gateways[key] = g
	}
	st.Gateways = gateways
	return st
}

// GatewayProblems says, for each bound Gateway, why konglet cannot serve
// it ("" when it can): missing (a wrong --gateway), of a GatewayClass that
// is not konglet's, or without a usable listener. st is the translation's.
func GatewayProblems(snap *snapshot.Snapshot, bound []types.NamespacedName, st translate.Status) map[types.NamespacedName]string {
	out := make(map[types.NamespacedName]string, len(bound))
	for _, key := range bound {
		i := slices.IndexFunc(snap.Gateways, func(g *gwv1.Gateway) bool { return g.Namespace == key.Namespace && g.Name == key.Name })
		if i < 0 {
			out[key] = fmt.Sprintf("Gateway %s not found (check --gateway)", key)
			continue
		}
		className := string(snap.Gateways[i].Spec.GatewayClassName)
		class := snap.GatewayClasses[className]
		switch {
		case class == nil:
			out[key] = fmt.Sprintf("Gateway %s: its GatewayClass %s does not exist", key, className)
		case string(class.Spec.ControllerName) != snap.ControllerName:
			out[key] = fmt.Sprintf("Gateway %s: its GatewayClass %s belongs to %s, not to konglet (%s)", key, className, class.Spec.ControllerName, snap.ControllerName)
		case !slices.ContainsFunc(st.Gateways[key].Listeners, listenerProgrammed):
			out[key] = fmt.Sprintf("Gateway %s has no usable listener (see its status)", key)
		default:
			out[key] = ""
		}
	}
	return out
}

func listenerProgrammed(l gwv1.ListenerStatus) bool {
	return slices.ContainsFunc(l.Conditions, func(c metav1.Condition) bool {
		return c.Type == string(gwv1.ListenerConditionProgrammed) && c.Status == metav1.ConditionTrue
	})
}
