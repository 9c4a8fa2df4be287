package server

import (
	"reflect"
	"testing"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/stoker-dev/stoker/server/internal/coord"
)

// TestStatusOnTheWire: the coordinator's own status and epoch end (which
// keep it free of the protocol's messages) reach the wire whole: with
// every field of theirs set, every field of JobStatus (its makers and
// making shares too) and of EpochEnd is set. A field added to one side
// and not mapped fails here.
func TestStatusOnTheWire(t *testing.T) {
	var s coord.Status
	fillAll(reflect.ValueOf(&s).Elem())
	checkAllSet(t, jobStatus(&s))
	var e coord.EpochEnd
	fillAll(reflect.ValueOf(&e).Elem())
	checkAllSet(t, epochEnd(&e))
}

// fillAll sets every field of v to a value that is not zero: slices hold
// one element, pointers point at a filled value.
func fillAll(v reflect.Value) {
	switch v.Kind() {
	case reflect.Struct:
		for i := range v.NumField() {
			fillAll(v.Field(i))
		}
	case reflect.Pointer:
		v.Set(reflect.New(v.Type().Elem()))
		fillAll(v.Elem())
	case reflect.Slice:
		v.Set(reflect.MakeSlice(v.Type(), 1, 1))
		fillAll(v.Index(0))
	case reflect.String:
		v.SetString("x")
	case reflect.Bool:
		v.SetBool(true)
	case reflect.Int, reflect.Int64:
		v.SetInt(3)
	case reflect.Uint64:
		v.SetUint(3)
	case reflect.Float64:
		v.SetFloat(0.5)
	default:
		panic("fillAll: a field of kind " + v.Kind().String())
	}
}

// checkAllSet fails for each field of m (and of the messages in it) that
// is not set.
func checkAllSet(t *testing.T, m proto.Message) {
	t.Helper()
	var check func(path string, r protoreflect.Message)
	check = func(path string, r protoreflect.Message) {
		fields := r.Descriptor().Fields()
		for i := range fields.Len() {
			f := fields.Get(i)
			name := path + string(f.Name())
			if !r.Has(f) {
				t.Errorf("%s is not set", name)
				continue
			}
			switch {
			case f.IsList() && f.Message() != nil:
				l := r.Get(f).List()
				for j := range l.Len() {
					check(name+"[].", l.Get(j).Message())
				}
			case f.Message() != nil:
				check(name+".", r.Get(f).Message())
			}
		}
	}
	check(string(m.ProtoReflect().Descriptor().Name())+".", m.ProtoReflect())
}
