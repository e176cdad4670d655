package tern

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
	"unsafe"
)

// sharedModel is ../shared/models/NAME/model.onnx, or skips the test.
func sharedModel(t *testing.T, name string) string {
	root := os.Getenv("TERN_SHARED_DIR")
	if root == "" {
		root = filepath.Join("..", "..", "..", "shared")
	}
	p, _ := filepath.Abs(filepath.Join(root, "models", name, "model.onnx"))
	if _, err := os.Stat(p); err != nil {
		t.Skipf("skipped: %s is absent", p)
	}
	return p
}

// ternCLI is the `tern` CLI of the same build: TERN_CLI, beside libtern.so, in ../bin, or PATH.
func ternCLI() string {
	if p := os.Getenv("TERN_CLI"); p != "" {
		return p
	}
	if dir := filepath.Dir(LibPath); dir != "." {
		for _, c := range []string{filepath.Join(dir, "tern"), filepath.Join(dir, "..", "bin", "tern")} {
			if st, err := os.Stat(c); err == nil && !st.IsDir() {
				return c
			}
		}
	}
	return "tern"
}

func pattern(n int) []float32 {
	out := make([]float32, n)
	for i := range out {
		out[i] = float32(i*7%23)/23.0 - 0.5
	}
	return out
}

func writeNpy(path string, shape []int64, data []float32) error {
	dims := make([]string, len(shape))
	for i, d := range shape {
		dims[i] = fmt.Sprint(d)
	}
	tuple := strings.Join(dims, ", ")
	if len(dims) == 1 {
		tuple += ","
	}
	header := fmt.Sprintf("{'descr': '<f4', 'fortran_order': False, 'shape': (%s), }", tuple)
	for (10+len(header)+1)%64 != 0 {
		header += " "
	}
	header += "\n"
	var b bytes.Buffer
	b.WriteString("\x93NUMPY\x01\x00")
	binary.Write(&b, binary.LittleEndian, uint16(len(header)))
	b.WriteString(header)
	binary.Write(&b, binary.LittleEndian, data)
	return os.WriteFile(path, b.Bytes(), 0o644)
}

func readNpyData(path string) ([]byte, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	if len(b) < 10 || string(b[:6]) != "\x93NUMPY" {
		return nil, fmt.Errorf("%s is not .npy", path)
	}
	n := int(binary.LittleEndian.Uint16(b[8:10]))
	return b[10+n:], nil
}

// cliOutput runs `tern run` (the C API through the CLI) and returns the output's bytes.
func cliOutput(t *testing.T, model, input string, shape []int64, data []float32, output string, threads int) []byte {
	dir := t.TempDir()
	in := filepath.Join(dir, "input.npy")
	if err := writeNpy(in, shape, data); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(ternCLI(), "run", model, "--input", input+"="+in, "--threads", fmt.Sprint(threads),
		"--runs", "1", "--output-dir", filepath.Join(dir, "out"))
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%s: %v\n%s", cmd, err, out)
	}
	b, err := readNpyData(filepath.Join(dir, "out", output+".npy"))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestVersionAndABI(t *testing.T) {
	if err := Load(); err != nil {
		t.Fatal(err)
	}
	if LibraryABIVersion() != ABIVersion || HeaderABIVersion != ABIVersion {
		t.Fatalf("ABI: library %d, header %d, package %d", LibraryABIVersion(), HeaderABIVersion, ABIVersion)
	}
	if parts := strings.Split(Version(), "."); len(parts) != 3 {
		t.Fatalf("version %q", Version())
	}
	t.Logf("libtern %s from %s", Version(), LibPath)
}

func TestPPOCRClassifierMatchesCAPIBitwise(t *testing.T) {
	path := sharedModel(t, "ppocr_cls")
	model, err := LoadModel(path)
	if err != nil {
		t.Fatal(err)
	}
	defer model.Close()
	ins, _ := model.Inputs()
	outs, _ := model.Outputs()
	if len(ins) != 1 || ins[0].DType != Float32 || len(ins[0].Shape) != 4 || len(outs) != 1 {
		t.Fatalf("inputs %v outputs %v", ins, outs)
	}
	shape := []int64{1, 3, 48, 192}
	data := pattern(3 * 48 * 192)
	x, err := NewTensorFloat32(shape, data)
	if err != nil {
		t.Fatal(err)
	}
	defer x.Close()
	for _, threads := range []int{1, 2} {
		opts, _ := NewSessionOptions()
		if err := opts.SetNumThreads(threads); err != nil {
			t.Fatal(err)
		}
		session, err := NewSession(model, opts)
		opts.Close()
		if err != nil {
			t.Fatal(err)
		}
		res, err := session.Run(map[string]*Tensor{ins[0].Name: x}, []string{outs[0].Name})
		if err != nil {
			t.Fatal(err)
		}
		probs, _ := res[0].Float32s()
		if fmt.Sprint(res[0].Shape()) != "[1 2]" || math.Abs(float64(probs[0]+probs[1]-1)) > 1e-5 {
			t.Fatalf("output %v %v", res[0].Shape(), probs)
		}
		want := cliOutput(t, path, ins[0].Name, shape, data, outs[0].Name, threads)
		if !bytes.Equal(res[0].Bytes(), want) {
			t.Fatalf("threads %d: binding %v differs from the C API", threads, probs)
		}
		t.Logf("ppocr_cls threads=%d: %v, bitwise equal to `tern run`", threads, probs)
		res[0].Close()
		session.Close()
	}
}

func TestOneSessionFromManyGoroutines(t *testing.T) {
	path := sharedModel(t, "ppocr_cls")
	model, err := LoadModel(path)
	if err != nil {
		t.Fatal(err)
	}
	session, err := NewSession(model, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer session.Close()
	model.Close() // the session keeps what it needs
	data := pattern(3 * 48 * 192)
	runOnce := func() ([]byte, error) {
		x, err := NewTensorFloat32([]int64{1, 3, 48, 192}, data)
		if err != nil {
			return nil, err
		}
		defer x.Close()
		res, err := session.Run(map[string]*Tensor{"x": x}, []string{"softmax_0.tmp_0"})
		if err != nil {
			return nil, err
		}
		defer res[0].Close()
		return res[0].Bytes(), nil
	}
	want, err := runOnce()
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 10; i++ {
				got, err := runOnce()
				if err == nil && !bytes.Equal(got, want) {
					err = errors.New("a concurrent run differs")
				}
				if err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}

func TestQueriesAndFlags(t *testing.T) {
	caps := map[string]bool{"DEFAULT": true, "NO AVX": true, "AVX2": true, "AVX512": true, "VSX": true,
		"Z VECTOR": true, "SVE256": true}
	if c := CPUCapability(); !caps[c] {
		t.Fatalf("capability %q", c)
	} else {
		t.Logf("cpu capability: %s", c)
	}
	before := CudnnBenchmark()
	SetCudnnBenchmark(!before)
	if CudnnBenchmark() == before {
		t.Fatal("cudnn.benchmark did not change")
	}
	if v, err := GetFlag("cudnn.benchmark"); err != nil || v != fmt.Sprint(!before) {
		t.Fatalf("generic view %q %v", v, err)
	}
	if err := SetFlag("cudnn.benchmark", fmt.Sprint(before)); err != nil || CudnnBenchmark() != before {
		t.Fatalf("restore: %v", err)
	}
	err := SetFlag("opt_einsum.strategy", "fastest")
	var terr *Error
	if !errors.As(err, &terr) || terr.Status != StatusInvalidArgument || !strings.Contains(terr.Message, "fastest") {
		t.Fatalf("bad value: %v", err)
	}
	if _, err := GetFlag("no.such.flag"); !errors.As(err, &terr) || terr.Status != StatusInvalidArgument {
		t.Fatalf("unknown flag: %v", err)
	}
	flags, err := Flags()
	found := false
	for _, f := range flags {
		found = found || (f.Name == "cuda.matmul.allow_tf32" && f.Kind == "bool")
	}
	if err != nil || !found {
		t.Fatalf("flags: %v %v", err, flags)
	}
	if NumThreads() < 1 || SetNumThreads(0) == nil {
		t.Fatal("threads")
	}
}

func TestErrorsCarryStatusAndMessage(t *testing.T) {
	_, err := LoadModel("/nonexistent/dir/model.onnx")
	var terr *Error
	if !errors.As(err, &terr) || terr.Status != StatusIO || !strings.Contains(terr.Message, "/nonexistent/dir/model.onnx") {
		t.Fatalf("bad path: %v", err)
	}
	if !strings.HasPrefix(err.Error(), "TERN_ERR_IO: ") {
		t.Fatalf("Error(): %q", err.Error())
	}
	if _, err := LoadModelBytes([]byte("definitely not a model")); !errors.As(err, &terr) ||
		(terr.Status != StatusInvalidModel && terr.Status != StatusUnsupported) {
		t.Fatalf("bad bytes: %v", err)
	}
	if _, err := NewTensor(Float32, []int64{2, -1}); !errors.As(err, &terr) || !strings.Contains(terr.Message, "negative") {
		t.Fatalf("negative dim: %v", err)
	}
	if _, err := NewTensorFloat32([]int64{4}, []float32{1, 2}); err == nil {
		t.Fatal("short data accepted")
	}
	path := sharedModel(t, "ppocr_cls")
	model, err := LoadModel(path)
	if err != nil {
		t.Fatal(err)
	}
	defer model.Close()
	session, err := NewSession(model, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer session.Close()
	x, _ := NewTensor(Int64, []int64{1, 3, 48, 192})
	defer x.Close()
	if _, err := session.Run(map[string]*Tensor{"x": x}, []string{"softmax_0.tmp_0"}); !errors.As(err, &terr) ||
		terr.Status != StatusInvalidArgument || !strings.Contains(terr.Message, "float32") {
		t.Fatalf("wrong dtype: %v", err)
	}
	if _, err := session.Run(map[string]*Tensor{"nope": x}, []string{"softmax_0.tmp_0"}); !errors.As(err, &terr) ||
		!strings.Contains(terr.Message, "'nope'") {
		t.Fatalf("wrong name: %v", err)
	}
	// Save as .tern, load from bytes: same outputs.
	file := filepath.Join(t.TempDir(), "cls.tern")
	if err := model.Save(file); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(file)
	again, err := LoadModelBytes(b)
	if err != nil {
		t.Fatal(err)
	}
	defer again.Close()
	s2, _ := NewSession(again, nil)
	defer s2.Close()
	y, _ := NewTensorFloat32([]int64{1, 3, 48, 192}, pattern(3*48*192))
	defer y.Close()
	r1, err1 := session.Run(map[string]*Tensor{"x": y}, []string{"softmax_0.tmp_0"})
	r2, err2 := s2.Run(map[string]*Tensor{"x": y}, []string{"softmax_0.tmp_0"})
	if err1 != nil || err2 != nil || !bytes.Equal(r1[0].Bytes(), r2[0].Bytes()) {
		t.Fatalf("round trip: %v %v", err1, err2)
	}
}

// sequencesModel is the repository's model with sequence and optional inputs and outputs
// (tests/fuzz/make_seeds.py).
func sequencesModel(t *testing.T) string {
	p, _ := filepath.Abs(filepath.Join("..", "..", "tests", "fuzz", "corpus", "tern_loader",
		"sequences.tern"))
	if _, err := os.Stat(p); err != nil {
		t.Fatalf("%s is missing", p)
	}
	return p
}

func TestSequencesAndOptionals(t *testing.T) {
	m, err := LoadModel(sequencesModel(t))
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	s, err := NewSession(m, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	vec := func(a, b float32) *Tensor {
		x, err := NewTensorFromBytes(Float32, []int64{2},
			unsafe.Slice((*byte)(unsafe.Pointer(&[2]float32{a, b})), 8))
		if err != nil {
			t.Fatal(err)
		}
		return x
	}
	seq, err := NewSequence(Float32, []*Tensor{vec(1, 2), vec(3, 4)})
	if err != nil {
		t.Fatal(err)
	}
	x, _ := NewTensorFromBytes(Float32, []int64{3, 2}, make([]byte, 24))
	xv, _ := NewTensorValue(x)
	ev, _ := NewTensorValue(vec(5, 6))
	outs, err := s.RunValues(map[string]*Value{"seq": seq, "x": xv, "extra": ev},
		[]string{"joined", "longer", "wrapped"})
	if err != nil {
		t.Fatal(err)
	}
	joined, err := outs[0].Tensor()
	if err != nil {
		t.Fatal(err)
	}
	if f, _ := joined.Float32s(); len(f) != 4 || f[0] != 1 || f[3] != 4 {
		t.Fatalf("joined = %v, want [1 2 3 4]", f)
	}
	if k, _ := outs[1].Kind(); k != SequenceValue || outs[1].Len() != 3 {
		t.Fatalf("longer: kind %v, length %d; want a sequence of 3", k, outs[1].Len())
	}
	last, _ := outs[1].At(2)
	if f, _ := last.Float32s(); f[0] != 5 || f[1] != 6 {
		t.Fatalf("longer[2] = %v, want [5 6]", f)
	}
	if !outs[2].HasValue() {
		t.Fatal("wrapped holds nothing")
	}
	inner, err := outs[2].Get()
	if err != nil || inner.Len() != 2 {
		t.Fatalf("wrapped holds %v (%v), want the sequence of 2", inner, err)
	}
	// Refusals carry the status and Tern's message.
	if _, err := outs[0].At(0); err == nil || err.(*Error).Status != StatusInvalidArgument {
		t.Fatalf("At on a tensor value: %v, want INVALID_ARGUMENT", err)
	}
	empty, _ := NewOptional(nil)
	if _, err := empty.Get(); err == nil || !strings.Contains(err.Error(), "holds nothing") {
		t.Fatalf("Get of an empty optional: %v", err)
	}
	if _, err := s.Run(map[string]*Tensor{"x": x}, []string{"joined"}); err == nil {
		t.Fatal("Run without the sequence input succeeded")
	}
}

func TestCancelAndDeadline(t *testing.T) {
	path := sharedModel(t, "ppocr_det")
	model, err := LoadModel(path)
	if err != nil {
		t.Fatal(err)
	}
	defer model.Close()
	opts, _ := NewSessionOptions()
	opts.SetNumThreads(1)
	session, err := NewSession(model, opts)
	opts.Close()
	if err != nil {
		t.Fatal(err)
	}
	defer session.Close()
	x, _ := NewTensorFloat32([]int64{1, 3, 640, 640}, pattern(3*640*640))
	defer x.Close()
	in := map[string]*Tensor{"x": x}
	out := []string{"sigmoid_0.tmp_0"}
	t0 := time.Now()
	first, err := session.Run(in, out)
	if err != nil {
		t.Fatal(err)
	}
	defer first[0].Close()
	whole := time.Since(t0)

	// Cancelled before the run: at once, and sticky until ClearCancel.
	r, _ := NewRunOptions()
	defer r.Close()
	if err := r.Cancel(); err != nil {
		t.Fatal(err)
	}
	var terr *Error
	if _, err := session.RunWithOptions(r, in, out); !errors.As(err, &terr) || terr.Status != StatusCancelled ||
		!errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled options: %v", err)
	}
	r.ClearCancel()
	// A warm run's time, the fastest of three (the first run also planned).
	whole = time.Duration(math.MaxInt64)
	for i := 0; i < 3; i++ {
		t0 = time.Now()
		res, err := session.RunWithOptions(r, in, out)
		if err != nil {
			t.Fatal(err)
		}
		res[0].Close()
		if d := time.Since(t0); d < whole {
			whole = d
		}
	}
	if err := r.SetDeadline(-time.Second); err == nil {
		t.Fatal("a negative deadline was accepted")
	}

	// A context cancelled during the run, and a context deadline far shorter than the run. On a
	// loaded machine the cancelling goroutine can wake after the run has ended; the run then
	// succeeds and the test tries again, cancelling earlier.
	wait := whole / 4
	tries := 0
	var latency time.Duration
	for {
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan time.Time, 1)
		go func() {
			time.Sleep(wait)
			at := time.Now()
			cancel()
			done <- at
		}()
		res, err := session.RunContext(ctx, in, out)
		returned := time.Now()
		cancelledAt := <-done
		if err == nil {
			res[0].Close()
			tries++
			if tries == 8 {
				t.Fatalf("%d runs ended before a cancel sent %v into them", tries, wait)
			}
			wait /= 2
			continue
		}
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("cancelled context: %v", err)
		}
		latency = returned.Sub(cancelledAt)
		break
	}
	tctx, tcancel := context.WithTimeout(context.Background(), whole/10)
	defer tcancel()
	t1 := time.Now()
	_, err = session.RunContext(tctx, in, out)
	took := time.Since(t1)
	if !errors.Is(err, context.DeadlineExceeded) || took > whole/10+time.Second {
		t.Fatalf("deadline %v: %v after %v", whole/10, err, took)
	}
	t.Logf("ppocr_det run %v; cancel to return %v (%d earlier runs ended first); a %v deadline returned after %v",
		whole, latency, tries, whole/10, took)

	// The session computes the same as before.
	again, err := session.Run(in, out)
	if err != nil {
		t.Fatal(err)
	}
	defer again[0].Close()
	if !bytes.Equal(first[0].Bytes(), again[0].Bytes()) {
		t.Fatal("outputs changed after stopped runs")
	}
}

// The layout of DLPack 1.x's DLManagedTensorVersioned on 64-bit platforms (test files cannot use
// cgo): read to check what ToDLPack exports.
type dlManaged struct {
	Major, Minor   uint32
	ManagerCtx     unsafe.Pointer
	Deleter        unsafe.Pointer
	Flags          uint64
	Data           unsafe.Pointer
	DeviceType     int32
	DeviceID       int32
	Ndim           int32
	Code, Bits     uint8
	Lanes          uint16
	Shape, Strides *int64
	ByteOffset     uint64
}

func TestDLPackRoundTripSharesMemory(t *testing.T) {
	data := []float32{-1, 0.5, 2, 3.25, 4, 5}
	x, err := NewTensorFloat32([]int64{2, 3}, data)
	if err != nil {
		t.Fatal(err)
	}
	p, err := x.ToDLPack()
	if err != nil {
		t.Fatal(err)
	}
	m := (*dlManaged)(p)
	if m.Major != 1 || m.DeviceType != 1 || m.Ndim != 2 || m.Code != 2 || m.Bits != 32 || m.Lanes != 1 || m.Flags != 0 {
		t.Fatalf("exported %+v", *m)
	}
	shape := unsafe.Slice(m.Shape, 2)
	strides := unsafe.Slice(m.Strides, 2)
	if shape[0] != 2 || shape[1] != 3 || strides[0] != 3 || strides[1] != 1 {
		t.Fatalf("shape %v strides %v", shape, strides)
	}
	x.Close() // the export keeps the memory alive
	if got := unsafe.Slice((*float32)(m.Data), 6); got[3] != 3.25 {
		t.Fatalf("exported data %v", got)
	}
	back, err := NewTensorFromDLPack(p)
	if err != nil {
		t.Fatal(err)
	}
	defer back.Close()
	got, _ := back.Float32s()
	if fmt.Sprint(got) != fmt.Sprint(data) || back.IsReadOnly() {
		t.Fatalf("round trip gave %v (read-only %v)", got, back.IsReadOnly())
	}

	// A transposed view is refused and stays the caller's; a NULL struct is an invalid argument.
	y, _ := NewTensorFloat32([]int64{2, 3}, data)
	defer y.Close()
	q, err := y.ToDLPack()
	if err != nil {
		t.Fatal(err)
	}
	st := unsafe.Slice((*dlManaged)(q).Strides, 2)
	st[0], st[1] = 1, 2
	var terr *Error
	if _, err := NewTensorFromDLPack(q); !errors.As(err, &terr) || terr.Status != StatusUnsupported ||
		!strings.Contains(terr.Message, "contiguous") {
		t.Fatalf("transposed: %v", err)
	}
	DeleteDLPack(q)
	if _, err := NewTensorFromDLPack(nil); !errors.As(err, &terr) || terr.Status != StatusInvalidArgument {
		t.Fatalf("NULL: %v", err)
	}
}
