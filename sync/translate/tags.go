package translate

import (
	"strings"

	gwv1 "sigs.k8s.io/gateway-api/apis/v1"
)

// objectTags point a Kong entity back at the Kubernetes object behind it.
// The kind implies the group and version, and the uid adds nothing Kong's
// errors need, so both are left out: tags are repeated on many entities and
// count against Kong's body limit. The three are cut from one string: every
// route and upstream has its tags.
func objectTags(kind, namespace, name string) []string {
	s := "k8s-name:" + name + "k8s-namespace:" + namespace + "k8s-kind:" + kind
	i := len("k8s-name:") + len(name)
	j := i + len("k8s-namespace:") + len(namespace)
	return []string{s[:i], s[i:j], s[j:]}
}

// RefFromTags reads back the object that objectTags named.
func RefFromTags(tags []string) (ObjectRef, bool) {
	var ref ObjectRef
	for _, tag := range tags {
		key, value, _ := strings.Cut(tag, ":")
		switch key {
		case "k8s-name":
			ref.Name = value
		case "k8s-namespace":
			ref.Namespace = value
		case "k8s-kind":
			ref.Kind = value
		}
	}
	// Services and Secrets are core objects; every other kind tagged is a
	// Gateway API one, keyed with its group like the translation keys it.
	if ref.Kind != kindService && ref.Kind != "Secret" {
		ref.Group = gwv1.GroupName
	}
	return ref, ref.Kind != "" && ref.Name != ""
}

// Owner is the object behind a Kong entity: the one its tags name, or for
// an untagged route or target, the one its service's or upstream's tags
// name. It searches the config, which is fine for the rare refusal and
// costs nothing otherwise.
func (r Result) Owner(id, name string, tags []string) (ObjectRef, bool) {
	if ref, ok := RefFromTags(tags); ok {
		return ref, true
	}
	for _, s := range r.Config.Services {
		for _, route := range s.Routes {
			if route.Name == name {
				return RefFromTags(s.Tags)
			}
		}
	}
	for _, u := range r.Config.Upstreams {
		for _, target := range u.Targets {
			if target.ID == id {
				return RefFromTags(u.Tags)
			}
		}
	}
	return ObjectRef{}, false
}
