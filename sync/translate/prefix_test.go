package translate

import (
	"regexp"
	"strings"
	"testing"
)

// TestPrefixRewriteCapture: the path regex behind a ReplacePrefixMatch
// rewrite matches exactly what PathPrefix matches and captures what the
// template appends.
func TestPrefixRewriteCapture(t *testing.T) {
	for _, c := range []struct {
		prefix, replacement, path string
		match                     bool
		rewritten                 string
	}{
		{"/prefix", "/", "/prefix", true, "/"},
		{"/prefix", "/", "/prefix/", true, "/"},
		{"/prefix", "/", "/prefix/a/b", true, "/a/b"},
		{"/prefix", "/", "/prefixed", false, ""},
		{"/prefix/", "/new", "/prefix", true, "/new"},
		{"/prefix", "/new/", "/prefix/x", true, "/new/x"},
		{"/prefix", "/new", "/prefixed", false, ""},
		{"/", "/new", "/x", true, "/new/x"},
	} {
		re := regexp.MustCompile(prefixCapture(c.prefix, c.replacement))
		m := re.FindStringSubmatch(c.path)
		if (m != nil) != c.match {
			t.Errorf("%s on %s: match %v, want %v", c.prefix, c.path, m != nil, c.match)
			continue
		}
		if m == nil {
			continue
		}
		rest := strings.TrimSuffix(c.replacement, "/")
		var got string
		if rest == "" {
			got = "/" + m[1]
		} else {
			got = rest + m[1]
		}
		if got != c.rewritten {
			t.Errorf("%s -> %s on %s: %q, want %q", c.prefix, c.replacement, c.path, got, c.rewritten)
		}
	}
}
