// The Rust binding's coverage of the C API: every function of cmake/tern.symbols is declared in
// src/sys.rs; model inspection against the models' own sources (tests/fuzz/make_seeds.py, ONNX's
// test_matmul_2d); session plans and memory; device tensors and TensorProto files; the
// torch.backends availability queries, blas.verbose and the sdp reduction switch.
mod common;

use common::*;
use std::path::{Path, PathBuf};
use std::process::Command;
use tern::backends::{self, Verbose};
use tern::{DType, Model, RunOptions, Session, SessionOptions, Status, Tensor};

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

#[test]
fn every_exported_function_is_declared() {
    let symbols = std::fs::read_to_string(repo().join("cmake/tern.symbols")).unwrap();
    let sys = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("src/sys.rs")).unwrap();
    let names: Vec<&str> = symbols.lines().map(str::trim).filter(|l| !l.is_empty() && !l.starts_with('#')).collect();
    let missing: Vec<&&str> = names.iter().filter(|n| !sys.contains(&format!("fn {}(", n))).collect();
    assert!(missing.is_empty(), "src/sys.rs lacks {} of cmake/tern.symbols: {:?}", missing.len(), missing);
    eprintln!("{} functions of cmake/tern.symbols, all declared in src/sys.rs", names.len());
}

#[test]
fn inspects_the_sequences_model_as_make_seeds_wrote_it() {
    // tests/fuzz/make_seeds.py: sequences() builds these five nodes in this order, opset 18.
    let model = Model::load(repo().join("tests/fuzz/corpus/tern_loader/sequences.tern")).unwrap();
    let nodes = model.nodes().unwrap();
    let got: Vec<(&str, Vec<&str>, Vec<&str>)> = nodes
        .iter()
        .map(|n| {
            (n.op_type.as_str(), n.inputs.iter().map(String::as_str).collect(), n.outputs.iter().map(String::as_str).collect())
        })
        .collect();
    let want: Vec<(&str, Vec<&str>, Vec<&str>)> = vec![
        ("SplitToSequence", vec!["x"], vec!["parts"]),
        ("ConcatFromSequence", vec!["seq"], vec!["joined"]),
        ("SequenceInsert", vec!["seq", "extra"], vec!["longer"]),
        ("Identity", vec!["seq"], vec!["same"]),
        ("Optional", vec!["seq"], vec!["wrapped"]),
    ];
    assert_eq!(got, want);
    assert!(nodes.iter().all(|n| n.domain.is_empty()), "{:?}", nodes);
    assert_eq!(model.opset(), 18);
    let values = model.values().unwrap();
    let value = |name: &str| values.iter().find(|v| v.name == name).unwrap_or_else(|| panic!("no value {}", name));
    let x = value("x");
    assert_eq!((x.dtype, x.shape.clone(), x.constant), (DType::Float32, Some(vec![3, 2]), false));
    assert_eq!(value("extra").shape, Some(vec![2]));
    assert_eq!(value("seq").dtype, DType::Unknown(0), "sequences have dtype 0");
    for n in &nodes {
        for name in n.inputs.iter().chain(&n.outputs) {
            value(name);
        }
    }
    assert!(model.optional_inputs().unwrap().is_empty());
}

/// ../shared/conformance/onnx-node/NAME, or None (the test then skips).
fn onnx_node_test(name: &str) -> Option<PathBuf> {
    let root = std::env::var("TERN_SHARED_DIR").map(PathBuf::from).unwrap_or_else(|_| repo().join("../shared"));
    let dir = root.join("conformance/onnx-node").join(name);
    if dir.exists() {
        Some(dir)
    } else {
        eprintln!("skipped: {} is absent", dir.display());
        None
    }
}

#[test]
fn tensor_proto_files_and_onnx_test_data() {
    let err = Tensor::read_onnx_file("/nonexistent/input_0.pb").unwrap_err();
    assert_eq!(err.status, Status::Io);
    let dir = match onnx_node_test("test_matmul_2d") {
        Some(d) => d,
        None => return,
    };
    let model = Model::load(dir.join("model.onnx")).unwrap();
    // ONNX's backend test: one MatMul c = a b, opset 13, producer "backend-test".
    let nodes = model.nodes().unwrap();
    assert_eq!(nodes.len(), 1);
    assert_eq!((nodes[0].op_type.as_str(), &nodes[0].inputs, &nodes[0].outputs), ("MatMul", &vec!["a".to_string(), "b".to_string()], &vec!["c".to_string()]));
    assert_eq!(model.opset(), 13);
    assert_eq!(model.producer(), "backend-test");
    let data = dir.join("test_data_set_0");
    let a = Tensor::read_onnx_file(data.join("input_0.pb")).unwrap();
    let b = Tensor::read_onnx_file(data.join("input_1.pb")).unwrap();
    let want = Tensor::read_onnx_file(data.join("output_0.pb")).unwrap();
    let (m, k, n) = (a.shape()[0] as usize, a.shape()[1] as usize, b.shape()[1] as usize);
    assert_eq!(b.shape()[0] as usize, k);
    assert_eq!(want.shape(), &[m as i64, n as i64]);
    // The files hold what ONNX wrote: the expected output is a b, computed here in double.
    let (av, bv, wv) = (a.as_slice::<f32>().unwrap(), b.as_slice::<f32>().unwrap(), want.as_slice::<f32>().unwrap());
    for i in 0..m {
        for j in 0..n {
            let dot: f64 = (0..k).map(|p| av[i * k + p] as f64 * bv[p * n + j] as f64).sum();
            assert!((dot - wv[i * n + j] as f64).abs() <= 1e-5 + 1e-5 * dot.abs(), "c[{}][{}]", i, j);
        }
    }
    let session = Session::with_defaults(&model).unwrap();
    let got = session.run(&[("a", &a), ("b", &b)], &["c"]).unwrap();
    for (g, w) in got[0].as_slice::<f32>().unwrap().iter().zip(wv) {
        assert!((g - w).abs() <= 1e-5 + 1e-4 * w.abs(), "{} vs {}", g, w);
    }
    assert_eq!(session.value_shape("c").unwrap(), (DType::Float32, vec![m as i64, n as i64]));
    assert_eq!(session.value_shape("nope").unwrap_err().status, Status::InvalidArgument);
}

#[test]
fn ppocr_cls_nodes_values_plans_and_memory() {
    let path = match shared_model("ppocr_cls") {
        Some(p) => p,
        None => return,
    };
    let model = Model::load(&path).unwrap();
    let (nodes, values) = (model.nodes().unwrap(), model.values().unwrap());
    assert!(model.opset() >= 7, "opset {}", model.opset());
    let names: std::collections::HashSet<&str> = values.iter().map(|v| v.name.as_str()).collect();
    for n in &nodes {
        assert!(!n.op_type.is_empty());
        for v in n.inputs.iter().chain(&n.outputs) {
            assert!(v.is_empty() || names.contains(v.as_str()), "{} of {:?} is not a graph value", v, n);
        }
    }
    assert!(nodes[0].inputs.iter().any(|i| i == "x"));
    let x = values.iter().find(|v| v.name == "x").unwrap();
    assert!(!x.constant && x.dtype == DType::Float32 && x.shape.as_ref().map(Vec::len) == Some(4));
    // Every Conv's weight is a 4-D constant.
    let convs: Vec<_> = nodes.iter().filter(|n| n.op_type == "Conv").collect();
    assert!(!convs.is_empty());
    for c in &convs {
        let w = values.iter().find(|v| v.name == c.inputs[1]).unwrap();
        assert!(w.constant && w.shape.as_ref().map(Vec::len) == Some(4), "{:?}", w);
    }
    eprintln!("ppocr_cls: {} nodes ({} Conv), {} values, opset {}, producer {:?}", nodes.len(), convs.len(), values.len(), model.opset(), model.producer());

    let options = SessionOptions::new().unwrap().num_threads(1).unwrap().plan_cache_bytes(1 << 20).unwrap().cpu_fallback(true).unwrap();
    let session = Session::new(&model, &options).unwrap();
    // The input's dims are dynamic: no plan before the first run.
    assert_eq!(session.value_shape("softmax_0.tmp_0").unwrap_err().status, Status::InvalidArgument);
    let input = Tensor::from_slice(&[1, 3, 48, 192], &pattern(3 * 48 * 192)).unwrap();
    let ro = RunOptions::new().unwrap().output_device("cpu").unwrap();
    let y = session.run_with(&ro, &[("x", &input)], &["softmax_0.tmp_0"]).unwrap();
    assert_eq!(y[0].device(), "cpu");
    assert_eq!(session.value_shape("softmax_0.tmp_0").unwrap(), (DType::Float32, vec![1, 2]));
    assert!(session.memory_stat("plans").unwrap() >= 1);
    assert!(session.memory_stat("full_plans").unwrap() >= 1);
    assert_eq!(session.memory_stat("no_such_stat").unwrap_err().status, Status::InvalidArgument);
    assert_eq!(RunOptions::new().unwrap().output_device("abacus").unwrap_err().status, Status::InvalidArgument);
}

#[test]
fn device_tensors_and_copies() {
    let src = Tensor::from_slice(&[2, 2], &[0.5f32, 1.5, 2.5, 3.5]).unwrap();
    assert_eq!(src.device(), "cpu");
    let mut dst = Tensor::zeros_on(DType::Float32, &[2, 2], "cpu").unwrap();
    src.copy_to(&mut dst).unwrap();
    assert_eq!(dst.as_slice::<f32>().unwrap(), &[0.5, 1.5, 2.5, 3.5]);
    let mut wrong = Tensor::zeros(DType::Float32, &[4]).unwrap();
    assert_eq!(src.copy_to(&mut wrong).unwrap_err().status, Status::InvalidArgument);
    if !backends::cuda::is_available() {
        let err = Tensor::zeros_on(DType::Float32, &[2], "cuda").unwrap_err();
        assert_eq!(err.status, Status::BackendUnavailable, "{}", err);
    } else {
        let mut gpu = Tensor::zeros_on(DType::Float32, &[2, 2], "cuda").unwrap();
        assert!(gpu.device().starts_with("cuda"));
        assert!(gpu.as_slice::<f32>().is_err(), "device memory read from the host");
        src.copy_to(&mut gpu).unwrap();
        let mut back = Tensor::zeros(DType::Float32, &[2, 2]).unwrap();
        gpu.copy_to(&mut back).unwrap();
        assert_eq!(back.as_bytes(), src.as_bytes());
    }
    assert_eq!(Tensor::zeros_on(DType::Float32, &[2], "abacus").unwrap_err().status, Status::InvalidArgument);
}

#[test]
fn torch_backends_availability_and_reasons() {
    assert!(!backends::mkl_is_available());
    assert!(backends::unavailable_reason("mkl").unwrap().unwrap().contains("MKL"));
    assert!(!backends::nnpack_is_available());
    assert!(backends::unavailable_reason("nnpack").unwrap().unwrap().contains("NNPACK"));
    assert!(!backends::cusparselt_is_available());
    assert!(backends::unavailable_reason("cusparselt").unwrap().unwrap().contains("cuSPARSELt"));
    assert!(backends::opt_einsum::is_available());
    assert_eq!(backends::unavailable_reason("opt_einsum").unwrap(), None);
    assert!(backends::cuda::is_flash_attention_available());
    // The typed queries and the reasons agree.
    assert_eq!(backends::onednn_is_available(), backends::unavailable_reason("mkldnn").unwrap().is_none());
    assert_eq!(backends::openblas_is_available(), backends::unavailable_reason("openblas").unwrap().is_none());
    assert_eq!(backends::cuda::is_available(), backends::unavailable_reason("cuda").unwrap().is_none());
    assert_eq!(backends::cudnn::is_available(), backends::unavailable_reason("cudnn").unwrap().is_none());
    assert_eq!(backends::unavailable_reason("no_such_library").unwrap_err().status, Status::InvalidArgument);
    assert!(tern::config_show().contains("nnpack: unavailable"), "{}", tern::config_show());

    // The typed switches and the registry see one value.
    let reduce = backends::sdp::fp16_bf16_reduction_math_allowed();
    backends::sdp::allow_fp16_bf16_reduction_math(!reduce);
    assert_eq!(backends::get_flag("sdp.allow_fp16_bf16_reduction_math").unwrap(), (!reduce).to_string());
    backends::sdp::allow_fp16_bf16_reduction_math(reduce);
    assert_eq!(backends::blas_set_verbose(Verbose::OnCreation).unwrap_err().status, Status::InvalidArgument);
    backends::blas_set_verbose(Verbose::On).unwrap();
    assert_eq!(backends::get_flag("blas.verbose").unwrap(), "true");
    backends::blas_set_verbose(Verbose::Off).unwrap();
    assert_eq!(backends::get_flag("blas.verbose").unwrap(), "false");
}

// blas.verbose prints on the process's stdout, which the test harness does not capture: the
// check runs in a child process (this test binary again, one test) and reads its output.
const CHILD: &str = "TERN_RUST_BLAS_VERBOSE_CHILD";

#[test]
fn blas_verbose_prints_only_for_the_run_that_asks() {
    if let Ok(which) = std::env::var(CHILD) {
        let a = Tensor::from_slice(&[3, 4], &pattern(12)).unwrap();
        let b = Tensor::from_slice(&[4, 3], &pattern(12)).unwrap();
        let model = Model::load(onnx_node_test("test_matmul_2d").unwrap().join("model.onnx")).unwrap();
        let session = Session::with_defaults(&model).unwrap();
        let ro = RunOptions::new().unwrap().flag("blas.verbose", &which).unwrap();
        session.run_with(&ro, &[("a", &a), ("b", &b)], &["c"]).unwrap();
        return;
    }
    if onnx_node_test("test_matmul_2d").is_none() {
        return;
    }
    let child = |value: &str| {
        let out = Command::new(std::env::current_exe().unwrap())
            .args(["--exact", "blas_verbose_prints_only_for_the_run_that_asks", "--nocapture", "--test-threads=1"])
            .env(CHILD, value)
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let on = child("true");
    // The harness's "test NAME ... " shares the line: the record is found where it starts.
    let line = on
        .lines()
        .find_map(|l| l.find("tern_blas_verbose,exec,MatMul,").map(|at| &l[at..]))
        .unwrap_or_else(|| panic!("no line in {:?}", on));
    assert!(line.contains(",m=3,n=3,k=4,"), "{}", line);
    assert!(!child("false").contains("tern_blas_verbose"));
}
