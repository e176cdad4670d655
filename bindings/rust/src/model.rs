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
            let dims = if rank == 0 || shape.is_null() { &[][..] } else { std::slice::from_raw_parts(shape, rank) };
            Ok(ValueInfo { name: cstr(name), dtype: DType::from_raw(dtype), shape: dims.to_vec() })
        }
    }
}

impl Drop for Model {
    fn drop(&mut self) {
        unsafe { sys::tern_model_destroy(self.ptr.as_ptr()) }
    }
}
