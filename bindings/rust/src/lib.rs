//! Rust bindings for Tern, an embeddable neural-network inference engine.
//!
//! ```no_run
//! let model = tern::Model::load("model.tern")?;
//! let session = tern::Session::new(&model, &tern::SessionOptions::new()?.num_threads(1)?)?;
//! let x = tern::Tensor::from_slice(&[1, 4], &[0.0f32, 1.0, 2.0, 3.0])?;
//! let outputs = session.run(&[("x", &x)], &["y"])?;
//! println!("{:?}", outputs[0].as_slice::<f32>()?);
//! # Ok::<(), tern::Error>(())
//! ```
//!
//! Ownership follows the C API: [`Model`], [`Session`], [`SessionOptions`], [`RunOptions`] and
//! [`Tensor`] own their handles and release them on `Drop`. Models and sessions are `Send` and
//! `Sync` (the C contract makes models immutable and `tern_session_run` safe from many threads);
//! tensors and options are `Send` only. Every failure is an [`Error`] with Tern's status and
//! message (`tern_last_error`, read on the calling thread right after the failing call).

pub mod backends;
mod error;
mod model;
mod session;
pub mod sys;
mod tensor;
mod value;

pub use error::{Error, Result, Status};
pub use model::{GraphValue, Model, Node, ValueInfo};
pub use session::{CancelHandle, RunOptions, Session, SessionOptions};
pub use tensor::{DLPackTensor, DType, Element, Tensor, TensorView};
pub use value::{Value, ValueKind};

use std::ffi::{CStr, CString};
use std::os::raw::c_char;

/// The library version, "MAJOR.MINOR.PATCH".
pub fn version() -> String {
    unsafe { cstr(sys::tern_version()) }
}

/// The ABI version of the loaded library.
pub fn abi_version() -> u32 {
    unsafe { sys::tern_abi_version() }
}

/// Fails unless the loaded library has the ABI these bindings were written for
/// ([`sys::ABI_VERSION`]). [`Model::load`] and the other entry points call it once.
pub fn check_abi() -> Result<()> {
    let have = abi_version();
    if have != sys::ABI_VERSION {
        return Err(Error::new(
            Status::Unsupported,
            format!(
                "libtern has ABI version {}, these bindings were written for {}",
                have,
                sys::ABI_VERSION
            ),
        ));
    }
    Ok(())
}

/// The build configuration as text (like `torch.__config__.show()`).
pub fn config_show() -> String {
    unsafe { cstr(sys::tern_config_show()) }
}

/// Thread counts and where they came from (like `torch.__config__.parallel_info()`).
pub fn parallel_info() -> String {
    unsafe { cstr(sys::tern_parallel_info()) }
}

/// Intra-op threads for every session that does not set its own (1..=4096).
pub fn set_num_threads(n: i32) -> Result<()> {
    check(unsafe { sys::tern_set_num_threads(n) })
}
pub fn get_num_threads() -> i32 {
    unsafe { sys::tern_get_num_threads() }
}
/// Inter-op threads for every session that does not set its own (1..=4096).
pub fn set_num_interop_threads(n: i32) -> Result<()> {
    check(unsafe { sys::tern_set_num_interop_threads(n) })
}
pub fn get_num_interop_threads() -> i32 {
    unsafe { sys::tern_get_num_interop_threads() }
}

/// Copies a C string owned by the library (NULL gives "").
pub(crate) unsafe fn cstr(p: *const c_char) -> String {
    if p.is_null() {
        String::new()
    } else {
        CStr::from_ptr(p).to_string_lossy().into_owned()
    }
}

/// A Rust string as a C string; an interior NUL is an invalid argument.
pub(crate) fn to_cstring(what: &str, s: &str) -> Result<CString> {
    CString::new(s).map_err(|_| {
        Error::new(Status::InvalidArgument, format!("{} {:?} contains a NUL byte", what, s))
    })
}

/// TERN_OK, or the error with the thread's last message.
pub(crate) fn check(status: sys::tern_status) -> Result<()> {
    if status == sys::TERN_OK {
        Ok(())
    } else {
        Err(Error::last(status))
    }
}
