package status

import (
	"errors"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/konglet/konglet/sync/snapshot"
	"github.com/konglet/konglet/sync/translate"
)

const (
	hashOld = "11111111111111111111111111111111"
	hashNew = "22222222222222222222222222222222"
)

func TestProgrammed(t *testing.T) {
	held := func(name, hash string) Replica { return Replica{Name: name, Ready: true, Held: hash} }
	failed := func(name, hash, err string) Replica {
		return Replica{Name: name, Ready: true, Held: hashOld, Failed: hash, Error: err}
	}
	pending := func(name string) Replica { return Replica{Name: name} }
	for _, tc := range []struct {
		name     string
		replicas []Replica
		ok       bool
		msg      string
	}{
		{"all current", []Replica{held("a", hashNew), held("b", hashNew), held("c", hashNew)},
			true, "3 of 3 ready replicas hold the current configuration"},
		{"scale-out: new Pods not ready yet are pending, not failing",
			[]Replica{held("a", hashNew), held("b", hashNew), held("c", hashNew), pending("d"), pending("e")},
			true, "3 of 3 ready replicas hold the current configuration; not ready yet: d, e"},
		{"a replica that has not loaded the change yet is loading it",
			[]Replica{held("a", hashNew), held("b", hashOld), {Name: "c", Ready: true}},
			true, "1 of 3 ready replicas hold the current configuration; loading it: b, c"},
		{"one ready replica failed the current configuration",
			[]Replica{held("a", hashNew), failed("b", hashNew, "Kong answered 500"), held("c", hashNew)},
			false, "2 of 3 ready replicas hold the current configuration; failed to load it: b: Kong answered 500"},
		{"every replica failed: still ready, and said",
			[]Replica{failed("a", hashNew, "too large"), failed("b", hashNew, "too large")},
			false, "0 of 2 ready replicas hold the current configuration; failed to load it: a: too large; b: too large"},
		{"a failure of an older configuration is pending a newer attempt",
			[]Replica{held("a", hashNew), failed("b", hashOld, "Kong answered 503")},
			true, "1 of 2 ready replicas hold the current configuration; loading it: b"},
		{"a failing replica that is not ready does not count",
			[]Replica{held("a", hashNew), {Name: "b", Failed: hashNew, Error: "x"}},
			true, "1 of 1 ready replicas hold the current configuration; not ready yet: b"},
		{"no ready replica", []Replica{pending("a"), pending("b")},
			false, "0 of 0 ready replicas hold the current configuration; not ready yet: a, b"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ok, msg := Programmed(tc.replicas, hashNew)
			if ok != tc.ok || msg != tc.msg {
				t.Errorf("Programmed = %v, %q\nwant        %v, %q", ok, msg, tc.ok, tc.msg)
			}
		})
	}
}

// TestConditionsReadBack: what a replica writes is what the leader reads.
func TestConditionsReadBack(t *testing.T) {
	for _, tc := range []struct {
		name   string
		load   Load
		ready  bool
		loaded corev1.ConditionStatus
		reason string // of config-current
		want   Replica
	}{
		{"current", Load{Held: hashNew, Newest: hashNew}, true, corev1.ConditionTrue, ReasonCurrent,
			Replica{Name: "p", Held: hashNew}},
		{"failed load keeps the Pod ready", Load{Held: hashOld, Newest: hashNew, Err: errors.New("Kong answered 413: too large")},
			true, corev1.ConditionTrue, ReasonLoadFailed,
			Replica{Name: "p", Held: hashOld, Failed: hashNew, Error: "Kong answered 413: too large"}},
		{"nothing loaded", Load{Newest: hashNew, Err: errors.New("down")}, false, corev1.ConditionFalse, ReasonLoadFailed,
			Replica{Name: "p", Failed: hashNew, Error: "down"}},
		{"adopted before the caches synced", Load{Held: hashOld}, true, corev1.ConditionTrue, ReasonNotBuilt,
			Replica{Name: "p", Held: hashOld}},
		{"reloading a restarted Kong", Load{Held: hashOld, Newest: hashNew}, true, corev1.ConditionTrue, ReasonLoading,
			Replica{Name: "p", Held: hashOld}},
		{"no usable Gateway", Load{Held: hashNew, Newest: hashNew, Unusable: "Gateway a/b not found"}, false, corev1.ConditionFalse, ReasonCurrent,
			Replica{Name: "p"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			conds := tc.load.Conditions()
			if tc.load.Ready() != tc.ready || conds[0].Status != tc.loaded || conds[1].Reason != tc.reason {
				t.Fatalf("ready %v, conditions %+v", tc.load.Ready(), conds)
			}
			if got := ReplicaFrom("p", false, conds); got != tc.want {
				t.Errorf("read back %+v, want %+v", got, tc.want)
			}
		})
	}
}

func TestReplicasCountReadyOrServingEndpoints(t *testing.T) {
	yes, no := true, false
	ep := func(name string, ready, serving *bool) discoveryv1.Endpoint {
		return discoveryv1.Endpoint{TargetRef: &corev1.ObjectReference{Kind: "Pod", Name: name},
			Conditions: discoveryv1.EndpointConditions{Ready: ready, Serving: serving}}
	}
	pod := func(name string, conds ...corev1.PodCondition) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "kong"}, Status: corev1.PodStatus{Conditions: conds}}
	}
	snap := &snapshot.Snapshot{
		PublishService: snapshot.ServiceOf(&corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "proxy", Namespace: "kong"}}),
		EndpointSlices: map[types.NamespacedName][]*snapshot.EndpointSlice{{Namespace: "kong", Name: "proxy"}: {
			snapshot.EndpointSliceOf(&discoveryv1.EndpointSlice{Endpoints: []discoveryv1.Endpoint{ep("a", nil, nil), ep("b", &no, &yes), ep("c", &no, &no), ep("self", &yes, nil)}}, true),
		}},
		Pods: []*corev1.Pod{
			pod("a", Load{Held: hashNew, Newest: hashNew}.Conditions()...),
			pod("c"),
			pod("self", Load{Held: hashOld}.Conditions()...), // stale: self is told by its load
		},
	}
	got := Replicas(snap, "self", Load{Held: hashNew, Newest: hashNew})
	want := []Replica{{Name: "a", Ready: true, Held: hashNew}, {Name: "b", Ready: true}, {Name: "c"}, {Name: "self", Ready: true, Held: hashNew}}
	if len(got) != len(want) {
		t.Fatalf("replicas %+v, want %+v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("replica %d = %+v, want %+v", i, got[i], want[i])
		}
	}
}

func TestApplyReplicasLeavesItsInputAlone(t *testing.T) {
	key := types.NamespacedName{Namespace: "ns", Name: "gw"}
	st := translate.Status{Gateways: map[types.NamespacedName]gwv1.GatewayStatus{key: {Conditions: []metav1.Condition{
		{Type: "Accepted", Status: metav1.ConditionTrue},
		{Type: "Programmed", Status: metav1.ConditionTrue, Reason: "Programmed"},
	}}}}
	out := ApplyReplicas(st, []Replica{{Name: "a", Ready: true, Failed: hashNew, Error: "boom"}}, hashNew)
	if c := out.Gateways[key].Conditions[1]; c.Status != metav1.ConditionFalse || c.Reason != "Pending" || !strings.Contains(c.Message, "a: boom") {
		t.Errorf("Programmed = %+v", c)
	}
	if c := st.Gateways[key].Conditions[1]; c.Status != metav1.ConditionTrue || c.Message != "" {
		t.Errorf("the input was changed: %+v", c)
	}
	if got := ApplyReplicas(st, nil, hashNew); got.Gateways[key].Conditions[1].Status != metav1.ConditionTrue {
		t.Error("without replicas Programmed must stay as translated")
	}
}

func TestGatewayProblems(t *testing.T) {
	ours, other := "konglet.dev/gateway-controller", "example.com/other"
	gw := func(name, class string) *gwv1.Gateway {
		return &gwv1.Gateway{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name}, Spec: gwv1.GatewaySpec{GatewayClassName: gwv1.ObjectName(class)}}
	}
	snap := &snapshot.Snapshot{
		ControllerName: ours,
		GatewayClasses: map[string]*gwv1.GatewayClass{
			"kong":  {Spec: gwv1.GatewayClassSpec{ControllerName: gwv1.GatewayController(ours)}},
			"other": {Spec: gwv1.GatewayClassSpec{ControllerName: gwv1.GatewayController(other)}},
		},
		Gateways: []*gwv1.Gateway{gw("good", "kong"), gw("foreign", "other"), gw("noclass", "gone"), gw("nolistener", "kong")},
	}
	listener := func(ok bool) gwv1.ListenerStatus {
		s := metav1.ConditionFalse
		if ok {
			s = metav1.ConditionTrue
		}
		return gwv1.ListenerStatus{Conditions: []metav1.Condition{{Type: "Programmed", Status: s}}}
	}
	n := func(name string) types.NamespacedName { return types.NamespacedName{Namespace: "ns", Name: name} }
	st := translate.Status{Gateways: map[types.NamespacedName]gwv1.GatewayStatus{
		n("good"):       {Listeners: []gwv1.ListenerStatus{listener(false), listener(true)}},
		n("nolistener"): {Listeners: []gwv1.ListenerStatus{listener(false)}},
	}}
	got := GatewayProblems(snap, []types.NamespacedName{n("good"), n("missing"), n("foreign"), n("noclass"), n("nolistener")}, st)
	for name, want := range map[string]string{
		"good":       "",
		"missing":    "Gateway ns/missing not found (check --gateway)",
		"foreign":    "Gateway ns/foreign: its GatewayClass other belongs to example.com/other, not to konglet (konglet.dev/gateway-controller)",
		"noclass":    "Gateway ns/noclass: its GatewayClass gone does not exist",
		"nolistener": "Gateway ns/nolistener has no usable listener (see its status)",
	} {
		if got[n(name)] != want {
			t.Errorf("%s: %q, want %q", name, got[n(name)], want)
		}
	}
}
