use std::path::Path;
use std::ptr::NonNull;

use crate::error::Result;
use crate::tensor::DType;
use crate::{check, cstr, sys, to_cstring};

/// A graph input or output: name, element type and shape (-1 marks a dynamic dim).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ValueInfo {
    pub name: String,
    pub dtype: DType,
    pub shape: Vec<i64>,
}

/// A node of the main graph as loaded (before Tern's optimizations), in file order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Node {
    /// "" when the file gave none.
    pub name: String,
    pub op_type: String,
    /// "" for ai.onnx.
    pub domain: String,
    /// Value names; "" for an omitted optional input or output.
    pub inputs: Vec<String>,
    pub outputs: Vec<String>,
}

/// A value (tensor) of the main graph: an input, a weight, an intermediate or an output.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GraphValue {
    pub name: String,
    /// `DType::Unknown(0)` for sequence and optional values.
    pub dtype: DType,
    /// None when not even the rank is known; -1 marks a dim known only at run time.
    pub shape: Option<Vec<i64>>,
    /// A weight or folded data (its shape is exact).
    pub constant: bool,
}

/// A loaded, verified model (`tern_model`): immutable, shared by any number of sessions and
/// threads. Sessions keep what they need, so a model may be dropped before its sessions.
#[derive(Debug)]
pub struct Model {
    ptr: NonNull<sys::tern_model>,
}

// The C contract: models are immutable and may be shared by any number of threads.
unsafe impl Send for Model {}
unsafe impl Sync for Model {}

impl Model {
    /// Loads a `.tern` file (mapped, not copied) or an ONNX model; the content decides.
    pub fn load(path: impl AsRef<Path>) -> Result<Model> {
        crate::check_abi()?;
        let path = path.as_ref();
        let c = to_cstring("path", &path.to_string_lossy())?;
        let mut out = std::ptr::null_mut();
        check(unsafe { sys::tern_model_load_file(c.as_ptr(), &mut out) })?;
        Ok(Model { ptr: NonNull::new(out).expect("tern returned a NULL model") })
    }

    /// Loads a model from bytes (copied: the buffer may go right after).
    pub fn from_bytes(bytes: &[u8]) -> Result<Model> {
        crate::check_abi()?;
        let mut out = std::ptr::null_mut();
        check(unsafe { sys::tern_model_load_memory(bytes.as_ptr() as *const _, bytes.len(), &mut out) })?;
        Ok(Model { ptr: NonNull::new(out).expect("tern returned a NULL model") })
    }

    /// Writes the model as `.tern`.
    pub fn save(&self, path: impl AsRef<Path>) -> Result<()> {
        let c = to_cstring("path", &path.as_ref().to_string_lossy())?;
        check(unsafe { sys::tern_model_save(self.ptr.as_ptr(), c.as_ptr()) })
    }

    pub fn as_ptr(&self) -> *const sys::tern_model {
        self.ptr.as_ptr()
    }

    pub fn inputs(&self) -> Result<Vec<ValueInfo>> {
        let n = unsafe { sys::tern_model_input_count(self.ptr.as_ptr()) };
        (0..n).map(|i| self.info(i, true)).collect()
    }

    pub fn outputs(&self) -> Result<Vec<ValueInfo>> {
        let n = unsafe { sys::tern_model_output_count(self.ptr.as_ptr()) };
        (0..n).map(|i| self.info(i, false)).collect()
    }

    /// Graph inputs that have an initializer: a run may give them to replace the weight, or
    /// leave them to their initializer (`tern_model_optional_input_*`).
    pub fn optional_inputs(&self) -> Result<Vec<ValueInfo>> {
        let n = unsafe { sys::tern_model_optional_input_count(self.ptr.as_ptr()) };
        (0..n)
            .map(|i| {
                let (mut dtype, mut rank, mut shape) = (0, 0usize, std::ptr::null());
                unsafe {
                    let name = sys::tern_model_optional_input_name(self.ptr.as_ptr(), i);
                    check(sys::tern_model_optional_input_info(self.ptr.as_ptr(), i, &mut dtype, &mut rank, &mut shape))?;
                    Ok(ValueInfo { name: cstr(name), dtype: DType::from_raw(dtype), shape: dims(shape, rank) })
                }
            })
            .collect()
    }

    /// The nodes of the main graph as loaded, in file order (subgraphs of If/Loop/Scan not
    /// listed).
    pub fn nodes(&self) -> Result<Vec<Node>> {
        let m = self.ptr.as_ptr();
        let n = unsafe { sys::tern_model_node_count(m) };
        (0..n)
            .map(|i| {
                let (mut name, mut op, mut domain) = (std::ptr::null(), std::ptr::null(), std::ptr::null());
                let (mut n_in, mut n_out) = (0usize, 0usize);
                unsafe {
                    check(sys::tern_model_node_info(m, i, &mut name, &mut op, &mut domain, &mut n_in, &mut n_out))?;
                    Ok(Node {
                        name: cstr(name),
                        op_type: cstr(op),
                        domain: cstr(domain),
                        inputs: (0..n_in).map(|j| cstr(sys::tern_model_node_input(m, i, j))).collect(),
                        outputs: (0..n_out).map(|j| cstr(sys::tern_model_node_output(m, i, j))).collect(),
                    })
                }
            })
            .collect()
    }

    /// The values of the main graph: inputs, weights, intermediates and outputs.
    pub fn values(&self) -> Result<Vec<GraphValue>> {
        let m = self.ptr.as_ptr();
        let n = unsafe { sys::tern_model_value_count(m) };
        (0..n)
            .map(|i| {
                let (mut name, mut dtype, mut has_shape, mut rank) = (std::ptr::null(), 0, 0, 0usize);
                let (mut shape, mut constant) = (std::ptr::null(), 0);
                unsafe {
                    // The shape lives until the next call on this thread: copied at once.
                    check(sys::tern_model_value_info(
                        m, i, &mut name, &mut dtype, &mut has_shape, &mut rank, &mut shape, &mut constant,
                    ))?;
                    Ok(GraphValue {
                        name: cstr(name),
                        dtype: DType::from_raw(dtype),
                        shape: if has_shape != 0 { Some(dims(shape, rank)) } else { None },
                        constant: constant != 0,
                    })
                }
            })
            .collect()
    }

    /// The producer the file names ("pytorch 2.1"; "" when none).
    pub fn producer(&self) -> String {
        unsafe { cstr(sys::tern_model_producer(self.ptr.as_ptr())) }
    }

    /// The ai.onnx opset the model's nodes follow.
    pub fn opset(&self) -> i64 {
        unsafe { sys::tern_model_opset(self.ptr.as_ptr()) }
    }

    fn info(&self, i: usize, input: bool) -> Result<ValueInfo> {
        let (mut dtype, mut rank, mut shape) = (0, 0usize, std::ptr::null());
        unsafe {
            let (name, status) = if input {
                (
                    sys::tern_model_input_name(self.ptr.as_ptr(), i),
                    sys::tern_model_input_info(self.ptr.as_ptr(), i, &mut dtype, &mut rank, &mut shape),
                )
            } else {
                (
                    sys::tern_model_output_name(self.ptr.as_ptr(), i),
                    sys::tern_model_output_info(self.ptr.as_ptr(), i, &mut dtype, &mut rank, &mut shape),
                )
            };
            check(status)?;
            Ok(ValueInfo { name: cstr(name), dtype: DType::from_raw(dtype), shape: dims(shape, rank) })
        }
    }
}

/// A copy of `rank` dims at `shape` (none for rank 0 or NULL).
///
/// # Safety
/// `shape` must be NULL or point to `rank` readable values.
pub(crate) unsafe fn dims(shape: *const i64, rank: usize) -> Vec<i64> {
    if rank == 0 || shape.is_null() {
        Vec::new()
    } else {
        std::slice::from_raw_parts(shape, rank).to_vec()
    }
}

impl Drop for Model {
    fn drop(&mut self) {
        unsafe { sys::tern_model_destroy(self.ptr.as_ptr()) }
    }
}
