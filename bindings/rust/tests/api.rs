// The Rust binding against the C library: the PP-OCR classifier gives the C API's outputs bit for
// bit; queries and flags; errors carry Tern's status and message; ownership and threads.
mod common;

use common::*;
use tern::backends;
use std::time::{Duration, Instant};
use tern::{DType, Model, Session, SessionOptions, Status, Tensor, TensorView, Value, ValueKind};

fn assert_send_sync<T: Send + Sync>() {}
fn assert_send<T: Send>() {}

#[test]
fn version_and_abi() {
    assert_eq!(tern::abi_version(), tern::sys::ABI_VERSION);
    tern::check_abi().unwrap();
    let v = tern::version();
    assert_eq!(v.split('.').count(), 3, "version {:?}", v);
    assert!(tern::config_show().contains("Tern"));
}

#[test]
fn ppocr_cls_matches_the_c_api_bitwise() {
    let path = match shared_model("ppocr_cls") {
        Some(p) => p,
        None => return,
    };
    let model = Model::load(&path).unwrap();
    let inputs = model.inputs().unwrap();
    let outputs = model.outputs().unwrap();
    assert_eq!(inputs.len(), 1);
    assert_eq!(inputs[0].dtype, DType::Float32);
    assert_eq!(inputs[0].shape.len(), 4);
    let shape = [1i64, 3, 48, 192];
    let data = pattern(3 * 48 * 192);
    let x = Tensor::from_slice(&shape, &data).unwrap();
    for threads in [1, 2] {
        let session = Session::new(&model, &SessionOptions::new().unwrap().num_threads(threads).unwrap()).unwrap();
        let out = session.run(&[(inputs[0].name.as_str(), &x)], &[outputs[0].name.as_str()]).unwrap();
        assert_eq!(out.len(), 1);
        assert_eq!(out[0].shape(), &[1, 2]);
        let probs = out[0].as_slice::<f32>().unwrap();
        assert!((probs[0] + probs[1] - 1.0).abs() < 1e-5, "softmax {:?}", probs);
        let c_api = run_cli(&path, &inputs[0].name, &shape, &data, &outputs[0].name, threads);
        assert_eq!(out[0].as_bytes(), &c_api[..], "threads {}: binding {:?} vs C API", threads, probs);
        eprintln!("ppocr_cls threads={}: {:?}, bitwise equal to `tern run`", threads, probs);
    }
    // A zero-copy view of the same data gives the same bytes.
    let session = Session::with_defaults(&model).unwrap();
    let view = TensorView::new(&shape, &data).unwrap();
    let a = session.run(&[("x", &view)], &[outputs[0].name.as_str()]).unwrap();
    let b = session.run(&[("x", &x)], &[outputs[0].name.as_str()]).unwrap();
    assert_eq!(a[0].as_bytes(), b[0].as_bytes());
}

#[test]
fn one_session_from_many_threads() {
    let path = match shared_model("ppocr_cls") {
        Some(p) => p,
        None => return,
    };
    assert_send_sync::<Model>();
    assert_send_sync::<Session>();
    assert_send::<Tensor>();
    let model = std::sync::Arc::new(Model::load(&path).unwrap());
    let session = std::sync::Arc::new(
        Session::new(&model, &SessionOptions::new().unwrap().num_threads(1).unwrap()).unwrap(),
    );
    let data = pattern(3 * 48 * 192);
    let want = {
        let x = Tensor::from_slice(&[1, 3, 48, 192], &data).unwrap();
        session.run(&[("x", &x)], &["softmax_0.tmp_0"]).unwrap().remove(0).as_bytes().to_vec()
    };
    let handles: Vec<_> = (0..4)
        .map(|_| {
            let (session, data) = (session.clone(), data.clone());
            std::thread::spawn(move || {
                let x = Tensor::from_slice(&[1, 3, 48, 192], &data).unwrap();
                (0..10)
                    .map(|_| session.run(&[("x", &x)], &["softmax_0.tmp_0"]).unwrap().remove(0).as_bytes().to_vec())
                    .collect::<Vec<_>>()
            })
        })
        .collect();
    for h in handles {
        for got in h.join().unwrap() {
            assert_eq!(got, want);
        }
    }
}

#[test]
fn queries_and_flags() {
    let cap = backends::cpu::get_capability();
    assert!(
        ["DEFAULT", "NO AVX", "AVX2", "AVX512", "VSX", "Z VECTOR", "SVE256"].contains(&cap.as_str()),
        "capability {:?}",
        cap
    );
    eprintln!("cpu capability: {}", cap);
    // A typed setter and the generic registry see one value.
    let before = backends::cudnn::benchmark();
    backends::cudnn::set_benchmark(!before);
    assert_eq!(backends::cudnn::benchmark(), !before);
    assert_eq!(backends::get_flag("cudnn.benchmark").unwrap(), if before { "false" } else { "true" });
    backends::set_flag("cudnn.benchmark", if before { "true" } else { "false" }).unwrap();
    assert_eq!(backends::cudnn::benchmark(), before);
    let strategy = backends::opt_einsum::strategy();
    backends::opt_einsum::set_strategy("greedy").unwrap();
    assert_eq!(backends::get_flag("opt_einsum.strategy").unwrap(), "greedy");
    backends::opt_einsum::set_strategy(&strategy).unwrap();
    let err = backends::set_flag("opt_einsum.strategy", "fastest").unwrap_err();
    assert_eq!(err.status, Status::InvalidArgument);
    assert!(err.message.contains("fastest"), "{}", err);
    let err = backends::get_flag("no.such.flag").unwrap_err();
    assert_eq!(err.status, Status::InvalidArgument);
    assert!(backends::flags().unwrap().iter().any(|f| f.name == "cuda.matmul.allow_tf32" && f.kind == "bool"));
    assert_eq!(backends::cuda::is_built(), backends::cuda::is_built());
    assert!(tern::get_num_threads() >= 1);
    assert!(tern::set_num_threads(0).is_err());
}

#[test]
fn errors_carry_status_and_message() {
    let err = Model::load("/nonexistent/dir/model.onnx").unwrap_err();
    assert_eq!(err.status, Status::Io);
    assert!(err.message.contains("/nonexistent/dir/model.onnx"), "{}", err);
    assert!(err.to_string().starts_with("TERN_ERR_IO: "), "{}", err);
    let err = Model::from_bytes(b"definitely not a model").unwrap_err();
    assert!(matches!(err.status, Status::InvalidModel | Status::Unsupported), "{}", err);
    let err = Model::load("bad\0path").unwrap_err();
    assert_eq!(err.status, Status::InvalidArgument);
    let err = Tensor::zeros(DType::Float32, &[2, -1]).unwrap_err();
    assert_eq!(err.status, Status::InvalidArgument);
    assert!(err.message.contains("negative"), "{}", err);
    let t = Tensor::zeros(DType::Float32, &[2, 3]).unwrap();
    assert_eq!(t.as_slice::<f32>().unwrap(), &[0.0; 6]);
    assert!(t.as_slice::<i64>().is_err());
    assert!(Tensor::from_slice(&[4], &[1.0f32, 2.0]).is_err());

    let path = match shared_model("ppocr_cls") {
        Some(p) => p,
        None => return,
    };
    let model = Model::load(&path).unwrap();
    let session = Session::with_defaults(&model).unwrap();
    let x = Tensor::zeros(DType::Float32, &[1, 3, 48, 192]).unwrap();
    let err = session.run(&[("nope", &x)], &["softmax_0.tmp_0"]).unwrap_err();
    assert_eq!(err.status, Status::InvalidArgument);
    assert!(err.message.contains("'nope'"), "{}", err);
    let wrong = Tensor::zeros(DType::Int64, &[1, 3, 48, 192]).unwrap();
    let err = session.run(&[("x", &wrong)], &["softmax_0.tmp_0"]).unwrap_err();
    assert!(err.message.contains("float32"), "{}", err);
    // The model saved as .tern and loaded from bytes gives the same outputs.
    let dir = scratch_dir("save");
    let file = dir.join("cls.tern");
    model.save(&file).unwrap();
    let again = Model::from_bytes(&std::fs::read(&file).unwrap()).unwrap();
    drop(model); // sessions keep what they need
    let s2 = Session::with_defaults(&again).unwrap();
    let y1 = session.run(&[("x", &x)], &["softmax_0.tmp_0"]).unwrap();
    let y2 = s2.run(&[("x", &x)], &["softmax_0.tmp_0"]).unwrap();
    assert_eq!(y1[0].as_bytes(), y2[0].as_bytes());
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn sequences_and_optionals() {
    // The repository's model with sequence and optional inputs and outputs (tests/fuzz/make_seeds.py).
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/fuzz/corpus/tern_loader/sequences.tern");
    let model = Model::load(&path).unwrap();
    let session = Session::with_defaults(&model).unwrap();
    let a = Tensor::from_slice(&[2], &[1.0f32, 2.0]).unwrap();
    let b = Tensor::from_slice(&[2], &[3.0f32, 4.0]).unwrap();
    let seq = Value::sequence(DType::Float32, &[&a, &b]).unwrap();
    let x = Value::from_tensor(&Tensor::zeros(DType::Float32, &[3, 2]).unwrap()).unwrap();
    let extra = Value::from_tensor(&Tensor::from_slice(&[2], &[5.0f32, 6.0]).unwrap()).unwrap();
    let out = session
        .run_values(&[("seq", &seq), ("x", &x), ("extra", &extra)], &["joined", "longer", "wrapped"])
        .unwrap();
    assert_eq!(out[0].kind().unwrap(), ValueKind::Tensor);
    assert_eq!(out[0].tensor().unwrap().as_slice::<f32>().unwrap(), &[1.0, 2.0, 3.0, 4.0]);
    assert_eq!(out[1].kind().unwrap(), ValueKind::Sequence);
    assert_eq!(out[1].len(), 3);
    assert_eq!(out[1].at(2).unwrap().as_slice::<f32>().unwrap(), &[5.0, 6.0]);
    assert!(out[2].has_value());
    assert_eq!(out[2].get().unwrap().len(), 2);
    // Refusals carry the status and Tern's message.
    let err = out[0].at(0).unwrap_err();
    assert_eq!(err.status, Status::InvalidArgument);
    let empty = Value::optional(None).unwrap();
    assert!(!empty.has_value());
    assert!(empty.get().unwrap_err().message.contains("holds nothing"));
    let wrong = Tensor::zeros(DType::Int32, &[2]).unwrap();
    assert!(Value::sequence(DType::Float32, &[&wrong]).unwrap_err().message.contains("int32"));
}

#[test]
fn cancel_and_deadline() {
    assert_send_sync::<tern::CancelHandle>();
    assert_send_sync::<tern::RunOptions>();
    // A zero deadline is none; a handle outlives its options.
    tern::RunOptions::new().unwrap().deadline(Duration::ZERO).unwrap();
    let handle = tern::RunOptions::new().unwrap().cancel_handle();
    handle.cancel().unwrap(); // the options were dropped: the handle kept them alive
    assert_eq!(Status::Cancelled.name(), "TERN_ERR_CANCELLED");
    assert_eq!(Status::DeadlineExceeded.name(), "TERN_ERR_DEADLINE_EXCEEDED");

    let path = match shared_model("ppocr_det") {
        Some(p) => p,
        None => return,
    };
    let model = Model::load(&path).unwrap();
    let session = Session::new(&model, &SessionOptions::new().unwrap().num_threads(1).unwrap()).unwrap();
    let x = Tensor::from_slice(&[1, 3, 640, 640], &pattern(3 * 640 * 640)).unwrap();
    let out = ["sigmoid_0.tmp_0"];
    let first = session.run(&[("x", &x)], &out).unwrap();

    // Cancelled before the run: at once, sticky until clear_cancel.
    let opts = tern::RunOptions::new().unwrap();
    opts.cancel().unwrap();
    assert_eq!(session.run_with(&opts, &[("x", &x)], &out).unwrap_err().status, Status::Cancelled);
    opts.clear_cancel().unwrap();
    // A warm run's time, the fastest of three (the first run also planned).
    let mut whole = Duration::MAX;
    for _ in 0..3 {
        let t0 = Instant::now();
        session.run_with(&opts, &[("x", &x)], &out).unwrap();
        whole = whole.min(t0.elapsed());
    }

    // Cancelled from another thread during the run. On a loaded machine the canceller can wake
    // after the run has ended; the run then succeeds and the test tries again, cancelling earlier.
    let mut wait = whole / 4;
    let mut tries = 0;
    let (err, latency) = loop {
        let handle = opts.cancel_handle();
        let canceller = std::thread::spawn(move || {
            std::thread::sleep(wait);
            let at = Instant::now();
            handle.cancel().unwrap();
            at
        });
        let result = session.run_with(&opts, &[("x", &x)], &out);
        let returned = Instant::now();
        let cancelled_at = canceller.join().unwrap();
        match result {
            Err(e) => break (e, returned.saturating_duration_since(cancelled_at)),
            Ok(_) => {
                opts.clear_cancel().unwrap();
                tries += 1;
                assert!(tries < 8, "{} runs ended before a cancel sent {:?} into them", tries, wait);
                wait /= 2;
            }
        }
    };
    assert_eq!(err.status, Status::Cancelled, "{}", err);
    assert!(latency < Duration::from_secs(1), "cancel to return {:?}", latency);

    // A deadline far shorter than the run.
    let short = tern::RunOptions::new().unwrap().deadline(whole / 10).unwrap();
    let t1 = Instant::now();
    let err = session.run_with(&short, &[("x", &x)], &out).unwrap_err();
    assert_eq!(err.status, Status::DeadlineExceeded, "{}", err);
    let took = t1.elapsed();
    assert!(took < whole / 10 + Duration::from_secs(1), "{:?}", took);
    eprintln!(
        "ppocr_det run {:?}; cancel to return {:?} ({} earlier runs ended first); a {:?} deadline returned after {:?}",
        whole, latency, tries, whole / 10, took
    );

    // The session computes the same as before.
    let again = session.run(&[("x", &x)], &out).unwrap();
    assert_eq!(first[0].as_bytes(), again[0].as_bytes());
}

#[test]
fn dlpack_round_trip_shares_memory() {
    let data: Vec<f32> = (0..6).map(|i| i as f32 * 0.25 - 1.0).collect();
    let t = Tensor::from_slice(&[2, 3], &data).unwrap();
    let exported = t.to_dlpack().unwrap();
    let m = exported.as_ref();
    assert_eq!(m.version.major, 1);
    assert_eq!(m.flags, 0);
    assert_eq!(m.dl_tensor.device.device_type, tern::sys::kDLCPU);
    assert_eq!((m.dl_tensor.dtype.code, m.dl_tensor.dtype.bits, m.dl_tensor.dtype.lanes), (tern::sys::kDLFloat, 32, 1));
    assert_eq!(m.dl_tensor.ndim, 2);
    let (shape, strides) = unsafe { (std::slice::from_raw_parts(m.dl_tensor.shape, 2), std::slice::from_raw_parts(m.dl_tensor.strides, 2)) };
    assert_eq!(shape, &[2, 3]);
    assert_eq!(strides, &[3, 1]);
    let data_ptr = m.dl_tensor.data;
    drop(t); // the export keeps the storage alive
    let back = unsafe { Tensor::from_dlpack(exported.into_raw()) }.unwrap();
    assert_eq!(back.as_bytes().as_ptr() as *mut std::os::raw::c_void, data_ptr);
    assert_eq!(back.as_slice::<f32>().unwrap(), &data[..]);
    assert_eq!(back.shape(), &[2, 3]);
    assert!(!back.is_read_only());

    // A transposed view is refused, and stays the caller's.
    let t = Tensor::from_slice(&[2, 3], &data).unwrap();
    let exported = t.to_dlpack().unwrap();
    let raw = exported.into_raw();
    unsafe {
        let s = (*raw).dl_tensor.strides;
        *s = 1;
        *s.add(1) = 2;
    }
    let err = unsafe { Tensor::from_dlpack(raw) }.unwrap_err();
    assert_eq!(err.status, Status::Unsupported);
    assert!(err.message.contains("contiguous"), "{}", err);
    unsafe { ((*raw).deleter.unwrap())(raw) };
    let err = unsafe { Tensor::from_dlpack(std::ptr::null_mut()) }.unwrap_err();
    assert_eq!(err.status, Status::InvalidArgument);
}
