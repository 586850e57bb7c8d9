package snapshot

import (
	"reflect"
	"testing"
)

// TestKongEqualComparesEveryField: a Kong that differs in any one field
// is another Kong to a translation (a field added later must be compared
// too).
func TestKongEqualComparesEveryField(t *testing.T) {
	base := DefaultKong(RouterExpressions)
	if !base.Equal(DefaultKong(RouterExpressions)) {
		t.Fatal("a Kong differs from its copy")
	}
	typ := reflect.TypeOf(base)
	for i := range typ.NumField() {
		other := DefaultKong(RouterExpressions)
		f := reflect.ValueOf(&other).Elem().Field(i)
		switch f.Kind() {
		case reflect.String:
			f.SetString(f.String() + "x")
		case reflect.Bool:
			f.SetBool(!f.Bool())
		case reflect.Slice:
			f.Set(reflect.Append(f, reflect.New(f.Type().Elem()).Elem()))
		case reflect.Map:
			m := reflect.MakeMap(f.Type())
			m.SetMapIndex(reflect.New(f.Type().Key()).Elem(), reflect.New(f.Type().Elem()).Elem())
			f.Set(m)
		default:
			t.Fatalf("field %s: a kind the test cannot change", typ.Field(i).Name)
		}
		if base.Equal(other) {
			t.Errorf("Kongs that differ in %s are Equal", typ.Field(i).Name)
		}
	}
}
