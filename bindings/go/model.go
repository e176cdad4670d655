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
		out = append(out, ValueInfo{C.GoString(name), DType(dtype), copyDims(shape, rank)})
	}
	return out, nil
}

// Node is a node of the main graph as loaded (before Tern's optimizations), in file order.
type Node struct {
	Name    string // "" when the file gave none
	OpType  string
	Domain  string   // "" for ai.onnx
	Inputs  []string // "" for an omitted optional input
	Outputs []string
}

// GraphValue is a value (tensor) of the main graph: an input, a weight, an intermediate or an
// output.
type GraphValue struct {
	Name     string
	DType    DType   // 0 for sequence and optional values
	Shape    []int64 // nil when not even the rank is known; -1 marks a dim known only at run time
	Constant bool    // a weight or folded data (its shape is exact)
}

// Nodes lists the main graph's nodes in file order (subgraphs of If/Loop/Scan not listed).
func (m *Model) Nodes() ([]Node, error) {
	if err := load(); err != nil {
		return nil, err
	}
	n := int(C.tern_model_node_count(m.p))
	out := make([]Node, 0, n)
	for i := 0; i < n; i++ {
		var name, op, domain *C.char
		var nIn, nOut C.size_t
		if err := call(func() C.tern_status {
			return C.tern_model_node_info(m.p, C.size_t(i), &name, &op, &domain, &nIn, &nOut)
		}); err != nil {
			return nil, err
		}
		node := Node{C.GoString(name), C.GoString(op), C.GoString(domain),
			make([]string, int(nIn)), make([]string, int(nOut))}
		for j := range node.Inputs {
			node.Inputs[j] = C.GoString(C.tern_model_node_input(m.p, C.size_t(i), C.size_t(j)))
		}
		for j := range node.Outputs {
			node.Outputs[j] = C.GoString(C.tern_model_node_output(m.p, C.size_t(i), C.size_t(j)))
		}
		out = append(out, node)
	}
	runtime.KeepAlive(m)
	return out, nil
}

// Values lists the main graph's values: inputs, weights, intermediates and outputs.
func (m *Model) Values() ([]GraphValue, error) {
	if err := load(); err != nil {
		return nil, err
	}
	n := int(C.tern_model_value_count(m.p))
	out := make([]GraphValue, 0, n)
	for i := 0; i < n; i++ {
		var v GraphValue
		err := call(func() C.tern_status {
			var name *C.char
			var dtype C.tern_dtype
			var hasShape, constant C.int
			var rank C.size_t
			var shape *C.int64_t
			st := C.tern_model_value_info(m.p, C.size_t(i), &name, &dtype, &hasShape, &rank, &shape, &constant)
			if st == C.TERN_OK {
				// The shape lives until the next call on this OS thread (locked by call): copied here.
				v = GraphValue{C.GoString(name), DType(dtype), nil, constant != 0}
				if hasShape != 0 {
					v.Shape = copyDims(shape, rank)
				}
			}
			return st
		})
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	runtime.KeepAlive(m)
	return out, nil
}

// OptionalInputs are the graph inputs that have an initializer: a run may give them to replace
// the weight, or leave them to their initializer.
func (m *Model) OptionalInputs() ([]ValueInfo, error) {
	if err := load(); err != nil {
		return nil, err
	}
	n := int(C.tern_model_optional_input_count(m.p))
	out := make([]ValueInfo, 0, n)
	for i := 0; i < n; i++ {
		var dtype C.tern_dtype
		var rank C.size_t
		var shape *C.int64_t
		if err := call(func() C.tern_status {
			return C.tern_model_optional_input_info(m.p, C.size_t(i), &dtype, &rank, &shape)
		}); err != nil {
			return nil, err
		}
		name := C.GoString(C.tern_model_optional_input_name(m.p, C.size_t(i)))
		out = append(out, ValueInfo{name, DType(dtype), copyDims(shape, rank)})
	}
	runtime.KeepAlive(m)
	return out, nil
}

// Producer is the producer the file names ("pytorch 2.1"; "" when none).
func (m *Model) Producer() string {
	if load() != nil {
		return ""
	}
	return C.GoString(C.tern_model_producer(m.p))
}

// Opset is the ai.onnx opset the model's nodes follow.
func (m *Model) Opset() int64 {
	if load() != nil {
		return 0
	}
	return int64(C.tern_model_opset(m.p))
}

// copyDims copies rank dims from C memory (an empty, non-nil slice for rank 0).
func copyDims(shape *C.int64_t, rank C.size_t) []int64 {
	dims := []int64{}
	if rank > 0 && shape != nil {
		dims = append(dims, unsafe.Slice((*int64)(unsafe.Pointer(shape)), int(rank))...)
	}
	return dims
}
