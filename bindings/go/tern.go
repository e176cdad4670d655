// Package tern is the Go binding of Tern, an embeddable neural-network inference engine.
//
//	model, err := tern.LoadModel("model.tern")
//	session, err := tern.NewSession(model, nil)
//	x, err := tern.NewTensorFloat32([]int64{1, 4}, []float32{0, 1, 2, 3})
//	outs, err := session.Run(map[string]*tern.Tensor{"x": x}, []string{"y"})
//	probs, err := outs[0].Float32s()
//
// Models, sessions, options and tensors hold C handles: Close releases them (a finalizer does
// it for values that are never closed, but Close as soon as you are done). Models are immutable
// and sessions may run from many goroutines at once; tensors and options are not synchronised.
// Failures are *Error values carrying Tern's status and message.
//
// The library is opened at run time (dlopen): $TERN_LIB_DIR/libtern.so.1 when TERN_LIB_DIR is
// set, else libtern.so.1 from the system's library path or the installed package's libdir
// (pkg-config tern). Its ABI version must be the one this package was written for. The package
// compiles against the repository's include/c_api.h; CGO_CFLAGS=-I$TERN_INCLUDE_DIR selects
// another copy.
package tern

/*
#cgo CFLAGS: -I${SRCDIR}/../../include
#cgo LDFLAGS: -ldl
#include <stdlib.h>
#include "c_api.h"
const char* tern_go_load(const char* path);
*/
import "C"

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"unsafe"
)

// ABIVersion is the TERN_ABI_VERSION this package was written for.
const ABIVersion = 1

// HeaderABIVersion is TERN_ABI_VERSION of the c_api.h the package was compiled against.
const HeaderABIVersion = int(C.TERN_ABI_VERSION)

// Status is a tern_status code other than TERN_OK.
type Status int

const (
	StatusInvalidArgument    Status = 1
	StatusInvalidModel       Status = 2
	StatusUnsupported        Status = 3
	StatusBackendUnavailable Status = 4
	StatusOutOfMemory        Status = 5
	StatusIO                 Status = 6
	StatusInternal           Status = 7
	StatusCancelled          Status = 8 // the run's RunOptions were cancelled (or its context)
	StatusDeadlineExceeded   Status = 9 // the run passed its deadline
)

// String is the C name: "TERN_ERR_IO", ...
func (s Status) String() string {
	if load() != nil {
		return fmt.Sprintf("tern status %d", int(s))
	}
	return C.GoString(C.tern_status_name(C.tern_status(s)))
}

// Error is a failed call: Tern's status and message.
type Error struct {
	Status  Status
	Message string
}

func (e *Error) Error() string { return e.Status.String() + ": " + e.Message }

// Is makes errors.Is(err, context.Canceled) and errors.Is(err, context.DeadlineExceeded) hold
// for runs stopped by a cancel or a deadline (RunContext, RunOptions).
func (e *Error) Is(target error) bool {
	switch e.Status {
	case StatusCancelled:
		return target == context.Canceled
	case StatusDeadlineExceeded:
		return target == context.DeadlineExceeded
	}
	return false
}

var (
	loadOnce sync.Once
	loadErr  error
	LibPath  string // the library file that was opened
)

func libCandidates() []string {
	if dir := os.Getenv("TERN_LIB_DIR"); dir != "" {
		return []string{filepath.Join(dir, "libtern.so.1"), filepath.Join(dir, "libtern.so")}
	}
	c := []string{"libtern.so.1"}
	if out, err := exec.Command("pkg-config", "--variable=libdir", "tern").Output(); err == nil {
		if dir := strings.TrimSpace(string(out)); dir != "" {
			c = append(c, filepath.Join(dir, "libtern.so.1"))
		}
	}
	return c
}

// load opens libtern once; every entry point calls it.
func load() error {
	loadOnce.Do(func() {
		var why []string
		for _, path := range libCandidates() {
			cpath := C.CString(path)
			msg := C.tern_go_load(cpath)
			C.free(unsafe.Pointer(cpath))
			if msg == nil {
				LibPath = path
				if v := int(C.tern_abi_version()); v != ABIVersion {
					loadErr = &Error{StatusUnsupported, fmt.Sprintf(
						"%s has ABI version %d, this package was written for %d", path, v, ABIVersion)}
				}
				return
			}
			why = append(why, C.GoString(msg))
		}
		loadErr = &Error{StatusIO, "cannot open libtern (set TERN_LIB_DIR to the folder holding " +
			"libtern.so, or install Tern): " + strings.Join(why, "; ")}
	})
	return loadErr
}

// call runs a C call returning tern_status and reads tern_last_error on the same OS thread
// (Go may move a goroutine between threads between two cgo calls).
func call(f func() C.tern_status) error {
	if err := load(); err != nil {
		return err
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if st := f(); st != C.TERN_OK {
		return &Error{Status(st), C.GoString(C.tern_last_error())}
	}
	return nil
}

// Load opens the library now (it is opened on first use otherwise) and reports why it cannot be.
func Load() error { return load() }

// Version is the library version, "MAJOR.MINOR.PATCH".
func Version() string {
	if load() != nil {
		return ""
	}
	return C.GoString(C.tern_version())
}

// LibraryABIVersion is tern_abi_version() of the loaded library.
func LibraryABIVersion() int {
	if load() != nil {
		return 0
	}
	return int(C.tern_abi_version())
}

// ConfigShow is the build configuration as text (like torch.__config__.show()).
func ConfigShow() string {
	if load() != nil {
		return ""
	}
	return C.GoString(C.tern_config_show())
}

// SetNumThreads sets the process-wide intra-op threads (1..4096).
func SetNumThreads(n int) error {
	return call(func() C.tern_status { return C.tern_set_num_threads(C.int(n)) })
}

// NumThreads is the process-wide intra-op thread count.
func NumThreads() int {
	if load() != nil {
		return 0
	}
	return int(C.tern_get_num_threads())
}

// SetNumInteropThreads sets the process-wide inter-op threads (1..4096).
func SetNumInteropThreads(n int) error {
	return call(func() C.tern_status { return C.tern_set_num_interop_threads(C.int(n)) })
}

// NumInteropThreads is the process-wide inter-op thread count.
func NumInteropThreads() int {
	if load() != nil {
		return 0
	}
	return int(C.tern_get_num_interop_threads())
}

func cbool(v bool) C.int {
	if v {
		return 1
	}
	return 0
}
