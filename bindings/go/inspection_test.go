package tern

// Model inspection against the models' own sources (tests/fuzz/make_seeds.py, ONNX's
// test_matmul_2d), session plans and memory, TensorProto files, the torch.backends availability
// queries, blas.verbose and the sdp reduction switch.

import (
	"errors"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// onnxNodeTest is ../shared/conformance/onnx-node/NAME, or skips the test.
func onnxNodeTest(t *testing.T, name string) string {
	root := os.Getenv("TERN_SHARED_DIR")
	if root == "" {
		root = filepath.Join("..", "..", "..", "shared")
	}
	p, _ := filepath.Abs(filepath.Join(root, "conformance", "onnx-node", name))
	if _, err := os.Stat(p); err != nil {
		t.Skipf("skipped: %s is absent", p)
	}
	return p
}

// hasStatus: err is a Tern error with status st.
func hasStatus(err error, st Status) bool {
	var terr *Error
	return errors.As(err, &terr) && terr.Status == st
}

func TestInspectsTheSequencesModelAsMakeSeedsWroteIt(t *testing.T) {
	m, err := LoadModel(sequencesModel(t))
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	nodes, err := m.Nodes()
	if err != nil {
		t.Fatal(err)
	}
	// tests/fuzz/make_seeds.py: sequences() builds these five nodes in this order, opset 18.
	want := []Node{
		{"", "SplitToSequence", "", []string{"x"}, []string{"parts"}},
		{"", "ConcatFromSequence", "", []string{"seq"}, []string{"joined"}},
		{"", "SequenceInsert", "", []string{"seq", "extra"}, []string{"longer"}},
		{"", "Identity", "", []string{"seq"}, []string{"same"}},
		{"", "Optional", "", []string{"seq"}, []string{"wrapped"}},
	}
	for i := range nodes {
		nodes[i].Name = "" // the converter may name unnamed nodes
	}
	if !reflect.DeepEqual(nodes, want) {
		t.Fatalf("nodes %+v, want %+v", nodes, want)
	}
	if m.Opset() != 18 {
		t.Fatalf("opset %d", m.Opset())
	}
	values, err := m.Values()
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string]GraphValue{}
	for _, v := range values {
		byName[v.Name] = v
	}
	if x := byName["x"]; x.DType != Float32 || !reflect.DeepEqual(x.Shape, []int64{3, 2}) || x.Constant {
		t.Fatalf("x: %+v", x)
	}
	if s := byName["seq"]; s.DType != 0 {
		t.Fatalf("a sequence has dtype 0: %+v", s)
	}
	for _, n := range want {
		for _, name := range append(append([]string{}, n.Inputs...), n.Outputs...) {
			if _, ok := byName[name]; !ok {
				t.Fatalf("%s is not among the values %+v", name, values)
			}
		}
	}
	if opt, err := m.OptionalInputs(); err != nil || len(opt) != 0 {
		t.Fatalf("optional inputs %+v %v", opt, err)
	}
}

func TestTensorProtoFilesAndONNXTestData(t *testing.T) {
	if _, err := ReadONNXFile("/nonexistent/input_0.pb"); !hasStatus(err, StatusIO) {
		t.Fatalf("missing file: %v", err)
	}
	dir := onnxNodeTest(t, "test_matmul_2d")
	m, err := LoadModel(filepath.Join(dir, "model.onnx"))
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	// ONNX's backend test: one MatMul c = a b, opset 13, producer "backend-test".
	nodes, err := m.Nodes()
	if err != nil || len(nodes) != 1 || nodes[0].OpType != "MatMul" ||
		!reflect.DeepEqual(nodes[0].Inputs, []string{"a", "b"}) || !reflect.DeepEqual(nodes[0].Outputs, []string{"c"}) {
		t.Fatalf("nodes %+v %v", nodes, err)
	}
	if m.Opset() != 13 || m.Producer() != "backend-test" {
		t.Fatalf("opset %d producer %q", m.Opset(), m.Producer())
	}
	read := func(name string) *Tensor {
		x, err := ReadONNXFile(filepath.Join(dir, "test_data_set_0", name))
		if err != nil {
			t.Fatal(err)
		}
		return x
	}
	a, b, want := read("input_0.pb"), read("input_1.pb"), read("output_0.pb")
	defer a.Close()
	defer b.Close()
	defer want.Close()
	mm, k, n := int(a.Shape()[0]), int(a.Shape()[1]), int(b.Shape()[1])
	av, _ := a.Float32s()
	bv, _ := b.Float32s()
	wv, _ := want.Float32s()
	// The files hold what ONNX wrote: the expected output is a b, computed here in double.
	for i := 0; i < mm; i++ {
		for j := 0; j < n; j++ {
			dot := 0.0
			for p := 0; p < k; p++ {
				dot += float64(av[i*k+p]) * float64(bv[p*n+j])
			}
			if math.Abs(dot-float64(wv[i*n+j])) > 1e-5+1e-5*math.Abs(dot) {
				t.Fatalf("c[%d][%d] = %v, a b gives %v", i, j, wv[i*n+j], dot)
			}
		}
	}
	s, err := NewSession(m, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	out, err := s.Run(map[string]*Tensor{"a": a, "b": b}, []string{"c"})
	if err != nil {
		t.Fatal(err)
	}
	got, _ := out[0].Float32s()
	for i := range got {
		if math.Abs(float64(got[i]-wv[i])) > 1e-5+1e-4*math.Abs(float64(wv[i])) {
			t.Fatalf("element %d: %v vs %v", i, got[i], wv[i])
		}
	}
	dtype, shape, err := s.ValueShape("c")
	if err != nil || dtype != Float32 || !reflect.DeepEqual(shape, []int64{int64(mm), int64(n)}) {
		t.Fatalf("value shape %v %v %v", dtype, shape, err)
	}
	if _, _, err := s.ValueShape("nope"); !hasStatus(err, StatusInvalidArgument) {
		t.Fatalf("unknown value: %v", err)
	}
	if v, err := s.MemoryStat("plans"); err != nil || v < 1 {
		t.Fatalf("plans %d %v", v, err)
	}
	if _, err := s.MemoryStat("no_such_stat"); !hasStatus(err, StatusInvalidArgument) {
		t.Fatalf("unknown stat: %v", err)
	}
}

func TestTorchBackendsAvailabilityAndReasons(t *testing.T) {
	reason := func(name string) string {
		why, err := UnavailableReason(name)
		if err != nil {
			t.Fatal(err)
		}
		return why
	}
	if MKLIsAvailable() || !strings.Contains(reason("mkl"), "MKL") {
		t.Fatalf("mkl: %q", reason("mkl"))
	}
	if NNPACKIsAvailable() || !strings.Contains(reason("nnpack"), "NNPACK") {
		t.Fatalf("nnpack: %q", reason("nnpack"))
	}
	if CuSPARSELtIsAvailable() || !strings.Contains(reason("cusparselt"), "cuSPARSELt") {
		t.Fatalf("cusparselt: %q", reason("cusparselt"))
	}
	if !OptEinsumIsAvailable() || reason("opt_einsum") != "" || !FlashAttentionIsAvailable() {
		t.Fatal("opt_einsum and the CPU's FLASH kernel are in every build")
	}
	// The typed queries and the reasons agree.
	for name, available := range map[string]bool{"mkldnn": OneDNNIsAvailable(),
		"openblas": OpenBLASIsAvailable(), "cuda": CUDAIsAvailable(), "mps": MPSIsAvailable()} {
		if available != (reason(name) == "") {
			t.Fatalf("%s: available %v, reason %q", name, available, reason(name))
		}
	}
	if _, err := UnavailableReason("no_such_library"); !hasStatus(err, StatusInvalidArgument) {
		t.Fatalf("unknown name: %v", err)
	}
	if !strings.Contains(ConfigShow(), "nnpack: unavailable") {
		t.Fatal(ConfigShow())
	}
	// The typed switches and the registry see one value.
	reduce := SdpFp16Bf16ReductionMathAllowed()
	SetSdpAllowFp16Bf16ReductionMath(!reduce)
	if v, _ := GetFlag("sdp.allow_fp16_bf16_reduction_math"); v != map[bool]string{true: "true", false: "false"}[!reduce] {
		t.Fatalf("flag %q after setting %v", v, !reduce)
	}
	SetSdpAllowFp16Bf16ReductionMath(reduce)
	if err := SetBLASVerbose(VerboseOnCreation); !hasStatus(err, StatusInvalidArgument) {
		t.Fatalf("ON_CREATION: %v", err)
	}
	if err := SetBLASVerbose(VerboseOn); err != nil {
		t.Fatal(err)
	}
	if v, _ := GetFlag("blas.verbose"); v != "true" {
		t.Fatalf("blas.verbose %q", v)
	}
	if err := SetBLASVerbose(VerboseOff); err != nil {
		t.Fatal(err)
	}
}

// blas.verbose prints on the process's stdout: the check runs in a child process (this test
// binary again, this test only) and reads its output.
func TestBLASVerbosePrintsOnlyForTheRunThatAsks(t *testing.T) {
	dir := onnxNodeTest(t, "test_matmul_2d")
	if which := os.Getenv("TERN_GO_BLAS_VERBOSE_CHILD"); which != "" {
		m, err := LoadModel(filepath.Join(dir, "model.onnx"))
		if err != nil {
			t.Fatal(err)
		}
		s, err := NewSession(m, nil)
		if err != nil {
			t.Fatal(err)
		}
		r, err := NewRunOptions()
		if err != nil {
			t.Fatal(err)
		}
		if err := r.SetFlag("blas.verbose", which); err != nil {
			t.Fatal(err)
		}
		a, _ := NewTensorFloat32([]int64{3, 4}, pattern(12))
		b, _ := NewTensorFloat32([]int64{4, 3}, pattern(12))
		if _, err := s.RunWithOptions(r, map[string]*Tensor{"a": a, "b": b}, []string{"c"}); err != nil {
			t.Fatal(err)
		}
		return
	}
	child := func(value string) string {
		cmd := exec.Command(os.Args[0], "-test.run=^TestBLASVerbosePrintsOnlyForTheRunThatAsks$", "-test.count=1")
		cmd.Env = append(os.Environ(), "TERN_GO_BLAS_VERBOSE_CHILD="+value)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("%v: %s", err, out)
		}
		return string(out)
	}
	on := child("true")
	found := false
	for _, l := range strings.Split(on, "\n") {
		if strings.HasPrefix(l, "tern_blas_verbose,exec,MatMul,") && strings.Contains(l, ",m=3,n=3,k=4,") {
			found = true
		}
	}
	if !found {
		t.Fatalf("no MatMul line in %q", on)
	}
	if off := child("false"); strings.Contains(off, "tern_blas_verbose") {
		t.Fatalf("printed without the flag: %q", off)
	}
}
