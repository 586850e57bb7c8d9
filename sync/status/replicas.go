package status

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/konglet/konglet/sync/snapshot"
	"github.com/konglet/konglet/sync/translate"
)

// PodConditionType is the condition each replica sets on its own Pod after
// loading its Kong. A readiness gate on it keeps a Pod whose Kong holds no
// configuration out of the Service.
const PodConditionType corev1.PodConditionType = "konglet.dev/config-loaded"

// Reasons of the Pod condition.
const (
	ReasonLoaded     = "Loaded"
	ReasonLoadFailed = "LoadFailed"
)

// hashPrefix starts the message of a True condition; the rest is the hash
// of the configuration Kong holds.
const hashPrefix = "Kong holds configuration "

// LoadCondition is the Pod condition for the outcome of a load.
func LoadCondition(hash string, err error) corev1.PodCondition {
	if err != nil {
		return corev1.PodCondition{Type: PodConditionType, Status: corev1.ConditionFalse, Reason: ReasonLoadFailed, Message: err.Error()}
	}
	return corev1.PodCondition{Type: PodConditionType, Status: corev1.ConditionTrue, Reason: ReasonLoaded, Message: hashPrefix + hash}
}

// PodReporter writes this replica's condition on its own Pod.
type PodReporter struct {
	kube kubernetes.Interface
	pod  types.NamespacedName
	now  func() time.Time
}

// NewPodReporter returns a reporter for the Pod.
func NewPodReporter(kube kubernetes.Interface, pod types.NamespacedName, now func() time.Time) *PodReporter {
	return &PodReporter{kube: kube, pod: pod, now: now}
}

// Report patches the condition onto the Pod unless the cached Pod already
// shows it. It reports whether it wrote.
func (r *PodReporter) Report(ctx context.Context, current *corev1.Pod, want corev1.PodCondition) (bool, error) {
	if current == nil {
		return false, nil
	}
	for _, c := range current.Status.Conditions {
		if c.Type != want.Type {
			continue
		}
		if c.Status == want.Status && c.Reason == want.Reason && c.Message == want.Message {
			return false, nil
		}
		if c.Status == want.Status {
			want.LastTransitionTime = c.LastTransitionTime
		}
	}
	if want.LastTransitionTime.IsZero() {
		want.LastTransitionTime = metav1.NewTime(r.now())
	}
	// A strategic merge patch merges conditions by type: the kubelet's own
	// conditions are left alone.
	patch, err := json.Marshal(map[string]any{"status": map[string]any{"conditions": []corev1.PodCondition{want}}})
	if err != nil {
		return false, err
	}
	_, err = r.kube.CoreV1().Pods(r.pod.Namespace).Patch(ctx, r.pod.Name, types.StrategicMergePatchType, patch, metav1.PatchOptions{}, "status")
	if err != nil {
		return false, fmt.Errorf("setting %s on Pod %s: %w", PodConditionType, r.pod, err)
	}
	return true, nil
}

// ApplyReplicas sets each Gateway's Programmed from the Pods behind the
// publish Service: True once every one of them has loaded a configuration
// from konglet, with how many hold the current one (hash); False while one
// of them failed or has loaded nothing yet. Without Pods to count (no
// publish Service or no endpoints) the status is left as it is.
func ApplyReplicas(st *translate.Status, snap *snapshot.Snapshot, hash string) {
	pods := replicaPods(snap)
	if len(pods) == 0 {
		return
	}
	current, loaded := 0, 0
	var failing []string
	for _, p := range pods {
		c := podCondition(p)
		switch {
		case c == nil:
			failing = append(failing, p.Name+": no configuration loaded yet")
		case c.Status != corev1.ConditionTrue:
			failing = append(failing, p.Name+": "+c.Message)
		default:
			loaded++
			if strings.TrimPrefix(c.Message, hashPrefix) == hash {
				current++
			}
		}
	}
	for key, g := range st.Gateways {
		for i, c := range g.Conditions {
			if c.Type != string(gwv1.GatewayConditionProgrammed) || c.Status != metav1.ConditionTrue {
				continue
			}
			if len(failing) > 0 {
				g.Conditions[i].Status = metav1.ConditionFalse
				g.Conditions[i].Reason = string(gwv1.GatewayReasonPending)
				g.Conditions[i].Message = fmt.Sprintf("%d of %d replicas loaded a configuration; %s", loaded, len(pods), strings.Join(failing, "; "))
			} else {
				g.Conditions[i].Message = fmt.Sprintf("%d of %d replicas loaded the current configuration", current, len(pods))
			}
		}
		st.Gateways[key] = g
	}
}

// replicaPods are the Pods that the publish Service's EndpointSlices name.
func replicaPods(snap *snapshot.Snapshot) []*corev1.Pod {
	svc := snap.PublishService
	if svc == nil {
		return nil
	}
	names := map[string]bool{}
	for _, es := range snap.EndpointSlices[types.NamespacedName{Namespace: svc.Namespace, Name: svc.Name}] {
		for _, ep := range es.Endpoints {
			if ep.TargetRef != nil && ep.TargetRef.Kind == "Pod" && !terminating(ep) {
				names[ep.TargetRef.Name] = true
			}
		}
	}
	var out []*corev1.Pod
	for _, p := range snap.Pods {
		if p.Namespace == svc.Namespace && names[p.Name] {
			out = append(out, p)
		}
	}
	return out
}

func terminating(ep discoveryv1.Endpoint) bool {
	return ep.Conditions.Terminating != nil && *ep.Conditions.Terminating
}

func podCondition(p *corev1.Pod) *corev1.PodCondition {
	for i, c := range p.Status.Conditions {
		if c.Type == PodConditionType {
			return &p.Status.Conditions[i]
		}
	}
	return nil
}
