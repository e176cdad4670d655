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

// SessionOptions configure NewSession (tern_session_options).
type SessionOptions struct {
	p *C.tern_session_options
}

// NewSessionOptions are the defaults: the CPU backend, the process thread counts.
func NewSessionOptions() (*SessionOptions, error) {
	var out *C.tern_session_options
	if err := call(func() C.tern_status { return C.tern_session_options_create(&out) }); err != nil {
		return nil, err
	}
	o := &SessionOptions{out}
	runtime.SetFinalizer(o, (*SessionOptions).Close)
	return o, nil
}

// Close releases the options; later calls do nothing.
func (o *SessionOptions) Close() {
	if o != nil && o.p != nil {
		C.tern_session_options_destroy(o.p)
		o.p = nil
		runtime.SetFinalizer(o, nil)
	}
}

func withCString(s string, f func(*C.char) C.tern_status) error {
	cs := C.CString(s)
	defer C.free(unsafe.Pointer(cs))
	return call(func() C.tern_status { return f(cs) })
}

// SetBackends sets the ordered backend preference, "cuda,cpu".
func (o *SessionOptions) SetBackends(list string) error {
	return withCString(list, func(s *C.char) C.tern_status { return C.tern_session_options_set_backends(o.p, s) })
}

// SetNumThreads sets this session's intra-op threads (0: the process value).
func (o *SessionOptions) SetNumThreads(n int) error {
	return call(func() C.tern_status { return C.tern_session_options_set_num_threads(o.p, C.int(n)) })
}

// SetNumInteropThreads sets this session's inter-op threads (0: the process value).
func (o *SessionOptions) SetNumInteropThreads(n int) error {
	return call(func() C.tern_status { return C.tern_session_options_set_num_interop_threads(o.p, C.int(n)) })
}

// SetMaxMemoryBytes limits what the session allocates (0: no limit).
func (o *SessionOptions) SetMaxMemoryBytes(n uint64) error {
	return call(func() C.tern_status { return C.tern_session_options_set_max_memory_bytes(o.p, C.uint64_t(n)) })
}

// SetFlag overrides a session- or run-scoped flag for this session alone.
func (o *SessionOptions) SetFlag(name, value string) error {
	cn, cv := C.CString(name), C.CString(value)
	defer C.free(unsafe.Pointer(cn))
	defer C.free(unsafe.Pointer(cv))
	return call(func() C.tern_status { return C.tern_session_options_set_flag(o.p, cn, cv) })
}

// Session is a model compiled for its backends (tern_session). Run may be called from many
// goroutines at once; Close must not overlap a Run.
type Session struct {
	p *C.tern_session
}

// NewSession compiles the model; opts may be nil for the defaults.
func NewSession(m *Model, opts *SessionOptions) (*Session, error) {
	var o *C.tern_session_options
	if opts != nil {
		o = opts.p
	}
	var out *C.tern_session
	if err := call(func() C.tern_status { return C.tern_session_create(m.p, o, &out) }); err != nil {
		return nil, err
	}
	runtime.KeepAlive(m)
	runtime.KeepAlive(opts)
	s := &Session{out}
	runtime.SetFinalizer(s, (*Session).Close)
	return s, nil
}

// Close releases the session; later calls do nothing.
func (s *Session) Close() {
	if s != nil && s.p != nil {
		C.tern_session_destroy(s.p)
		s.p = nil
		runtime.SetFinalizer(s, nil)
	}
}

// Run feeds the named inputs and returns the named outputs in the order asked; the caller
// closes them.
func (s *Session) Run(inputs map[string]*Tensor, outputs []string) ([]*Tensor, error) {
	n, m := len(inputs), len(outputs)
	// The arrays live in C memory: cgo forbids passing Go memory that holds Go pointers.
	ptrSize := C.size_t(unsafe.Sizeof(uintptr(0)))
	inNamesP := C.malloc(C.size_t(max1(n)) * ptrSize)
	inTensorsP := C.malloc(C.size_t(max1(n)) * ptrSize)
	outNamesP := C.malloc(C.size_t(max1(m)) * ptrSize)
	resultsP := C.calloc(C.size_t(max1(m)), ptrSize)
	inNames := unsafe.Slice((**C.char)(inNamesP), n)
	inTensors := unsafe.Slice((**C.tern_tensor)(inTensorsP), n)
	outNames := unsafe.Slice((**C.char)(outNamesP), m)
	results := unsafe.Slice((**C.tern_tensor)(resultsP), m)
	defer func() {
		for _, p := range inNames {
			C.free(unsafe.Pointer(p))
		}
		for _, p := range outNames {
			C.free(unsafe.Pointer(p))
		}
		C.free(inNamesP)
		C.free(inTensorsP)
		C.free(outNamesP)
		C.free(resultsP)
	}()
	i := 0
	for name, t := range inputs {
		inNames[i] = C.CString(name)
		inTensors[i] = nil
		if t != nil {
			inTensors[i] = t.p
		}
		i++
	}
	for j, name := range outputs {
		outNames[j] = C.CString(name)
	}
	err := call(func() C.tern_status {
		return C.tern_session_run(s.p, nil, (**C.char)(inNamesP), (**C.tern_tensor)(inTensorsP),
			C.size_t(n), (**C.char)(outNamesP), C.size_t(m), (**C.tern_tensor)(resultsP))
	})
	runtime.KeepAlive(inputs)
	runtime.KeepAlive(s)
	if err != nil {
		return nil, err
	}
	out := make([]*Tensor, m)
	for j := range outputs {
		out[j] = wrapTensor(results[j])
	}
	return out, nil
}

func max1(n int) int {
	if n < 1 {
		return 1
	}
	return n
}

// Flag is the value a run of this session would use for flag name, and where it came from.
func (s *Session) Flag(name string) (value, source string, err error) {
	cn := C.CString(name)
	defer C.free(unsafe.Pointer(cn))
	var src *C.char
	value, err = readText(func(buf *C.char, n C.size_t) C.tern_status {
		return C.tern_session_flag_get(s.p, cn, buf, n, &src)
	})
	if err != nil {
		return "", "", err
	}
	return value, C.GoString(src), nil
}
