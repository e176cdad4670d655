// Shared by the integration tests: where the models, the CLI and the scratch files are, and .npy
// reading and writing (the CLI's file format).
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::Command;

/// ../shared/models/NAME/model.onnx, or None (the test then skips with a message).
pub fn shared_model(name: &str) -> Option<PathBuf> {
    let root = std::env::var("TERN_SHARED_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|_| Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared"));
    let p = root.join("models").join(name).join("model.onnx");
    if p.exists() {
        Some(p)
    } else {
        eprintln!("skipped: {} is absent", p.display());
        None
    }
}

/// The `tern` CLI of the same build: TERN_CLI, else beside libtern.so (a build tree), else in
/// ../bin (an installed prefix), else on PATH.
pub fn tern_cli() -> PathBuf {
    if let Ok(p) = std::env::var("TERN_CLI") {
        return PathBuf::from(p);
    }
    let lib_dir = std::env::var("TERN_LIB_DIR").unwrap_or_else(|_| env!("TERN_BUILD_LIB_DIR").to_string());
    if !lib_dir.is_empty() {
        for c in [Path::new(&lib_dir).join("tern"), Path::new(&lib_dir).join("../bin/tern")] {
            if c.is_file() {
                return c;
            }
        }
    }
    PathBuf::from("tern")
}

pub fn scratch_dir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("tern-rust-{}-{}", name, std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d
}

pub fn write_npy_f32(path: &Path, shape: &[i64], data: &[f32]) {
    let dims: Vec<String> = shape.iter().map(|d| d.to_string()).collect();
    let tuple = if dims.len() == 1 { format!("{},", dims[0]) } else { dims.join(", ") };
    let mut header = format!("{{'descr': '<f4', 'fortran_order': False, 'shape': ({}), }}", tuple);
    while (10 + header.len() + 1) % 64 != 0 {
        header.push(' ');
    }
    header.push('\n');
    let mut bytes = b"\x93NUMPY\x01\x00".to_vec();
    bytes.extend_from_slice(&(header.len() as u16).to_le_bytes());
    bytes.extend_from_slice(header.as_bytes());
    for v in data {
        bytes.extend_from_slice(&v.to_le_bytes());
    }
    std::fs::write(path, bytes).unwrap();
}

/// The data bytes of a version 1 .npy file.
pub fn read_npy_data(path: &Path) -> Vec<u8> {
    let bytes = std::fs::read(path).unwrap_or_else(|e| panic!("{}: {}", path.display(), e));
    assert_eq!(&bytes[..6], b"\x93NUMPY", "{} is not .npy", path.display());
    let header_len = u16::from_le_bytes([bytes[8], bytes[9]]) as usize;
    bytes[10 + header_len..].to_vec()
}

/// Runs `tern run` (the C API through the CLI) on one float32 input; returns the named output's bytes.
pub fn run_cli(model: &Path, input: &str, shape: &[i64], data: &[f32], output: &str, threads: i32) -> Vec<u8> {
    let dir = scratch_dir("cli");
    let npy = dir.join("input.npy");
    write_npy_f32(&npy, shape, data);
    let out_dir = dir.join("out");
    let cli = tern_cli();
    let status = Command::new(&cli)
        .arg("run")
        .arg(model)
        .arg("--input")
        .arg(format!("{}={}", input, npy.display()))
        .arg("--threads")
        .arg(threads.to_string())
        .arg("--runs")
        .arg("1")
        .arg("--output-dir")
        .arg(&out_dir)
        .output()
        .unwrap_or_else(|e| panic!("cannot start {} ({}): set TERN_CLI or TERN_LIB_DIR", cli.display(), e));
    assert!(status.status.success(), "tern run failed: {}", String::from_utf8_lossy(&status.stderr));
    let data = read_npy_data(&out_dir.join(format!("{}.npy", output)));
    let _ = std::fs::remove_dir_all(&dir);
    data
}

/// The input every binding's test feeds: x[i] = (i * 7 mod 23) / 23 - 0.5.
pub fn pattern(n: usize) -> Vec<f32> {
    (0..n).map(|i| ((i * 7 % 23) as f32) / 23.0 - 0.5).collect()
}
