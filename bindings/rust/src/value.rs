//! Sequences and optionals: [`Value`] holds a tensor, a sequence of tensors or an optional, for
//! models whose inputs or outputs are ONNX sequences or optionals ([`Session::run_values`]).

use std::ffi::CString;
use std::os::raw::c_char;
use std::ptr::NonNull;

use crate::{check, sys, to_cstring, DType, Result, Session, Tensor};

/// What a [`Value`] (or a model input or output) is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ValueKind {
    Tensor,
    Sequence,
    Optional,
}

/// A tensor, a sequence of tensors or an optional (`tern_value`). Immutable; it shares the
/// tensors it was made from. Owns its handle.
pub struct Value {
    ptr: NonNull<sys::tern_value>,
}

// Values are immutable; the C API lets any thread read or destroy one.
unsafe impl Send for Value {}
unsafe impl Sync for Value {}

impl std::fmt::Debug for Value {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.kind() {
            Ok(ValueKind::Sequence) => write!(f, "Value(sequence of {})", self.len()),
            Ok(ValueKind::Optional) => write!(f, "Value(optional, {})", if self.has_value() { "holds" } else { "empty" }),
            _ => write!(f, "Value(tensor)"),
        }
    }
}

impl Drop for Value {
    fn drop(&mut self) {
        unsafe { sys::tern_value_destroy(self.ptr.as_ptr()) }
    }
}

impl Value {
    unsafe fn from_raw(ptr: *mut sys::tern_value) -> Value {
        Value { ptr: NonNull::new(ptr).expect("tern returned a NULL value") }
    }

    pub fn as_ptr(&self) -> *const sys::tern_value {
        self.ptr.as_ptr()
    }

    /// A value holding `t` (sharing its data).
    pub fn from_tensor(t: &Tensor) -> Result<Value> {
        crate::check_abi()?;
        let mut out = std::ptr::null_mut();
        check(unsafe { sys::tern_value_from_tensor(t.as_ptr(), &mut out) })?;
        Ok(unsafe { Value::from_raw(out) })
    }

    /// A sequence of `items` (sharing their data), all of dtype `elem`.
    pub fn sequence(elem: DType, items: &[&Tensor]) -> Result<Value> {
        crate::check_abi()?;
        let ptrs: Vec<*const sys::tern_tensor> = items.iter().map(|t| t.as_ptr()).collect();
        let mut out = std::ptr::null_mut();
        check(unsafe { sys::tern_value_create_sequence(elem.to_raw(), ptrs.as_ptr(), ptrs.len(), &mut out) })?;
        Ok(unsafe { Value::from_raw(out) })
    }

    /// An optional holding `v` (a tensor or a sequence), or nothing.
    pub fn optional(v: Option<&Value>) -> Result<Value> {
        crate::check_abi()?;
        let mut out = std::ptr::null_mut();
        let inner = v.map_or(std::ptr::null(), |x| x.as_ptr());
        check(unsafe { sys::tern_value_create_optional(inner, &mut out) })?;
        Ok(unsafe { Value::from_raw(out) })
    }

    pub fn kind(&self) -> Result<ValueKind> {
        let mut k = 0;
        check(unsafe { sys::tern_value_get_kind(self.as_ptr(), &mut k) })?;
        Ok(match k {
            sys::TERN_VALUE_SEQUENCE => ValueKind::Sequence,
            sys::TERN_VALUE_OPTIONAL => ValueKind::Optional,
            _ => ValueKind::Tensor,
        })
    }

    /// A tensor value's tensor (sharing its data).
    pub fn tensor(&self) -> Result<Tensor> {
        let mut out = std::ptr::null_mut();
        check(unsafe { sys::tern_value_get_tensor(self.as_ptr(), &mut out) })?;
        Ok(unsafe { Tensor::from_raw(out) })
    }

    /// A sequence's length (0 for the other kinds).
    pub fn len(&self) -> usize {
        unsafe { sys::tern_value_sequence_length(self.as_ptr()) }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// A sequence's element `i` (sharing its data).
    pub fn at(&self, i: usize) -> Result<Tensor> {
        let mut out = std::ptr::null_mut();
        check(unsafe { sys::tern_value_sequence_at(self.as_ptr(), i, &mut out) })?;
        Ok(unsafe { Tensor::from_raw(out) })
    }

    /// Whether an optional holds something (false for the other kinds).
    pub fn has_value(&self) -> bool {
        unsafe { sys::tern_value_optional_has_value(self.as_ptr()) == 1 }
    }

    /// What an optional holds.
    pub fn get(&self) -> Result<Value> {
        let mut out = std::ptr::null_mut();
        check(unsafe { sys::tern_value_optional_get(self.as_ptr(), &mut out) })?;
        Ok(unsafe { Value::from_raw(out) })
    }
}

impl Session {
    /// [`Session::run`] for models whose inputs or outputs are sequences or optionals: values in,
    /// values out (a tensor output as a [`ValueKind::Tensor`] value).
    pub fn run_values(&self, inputs: &[(&str, &Value)], outputs: &[&str]) -> Result<Vec<Value>> {
        let in_names: Vec<CString> = inputs.iter().map(|(n, _)| to_cstring("input name", n)).collect::<Result<_>>()?;
        let out_names: Vec<CString> = outputs.iter().map(|n| to_cstring("output name", n)).collect::<Result<_>>()?;
        let in_ptrs: Vec<*const c_char> = in_names.iter().map(|c| c.as_ptr()).collect();
        let out_ptrs: Vec<*const c_char> = out_names.iter().map(|c| c.as_ptr()).collect();
        let values: Vec<*const sys::tern_value> = inputs.iter().map(|(_, v)| v.as_ptr()).collect();
        let mut results: Vec<*mut sys::tern_value> = vec![std::ptr::null_mut(); outputs.len()];
        check(unsafe {
            sys::tern_session_run_values(
                self.raw(),
                std::ptr::null(),
                in_ptrs.as_ptr(),
                values.as_ptr(),
                values.len(),
                out_ptrs.as_ptr(),
                out_ptrs.len(),
                results.as_mut_ptr(),
            )
        })?;
        Ok(results.into_iter().map(|p| unsafe { Value::from_raw(p) }).collect())
    }
}
