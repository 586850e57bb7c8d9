package declarative

import (
	"strings"
	"testing"
)

func TestIDIsDeterministicAndDistinct(t *testing.T) {
	if ID("route", "a") != ID("route", "a") {
		t.Fatal("ID is not deterministic")
	}
	if ID("route", "a") == ID("service", "a") || ID("route", "ab") == ID("route", "a\x00b") {
		t.Fatal("distinct inputs share an id")
	}
	if id := ID("route", "a"); len(id) != 36 || id[14] != '8' {
		t.Fatalf("%s is not a version 8 UUID", id)
	}
}

func TestMarshalDoesNotEscapeHTML(t *testing.T) {
	b, err := Marshal(&Config{FormatVersion: FormatVersion, Services: []*Service{{Name: "s", Host: "h",
		Routes: []*Route{{Name: "r", Expression: `(a == "<b>") && (c == "&")`}}}}})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), `(a == \"<b>\") && (c == \"&\")`) || strings.HasSuffix(string(b), "\n") {
		t.Fatalf("unexpected encoding: %s", b)
	}
	if Hash(b) != Hash(append([]byte(nil), b...)) || len(Hash(b)) != 32 {
		t.Fatal("Hash is not a stable md5 hex digest")
	}
}
