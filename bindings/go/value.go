package tern

/*
#include <stdlib.h>
#include "c_api.h"
*/
import "C"

import (
	"runtime"
	"unsafe"
)

// ValueKind is what a model input or output is: a tensor, a sequence of tensors, or an optional
// (a tensor, a sequence, or nothing).
type ValueKind int

const (
	TensorValue   ValueKind = 0
	SequenceValue ValueKind = 1
	OptionalValue ValueKind = 2
)

// Value is a tensor, a sequence or an optional (tern_value), for models whose inputs or outputs
// are sequences or optionals (Session.RunValues). Values are immutable; they share the tensors
// they were made from.
type Value struct {
	p *C.tern_value
}

func wrapValue(p *C.tern_value) *Value {
	v := &Value{p}
	runtime.SetFinalizer(v, (*Value).Close)
	return v
}

// Close frees the value now (a finalizer does it otherwise).
func (v *Value) Close() {
	if v.p != nil {
		C.tern_value_destroy(v.p)
		v.p = nil
		runtime.SetFinalizer(v, nil)
	}
}

// NewTensorValue holds tensor t (sharing its data).
func NewTensorValue(t *Tensor) (*Value, error) {
	var out *C.tern_value
	err := call(func() C.tern_status { return C.tern_value_from_tensor(t.p, &out) })
	runtime.KeepAlive(t)
	if err != nil {
		return nil, err
	}
	return wrapValue(out), nil
}

// NewSequence is a sequence of the tensors (sharing their data), all of dtype elem.
func NewSequence(elem DType, items []*Tensor) (*Value, error) {
	ptrSize := C.size_t(unsafe.Sizeof(uintptr(0)))
	arr := C.malloc(C.size_t(max1(len(items))) * ptrSize)
	defer C.free(arr)
	list := unsafe.Slice((**C.tern_tensor)(arr), len(items))
	for i, t := range items {
		list[i] = nil
		if t != nil {
			list[i] = t.p
		}
	}
	var out *C.tern_value
	err := call(func() C.tern_status {
		return C.tern_value_create_sequence(C.tern_dtype(elem), (**C.tern_tensor)(arr),
			C.size_t(len(items)), &out)
	})
	runtime.KeepAlive(items)
	if err != nil {
		return nil, err
	}
	return wrapValue(out), nil
}

// NewOptional holds v (a tensor or sequence value), or nothing when v is nil.
func NewOptional(v *Value) (*Value, error) {
	var inner *C.tern_value
	if v != nil {
		inner = v.p
	}
	var out *C.tern_value
	err := call(func() C.tern_status { return C.tern_value_create_optional(inner, &out) })
	runtime.KeepAlive(v)
	if err != nil {
		return nil, err
	}
	return wrapValue(out), nil
}

// Kind says what the value is.
func (v *Value) Kind() (ValueKind, error) {
	var k C.tern_value_kind
	err := call(func() C.tern_status { return C.tern_value_get_kind(v.p, &k) })
	return ValueKind(k), err
}

// Tensor is a tensor value's tensor (sharing its data).
func (v *Value) Tensor() (*Tensor, error) {
	var out *C.tern_tensor
	if err := call(func() C.tern_status { return C.tern_value_get_tensor(v.p, &out) }); err != nil {
		return nil, err
	}
	return wrapTensor(out), nil
}

// Len is a sequence's length (0 for other kinds).
func (v *Value) Len() int { return int(C.tern_value_sequence_length(v.p)) }

// At is a sequence's element i (sharing its data).
func (v *Value) At(i int) (*Tensor, error) {
	var out *C.tern_tensor
	err := call(func() C.tern_status { return C.tern_value_sequence_at(v.p, C.size_t(i), &out) })
	if err != nil {
		return nil, err
	}
	return wrapTensor(out), nil
}

// HasValue says whether an optional holds something.
func (v *Value) HasValue() bool { return C.tern_value_optional_has_value(v.p) == 1 }

// Get is what an optional holds.
func (v *Value) Get() (*Value, error) {
	var out *C.tern_value
	if err := call(func() C.tern_status { return C.tern_value_optional_get(v.p, &out) }); err != nil {
		return nil, err
	}
	return wrapValue(out), nil
}

// RunValues is Run for models whose inputs or outputs are sequences or optionals: values in,
// values out (a tensor output as a TensorValue).
func (s *Session) RunValues(inputs map[string]*Value, outputs []string) ([]*Value, error) {
	n, m := len(inputs), len(outputs)
	ptrSize := C.size_t(unsafe.Sizeof(uintptr(0)))
	inNamesP := C.malloc(C.size_t(max1(n)) * ptrSize)
	inValuesP := C.malloc(C.size_t(max1(n)) * ptrSize)
	outNamesP := C.malloc(C.size_t(max1(m)) * ptrSize)
	resultsP := C.calloc(C.size_t(max1(m)), ptrSize)
	inNames := unsafe.Slice((**C.char)(inNamesP), n)
	inValues := unsafe.Slice((**C.tern_value)(inValuesP), n)
	outNames := unsafe.Slice((**C.char)(outNamesP), m)
	results := unsafe.Slice((**C.tern_value)(resultsP), m)
	defer func() {
		for _, p := range inNames {
			C.free(unsafe.Pointer(p))
		}
		for _, p := range outNames {
			C.free(unsafe.Pointer(p))
		}
		C.free(inNamesP)
		C.free(inValuesP)
		C.free(outNamesP)
		C.free(resultsP)
	}()
	i := 0
	for name, v := range inputs {
		inNames[i] = C.CString(name)
		inValues[i] = nil
		if v != nil {
			inValues[i] = v.p
		}
		i++
	}
	for j, name := range outputs {
		outNames[j] = C.CString(name)
	}
	err := call(func() C.tern_status {
		return C.tern_session_run_values(s.p, nil, (**C.char)(inNamesP),
			(**C.tern_value)(inValuesP), C.size_t(n), (**C.char)(outNamesP), C.size_t(m),
			(**C.tern_value)(resultsP))
	})
	runtime.KeepAlive(inputs)
	runtime.KeepAlive(s)
	if err != nil {
		return nil, err
	}
	out := make([]*Value, m)
	for j := range outputs {
		out[j] = wrapValue(results[j])
	}
	return out, nil
}
