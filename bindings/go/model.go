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

// ValueInfo is a graph input or output: name, element type and shape (-1 marks a dynamic dim).
type ValueInfo struct {
	Name  string
	DType DType
	Shape []int64
}

// Model is a loaded, verified model (tern_model): immutable and safe to share between
// goroutines and sessions. Sessions keep what they need, so a model may be closed first.
type Model struct {
	p *C.tern_model
}

func wrapModel(p *C.tern_model) *Model {
	m := &Model{p}
	runtime.SetFinalizer(m, (*Model).Close)
	return m
}

// LoadModel loads a .tern file (mapped, not copied) or an ONNX model; the content decides.
func LoadModel(path string) (*Model, error) {
	cpath := C.CString(path)
	defer C.free(unsafe.Pointer(cpath))
	var out *C.tern_model
	if err := call(func() C.tern_status { return C.tern_model_load_file(cpath, &out) }); err != nil {
		return nil, err
	}
	return wrapModel(out), nil
}

// LoadModelBytes loads a model from bytes (copied).
func LoadModelBytes(data []byte) (*Model, error) {
	var p unsafe.Pointer
	if len(data) > 0 {
		p = C.CBytes(data)
		defer C.free(p)
	}
	var out *C.tern_model
	if err := call(func() C.tern_status { return C.tern_model_load_memory(p, C.size_t(len(data)), &out) }); err != nil {
		return nil, err
	}
	return wrapModel(out), nil
}

// Save writes the model as .tern.
func (m *Model) Save(path string) error {
	cpath := C.CString(path)
	defer C.free(unsafe.Pointer(cpath))
	return call(func() C.tern_status { return C.tern_model_save(m.p, cpath) })
}

// Close releases the model; later calls do nothing.
func (m *Model) Close() {
	if m != nil && m.p != nil {
		C.tern_model_destroy(m.p)
		m.p = nil
		runtime.SetFinalizer(m, nil)
	}
}

// Inputs are the graph inputs the caller feeds.
func (m *Model) Inputs() ([]ValueInfo, error) { return m.infos(true) }

// Outputs are the graph outputs.
func (m *Model) Outputs() ([]ValueInfo, error) { return m.infos(false) }

func (m *Model) infos(inputs bool) ([]ValueInfo, error) {
	var n int
	if inputs {
		n = int(C.tern_model_input_count(m.p))
	} else {
		n = int(C.tern_model_output_count(m.p))
	}
	out := make([]ValueInfo, 0, n)
	for i := 0; i < n; i++ {
		var dtype C.tern_dtype
		var rank C.size_t
		var shape *C.int64_t
		var name *C.char
		err := call(func() C.tern_status {
			if inputs {
				name = C.tern_model_input_name(m.p, C.size_t(i))
				return C.tern_model_input_info(m.p, C.size_t(i), &dtype, &rank, &shape)
			}
			name = C.tern_model_output_name(m.p, C.size_t(i))
			return C.tern_model_output_info(m.p, C.size_t(i), &dtype, &rank, &shape)
		})
		if err != nil {
			return nil, err
		}
		dims := []int64{}
		if rank > 0 {
			dims = append(dims, unsafe.Slice((*int64)(unsafe.Pointer(shape)), int(rank))...)
		}
		out = append(out, ValueInfo{C.GoString(name), DType(dtype), dims})
	}
	return out, nil
}
