use std::fmt;

use crate::sys;

/// Tern's status codes (`tern_status`), less `TERN_OK`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Status {
    /// A NULL pointer, unknown name, wrong shape or dtype, or bad value.
    InvalidArgument,
    /// The model file or graph is malformed.
    InvalidModel,
    /// Valid, but an op, attribute or dtype Tern does not implement.
    Unsupported,
    /// The backend is not built or has no device.
    BackendUnavailable,
    OutOfMemory,
    /// A file could not be opened, read, mapped or written.
    Io,
    /// A bug in Tern.
    Internal,
    /// The run's options were cancelled ([`crate::RunOptions::cancel`], [`crate::CancelHandle`]).
    Cancelled,
    /// The run passed its deadline ([`crate::RunOptions::deadline`]).
    DeadlineExceeded,
    /// A code this version of the bindings does not know.
    Unknown(i32),
}

impl Status {
    pub fn from_raw(code: sys::tern_status) -> Status {
        match code {
            sys::TERN_ERR_INVALID_ARGUMENT => Status::InvalidArgument,
            sys::TERN_ERR_INVALID_MODEL => Status::InvalidModel,
            sys::TERN_ERR_UNSUPPORTED => Status::Unsupported,
            sys::TERN_ERR_BACKEND_UNAVAILABLE => Status::BackendUnavailable,
            sys::TERN_ERR_OUT_OF_MEMORY => Status::OutOfMemory,
            sys::TERN_ERR_IO => Status::Io,
            sys::TERN_ERR_INTERNAL => Status::Internal,
            sys::TERN_ERR_CANCELLED => Status::Cancelled,
            sys::TERN_ERR_DEADLINE_EXCEEDED => Status::DeadlineExceeded,
            other => Status::Unknown(other),
        }
    }

    /// The C name, "TERN_ERR_IO", ... (from `tern_status_name`).
    pub fn name(&self) -> String {
        let code = match *self {
            Status::InvalidArgument => sys::TERN_ERR_INVALID_ARGUMENT,
            Status::InvalidModel => sys::TERN_ERR_INVALID_MODEL,
            Status::Unsupported => sys::TERN_ERR_UNSUPPORTED,
            Status::BackendUnavailable => sys::TERN_ERR_BACKEND_UNAVAILABLE,
            Status::OutOfMemory => sys::TERN_ERR_OUT_OF_MEMORY,
            Status::Io => sys::TERN_ERR_IO,
            Status::Internal => sys::TERN_ERR_INTERNAL,
            Status::Cancelled => sys::TERN_ERR_CANCELLED,
            Status::DeadlineExceeded => sys::TERN_ERR_DEADLINE_EXCEEDED,
            Status::Unknown(c) => c,
        };
        unsafe { crate::cstr(sys::tern_status_name(code)) }
    }
}

/// A failed call: Tern's status and its message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Error {
    pub status: Status,
    pub message: String,
}

pub type Result<T> = std::result::Result<T, Error>;

impl Error {
    pub fn new(status: Status, message: impl Into<String>) -> Error {
        Error { status, message: message.into() }
    }

    /// The error for `code` with the calling thread's `tern_last_error()`.
    pub(crate) fn last(code: sys::tern_status) -> Error {
        Error { status: Status::from_raw(code), message: unsafe { crate::cstr(sys::tern_last_error()) } }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.status.name(), self.message)
    }
}

impl std::error::Error for Error {}
