package status

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/validation"
)

func TestObjectNameStaysAValidName(t *testing.T) {
	if got := ObjectName("konglet-", "kong", ""); got != "konglet-kong" {
		t.Fatalf("a short name is kept as it is: %q", got)
	}
	longest := strings.Repeat("a", 60) + "." + strings.Repeat("b", 60) + "." + strings.Repeat("c", 60) + "." + strings.Repeat("d", 71)
	other := longest[:len(longest)-1] + "e"
	seen := map[string]bool{}
	for _, tc := range []struct{ prefix, name, suffix string }{
		{"konglet-", longest, ""},
		{"konglet-", other, ""},
		{"", longest, ".18b3c5d2e1f0a9b8"},
		{"", other, ".18b3c5d2e1f0a9b8"},
		{"konglet-", strings.Repeat("a", 236) + "-" + strings.Repeat("b", 16), ""}, // a cut that lands on "-"
	} {
		got := ObjectName(tc.prefix, tc.name, tc.suffix)
		if errs := validation.IsDNS1123Subdomain(got); len(errs) > 0 {
			t.Fatalf("%q: %v", got, errs)
		}
		if !strings.HasPrefix(got, tc.prefix) || !strings.HasSuffix(got, tc.suffix) {
			t.Fatalf("%q lost its prefix or suffix", got)
		}
		if seen[got] {
			t.Fatalf("two objects got the name %q", got)
		}
		seen[got] = true
	}
}
