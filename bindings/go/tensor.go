package tern

/*
#include <stdlib.h>
#include <string.h>
#include "c_api.h"
// cgo cannot call a C function pointer: DLPack deleters are called through this.
static void tern_go_dlpack_delete(struct DLManagedTensorVersioned* m) {
  if (m && m->deleter) m->deleter(m);
}
*/
import "C"

import (
	"fmt"
	"runtime"
	"unsafe"
)

// DType is an element type; the values are ONNX's TensorProto.DataType numbers.
type DType int

const (
	Float32  DType = 1
	Uint8    DType = 2
	Int8     DType = 3
	Uint16   DType = 4
	Int16    DType = 5
	Int32    DType = 6
	Int64    DType = 7
	String   DType = 8
	Bool     DType = 9
	Float16  DType = 10
	Float64  DType = 11
	Uint32   DType = 12
	Uint64   DType = 13
	BFloat16 DType = 16
)

// Tensor is a tensor that owns its storage (tern_tensor). Go memory is always copied in: C may
// not keep pointers into Go memory.
type Tensor struct {
	p *C.tern_tensor
}

func wrapTensor(p *C.tern_tensor) *Tensor {
	t := &Tensor{p}
	runtime.SetFinalizer(t, (*Tensor).Close)
	return t
}

// NewTensor is a zero-filled tensor.
func NewTensor(dtype DType, shape []int64) (*Tensor, error) {
	var out *C.tern_tensor
	var dims *C.int64_t
	if len(shape) > 0 {
		dims = (*C.int64_t)(unsafe.Pointer(&shape[0]))
	}
	err := call(func() C.tern_status {
		return C.tern_tensor_create(C.tern_dtype(dtype), dims, C.size_t(len(shape)), &out)
	})
	if err != nil {
		return nil, err
	}
	return wrapTensor(out), nil
}

// NewTensorFromBytes is a tensor holding a copy of data (exactly the shape's byte size).
func NewTensorFromBytes(dtype DType, shape []int64, data []byte) (*Tensor, error) {
	t, err := NewTensor(dtype, shape)
	if err != nil {
		return nil, err
	}
	if n := int(C.tern_tensor_byte_size(t.p)); n != len(data) {
		t.Close()
		return nil, &Error{StatusInvalidArgument,
			fmt.Sprintf("shape %v of %d needs %d bytes, got %d", shape, int(dtype), n, len(data))}
	}
	if len(data) > 0 {
		C.memcpy(C.tern_tensor_data(t.p), unsafe.Pointer(&data[0]), C.size_t(len(data)))
	}
	return t, nil
}

// NewTensorFloat32 is a float32 tensor holding a copy of data.
func NewTensorFloat32(shape []int64, data []float32) (*Tensor, error) {
	var b []byte
	if len(data) > 0 {
		b = unsafe.Slice((*byte)(unsafe.Pointer(&data[0])), len(data)*4)
	}
	return NewTensorFromBytes(Float32, shape, b)
}

// NewTensorInt64 is an int64 tensor holding a copy of data.
func NewTensorInt64(shape []int64, data []int64) (*Tensor, error) {
	var b []byte
	if len(data) > 0 {
		b = unsafe.Slice((*byte)(unsafe.Pointer(&data[0])), len(data)*8)
	}
	return NewTensorFromBytes(Int64, shape, b)
}

// Close releases the tensor; later calls do nothing.
func (t *Tensor) Close() {
	if t != nil && t.p != nil {
		C.tern_tensor_destroy(t.p)
		t.p = nil
		runtime.SetFinalizer(t, nil)
	}
}

// DType is the element type.
func (t *Tensor) DType() DType { return DType(C.tern_tensor_dtype(t.p)) }

// Shape is a copy of the dims.
func (t *Tensor) Shape() []int64 {
	rank := int(C.tern_tensor_rank(t.p))
	if rank == 0 {
		return []int64{}
	}
	dims := unsafe.Slice((*int64)(unsafe.Pointer(C.tern_tensor_shape(t.p))), rank)
	return append([]int64(nil), dims...)
}

// Bytes is a copy of the element data.
func (t *Tensor) Bytes() []byte {
	n := int(C.tern_tensor_byte_size(t.p))
	p := C.tern_tensor_data(t.p)
	if n == 0 || p == nil {
		return []byte{}
	}
	return C.GoBytes(p, C.int(n))
}

// Float32s is a copy of the elements of a float32 tensor.
func (t *Tensor) Float32s() ([]float32, error) {
	if t.DType() != Float32 {
		return nil, &Error{StatusInvalidArgument, fmt.Sprintf("the tensor holds dtype %d, not float32", int(t.DType()))}
	}
	b := t.Bytes()
	out := make([]float32, len(b)/4)
	if len(out) > 0 {
		copy(unsafe.Slice((*byte)(unsafe.Pointer(&out[0])), len(b)), b)
	}
	return out, nil
}

// ToDLPack exports the tensor as a DLPack 1.x managed tensor (a struct DLManagedTensorVersioned*
// for C code: NumPy, PyTorch and others read it) sharing its memory, without a copy
// (tern_tensor_to_dlpack). The memory stays alive, even after Close, until the receiver calls
// the struct's deleter once (DeleteDLPack does so).
func (t *Tensor) ToDLPack() (unsafe.Pointer, error) {
	var out *C.struct_DLManagedTensorVersioned
	if err := call(func() C.tern_status { return C.tern_tensor_to_dlpack(t.p, &out) }); err != nil {
		return nil, err
	}
	return unsafe.Pointer(out), nil
}

// NewTensorFromDLPack takes a DLPack 1.x managed tensor (struct DLManagedTensorVersioned*)
// without copying its memory (tern_tensor_from_dlpack): on success the tensor owns it and calls
// its deleter once when the tensor is closed and no run uses it; on failure it stays the
// caller's. CPU memory in a dense row-major layout only (else StatusUnsupported saying why).
func NewTensorFromDLPack(managed unsafe.Pointer) (*Tensor, error) {
	var out *C.tern_tensor
	err := call(func() C.tern_status {
		return C.tern_tensor_from_dlpack((*C.struct_DLManagedTensorVersioned)(managed), &out)
	})
	if err != nil {
		return nil, err
	}
	return wrapTensor(out), nil
}

// ReadONNXFile reads a serialized ONNX TensorProto file (the input_N.pb / output_N.pb files of
// ONNX test data sets) into a new tensor.
func ReadONNXFile(path string) (*Tensor, error) {
	var out *C.tern_tensor
	cpath := C.CString(path)
	defer C.free(unsafe.Pointer(cpath))
	if err := call(func() C.tern_status { return C.tern_tensor_read_onnx_file(cpath, &out) }); err != nil {
		return nil, err
	}
	return wrapTensor(out), nil
}

// DeleteDLPack calls a DLPack managed tensor's deleter: for one ToDLPack gave that no consumer
// took.
func DeleteDLPack(managed unsafe.Pointer) {
	C.tern_go_dlpack_delete((*C.struct_DLManagedTensorVersioned)(managed))
}

// IsReadOnly says whether the tensor came from a DLPack tensor flagged read-only.
func (t *Tensor) IsReadOnly() bool { return C.tern_tensor_is_read_only(t.p) != 0 }
