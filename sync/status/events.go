package status

import (
	"context"
	"fmt"
	"strings"
	"unicode/utf8"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/konglet/konglet/sync/snapshot"
	"github.com/konglet/konglet/sync/translate"
)

// Events records Kubernetes Events about objects (events.k8s.io/v1). Only a
// replica that leads writes them, so that N replicas do not say it N times.
type Events struct {
	kube     kubernetes.Interface
	writer   *Writer
	instance string // this Pod, as the reporting instance
}

// NewEvents returns an event recorder that writes when writer leads.
func NewEvents(kube kubernetes.Interface, writer *Writer, instance string) *Events {
	return &Events{kube: kube, writer: writer, instance: instance}
}

// maxNote is the API server's limit on an Event's note.
const maxNote = 1024

// Refused records that Kong refused what an object produced, with Kong's
// message, as a Warning Event on the object. It reports whether it wrote.
func (e *Events) Refused(ctx context.Context, snap *snapshot.Snapshot, ref translate.ObjectRef, message string) (bool, error) {
	if !e.writer.Leading() {
		return false, nil
	}
	obj := snap.Object(ref.Kind, ref.Namespace, ref.Name)
	if obj == nil {
		return true, nil // gone: nothing to tell anyone about
	}
	apiVersion := "v1"
	if ref.Group != "" {
		apiVersion = gwv1.GroupVersion.String()
	}
	note := "Kong refused it and it is left out of the configuration: " + message
	if len(note) > maxNote {
		// Cut at a character boundary: a split one would be sent as
		// U+FFFD, longer than the limit allows.
		cut := maxNote
		for !utf8.RuneStart(note[cut]) {
			cut--
		}
		note = note[:cut]
	}
	now := metav1.NewMicroTime(e.writer.now())
	ev := &eventsv1.Event{
		ObjectMeta: metav1.ObjectMeta{
			Name:      ObjectName("", obj.GetName(), fmt.Sprintf(".%x", now.UnixNano())),
			Namespace: obj.GetNamespace(),
		},
		EventTime:           now,
		ReportingController: controllerLabel(snap.ControllerName),
		ReportingInstance:   e.instance,
		Action:              "LoadIntoKong",
		Reason:              "KongRefused",
		Type:                corev1.EventTypeWarning,
		Note:                note,
		Regarding: corev1.ObjectReference{
			APIVersion: apiVersion, Kind: ref.Kind, Namespace: obj.GetNamespace(), Name: obj.GetName(),
			UID: obj.GetUID(), ResourceVersion: obj.GetResourceVersion(),
		},
	}
	if _, err := e.kube.EventsV1().Events(obj.GetNamespace()).Create(ctx, ev, metav1.CreateOptions{}); err != nil {
		return false, err
	}
	return true, nil
}

// controllerLabel makes a controllerName a valid reportingController (a
// qualified name: no more than one "/").
func controllerLabel(name string) string {
	if strings.Count(name, "/") <= 1 {
		return name
	}
	return strings.ReplaceAll(name, "/", "-")
}
