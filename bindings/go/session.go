package tern

/*
#include <stdlib.h>
#include "c_api.h"
*/
import "C"

import (
	"context"
	"errors"
	"runtime"
	"time"
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

// RunOptions are per-run options (tern_run_options): a deadline, and a cancel that any
// goroutine may call while runs using them are in flight. Apart from Cancel and ClearCancel they
// are not synchronised.
type RunOptions struct {
	p *C.tern_run_options
}

// NewRunOptions are the defaults: no deadline, not cancelled.
func NewRunOptions() (*RunOptions, error) {
	var out *C.tern_run_options
	if err := call(func() C.tern_status { return C.tern_run_options_create(&out) }); err != nil {
		return nil, err
	}
	r := &RunOptions{out}
	runtime.SetFinalizer(r, (*RunOptions).Close)
	return r, nil
}

// Close releases the options; later calls do nothing. No run may be using them.
func (r *RunOptions) Close() {
	if r != nil && r.p != nil {
		C.tern_run_options_destroy(r.p)
		r.p = nil
		runtime.SetFinalizer(r, nil)
	}
}

// SetDeadline bounds each run given these options to d from its start (rounded up to whole
// milliseconds; 0: no deadline). A run past it fails with StatusDeadlineExceeded.
func (r *RunOptions) SetDeadline(d time.Duration) error {
	ms := int64((d + time.Millisecond - 1) / time.Millisecond)
	return call(func() C.tern_status { return C.tern_run_options_set_deadline_ms(r.p, C.int64_t(ms)) })
}

// Cancel stops the runs using these options (they fail with StatusCancelled within about one
// node's time) and every later run with them until ClearCancel. Safe from any goroutine.
func (r *RunOptions) Cancel() error {
	return call(func() C.tern_status { return C.tern_run_options_cancel(r.p) })
}

// ClearCancel lets runs started afterwards with these options go on.
func (r *RunOptions) ClearCancel() error {
	return call(func() C.tern_status { return C.tern_run_options_clear_cancel(r.p) })
}

// Run feeds the named inputs and returns the named outputs in the order asked; the caller
// closes them.
func (s *Session) Run(inputs map[string]*Tensor, outputs []string) ([]*Tensor, error) {
	return s.RunWithOptions(nil, inputs, outputs)
}

// RunContext is Run bounded by ctx: its deadline becomes the run's, and cancelling ctx stops the
// run within about one node's time. The error then satisfies errors.Is(err, context.Canceled) or
// errors.Is(err, context.DeadlineExceeded). The session stays usable.
func (s *Session) RunContext(ctx context.Context, inputs map[string]*Tensor, outputs []string) ([]*Tensor, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	r, err := NewRunOptions()
	if err != nil {
		return nil, err
	}
	defer r.Close()
	if d, ok := ctx.Deadline(); ok {
		left := time.Until(d)
		if left <= 0 {
			return nil, context.DeadlineExceeded
		}
		if err := r.SetDeadline(left); err != nil {
			return nil, err
		}
	}
	done := make(chan struct{})
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		select {
		case <-ctx.Done():
			r.Cancel()
		case <-done:
		}
	}()
	res, err := s.RunWithOptions(r, inputs, outputs)
	close(done)
	<-stopped // r must outlive the watcher's Cancel
	// A context deadline that fell before Tern's own (rounded) one cancels the run: report it as
	// the context does.
	var terr *Error
	if errors.As(err, &terr) && terr.Status == StatusCancelled && errors.Is(ctx.Err(), context.DeadlineExceeded) {
		terr.Status = StatusDeadlineExceeded
	}
	return res, err
}

// RunWithOptions is Run with run options (nil: the defaults).
func (s *Session) RunWithOptions(r *RunOptions, inputs map[string]*Tensor, outputs []string) ([]*Tensor, error) {
	var ro *C.tern_run_options
	if r != nil {
		ro = r.p
	}
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
		return C.tern_session_run(s.p, ro, (**C.char)(inNamesP), (**C.tern_tensor)(inTensorsP),
			C.size_t(n), (**C.char)(outNamesP), C.size_t(m), (**C.tern_tensor)(resultsP))
	})
	runtime.KeepAlive(inputs)
	runtime.KeepAlive(s)
	runtime.KeepAlive(r)
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

// ValueShape is the dtype and shape (every dim known) that the session's most recent plan gives
// the model's value name. An error before the first plan (dynamic input shapes, no run yet), or
// for a value the plan does not hold (optimized away, fused, or computed per run).
func (s *Session) ValueShape(name string) (DType, []int64, error) {
	var dtype C.tern_dtype
	var dims []int64
	err := withCString(name, func(cn *C.char) C.tern_status {
		var rank C.size_t
		var shape *C.int64_t
		st := C.tern_session_value_shape(s.p, cn, &dtype, &rank, &shape)
		if st == C.TERN_OK {
			// The shape lives until the next call on this OS thread (locked by call): copied here.
			dims = copyDims(shape, rank)
		}
		return st
	})
	if err != nil {
		return 0, nil, err
	}
	return DType(dtype), dims, nil
}

// MemoryStat is one figure of the session's memory and planning by name: "plans", "plan_bytes",
// "packed_weight_bytes", "arena_bytes", "full_plans", "template_plans".
func (s *Session) MemoryStat(name string) (uint64, error) {
	var v C.uint64_t
	err := withCString(name, func(cn *C.char) C.tern_status { return C.tern_session_memory_stat(s.p, cn, &v) })
	return uint64(v), err
}

// SetFlag overrides a run-scoped flag (the sdp.* flags, "onednn.verbose", "blas.verbose") for
// the runs given these options.
func (r *RunOptions) SetFlag(name, value string) error {
	cn, cv := C.CString(name), C.CString(value)
	defer C.free(unsafe.Pointer(cn))
	defer C.free(unsafe.Pointer(cv))
	return call(func() C.tern_status { return C.tern_run_options_set_flag(r.p, cn, cv) })
}
