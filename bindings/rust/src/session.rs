use std::ffi::CString;
use std::os::raw::c_char;
use std::path::Path;
use std::ptr::NonNull;
use std::sync::Arc;
use std::time::Duration;

use crate::backends::SdpBackend;
use crate::error::Result;
use crate::model::Model;
use crate::tensor::{DType, Tensor};
use crate::{check, sys, to_cstring};

/// Options for [`Session::new`] (`tern_session_options`). Setters consume and return the
/// options, so they chain: `SessionOptions::new()?.num_threads(2)?.flag("sdp.flash_enabled", "false")?`.
#[derive(Debug)]
pub struct SessionOptions {
    ptr: NonNull<sys::tern_session_options>,
}

unsafe impl Send for SessionOptions {}

impl SessionOptions {
    pub fn new() -> Result<SessionOptions> {
        crate::check_abi()?;
        let mut out = std::ptr::null_mut();
        check(unsafe { sys::tern_session_options_create(&mut out) })?;
        Ok(SessionOptions { ptr: NonNull::new(out).expect("tern returned NULL options") })
    }

    /// Ordered backend preference, "cuda,cpu" ("cpu" is appended when absent).
    pub fn backends(self, list: &str) -> Result<Self> {
        let c = to_cstring("backend list", list)?;
        check(unsafe { sys::tern_session_options_set_backends(self.ptr.as_ptr(), c.as_ptr()) })?;
        Ok(self)
    }

    /// Intra-op threads for this session (0: follow [`crate::set_num_threads`]).
    pub fn num_threads(self, n: i32) -> Result<Self> {
        check(unsafe { sys::tern_session_options_set_num_threads(self.ptr.as_ptr(), n) })?;
        Ok(self)
    }

    /// Inter-op threads for this session (0: follow [`crate::set_num_interop_threads`]).
    pub fn num_interop_threads(self, n: i32) -> Result<Self> {
        check(unsafe { sys::tern_session_options_set_num_interop_threads(self.ptr.as_ptr(), n) })?;
        Ok(self)
    }

    /// A limit on the memory the session allocates (0: none).
    pub fn max_memory_bytes(self, bytes: u64) -> Result<Self> {
        check(unsafe { sys::tern_session_options_set_max_memory_bytes(self.ptr.as_ptr(), bytes) })?;
        Ok(self)
    }

    /// Overrides a session- or run-scoped flag for this session alone.
    pub fn flag(self, name: &str, value: &str) -> Result<Self> {
        let (n, v) = (to_cstring("flag name", name)?, to_cstring("flag value", value)?);
        check(unsafe { sys::tern_session_options_set_flag(self.ptr.as_ptr(), n.as_ptr(), v.as_ptr()) })?;
        Ok(self)
    }

    /// `false`: run only on the listed backends, never falling back to the CPU (a node none of
    /// them can run fails the session's creation, naming the node). Default `true`.
    pub fn cpu_fallback(self, enabled: bool) -> Result<Self> {
        check(unsafe { sys::tern_session_options_set_cpu_fallback(self.ptr.as_ptr(), enabled as i32) })?;
        Ok(self)
    }

    /// How many bytes the session's cached plans (one per set of input shapes) may keep; the
    /// least recently used go first. 0 keeps the latest plan only.
    pub fn plan_cache_bytes(self, bytes: u64) -> Result<Self> {
        check(unsafe { sys::tern_session_options_set_plan_cache_bytes(self.ptr.as_ptr(), bytes) })?;
        Ok(self)
    }

    /// Records a Chrome trace of every run, written by [`Session::end_profiling`].
    pub fn profiling(self, path: impl AsRef<Path>) -> Result<Self> {
        let c = to_cstring("path", &path.as_ref().to_string_lossy())?;
        check(unsafe { sys::tern_session_options_enable_profiling(self.ptr.as_ptr(), c.as_ptr()) })?;
        Ok(self)
    }
}

impl Drop for SessionOptions {
    fn drop(&mut self) {
        unsafe { sys::tern_session_options_destroy(self.ptr.as_ptr()) }
    }
}

/// The C run options, destroyed when the last of their [`RunOptions`] and [`CancelHandle`]s is
/// dropped: a handle kept by another thread never cancels freed options.
#[derive(Debug)]
struct RawRunOptions(NonNull<sys::tern_run_options>);

// Through shared references only tern_run_options_cancel and _clear_cancel (thread-safe in the C
// API) and tern_session_run (which only reads the options) are called.
unsafe impl Send for RawRunOptions {}
unsafe impl Sync for RawRunOptions {}

impl Drop for RawRunOptions {
    fn drop(&mut self) {
        unsafe { sys::tern_run_options_destroy(self.0.as_ptr()) }
    }
}

/// Per-run options (`tern_run_options`): run-scoped flags, the attention backends allowed, a
/// deadline, and cancellation. Setters consume and return the options, so they chain.
#[derive(Debug)]
pub struct RunOptions {
    raw: Arc<RawRunOptions>,
}

impl RunOptions {
    pub fn new() -> Result<RunOptions> {
        crate::check_abi()?;
        let mut out = std::ptr::null_mut();
        check(unsafe { sys::tern_run_options_create(&mut out) })?;
        Ok(RunOptions { raw: Arc::new(RawRunOptions(NonNull::new(out).expect("tern returned NULL options"))) })
    }

    fn as_ptr(&self) -> *mut sys::tern_run_options {
        self.raw.0.as_ptr()
    }

    pub fn flag(self, name: &str, value: &str) -> Result<Self> {
        let (n, v) = (to_cstring("flag name", name)?, to_cstring("flag value", value)?);
        check(unsafe { sys::tern_run_options_set_flag(self.as_ptr(), n.as_ptr(), v.as_ptr()) })?;
        Ok(self)
    }

    /// Only these attention backends may run (like `torch.nn.attention.sdpa_kernel`).
    pub fn sdp_backends(self, allowed: &[SdpBackend]) -> Result<Self> {
        let raw: Vec<sys::tern_sdp_backend> = allowed.iter().map(|b| b.to_raw()).collect();
        check(unsafe { sys::tern_run_options_set_sdp_backends(self.as_ptr(), raw.as_ptr(), raw.len()) })?;
        Ok(self)
    }

    /// Runs given these options return their outputs on `device` ("cpu", the default, or a
    /// device the session runs on, like "cuda:0").
    pub fn output_device(self, device: &str) -> Result<Self> {
        let d = to_cstring("device", device)?;
        check(unsafe { sys::tern_run_options_set_output_device(self.as_ptr(), d.as_ptr()) })?;
        Ok(self)
    }

    /// Each run given these options must finish within `limit` of its start (rounded up to whole
    /// milliseconds), else it fails with [`Status::DeadlineExceeded`](crate::Status). A zero
    /// duration removes the deadline.
    pub fn deadline(self, limit: Duration) -> Result<Self> {
        let ms = i64::try_from(limit.as_nanos().div_ceil(1_000_000)).unwrap_or(i64::MAX);
        check(unsafe { sys::tern_run_options_set_deadline_ms(self.as_ptr(), ms) })?;
        Ok(self)
    }

    /// Cancels the runs using these options (they fail with
    /// [`Status::Cancelled`](crate::Status) within about one node's time) and every later run
    /// with them until [`RunOptions::clear_cancel`]. For another thread, see
    /// [`RunOptions::cancel_handle`].
    pub fn cancel(&self) -> Result<()> {
        check(unsafe { sys::tern_run_options_cancel(self.as_ptr()) })
    }

    /// Lets runs started afterwards with these options go on.
    pub fn clear_cancel(&self) -> Result<()> {
        check(unsafe { sys::tern_run_options_clear_cancel(self.as_ptr()) })
    }

    /// A handle another thread may keep to cancel the runs using these options. It keeps the
    /// options alive, so it may outlive them and be used after they are dropped (then it stops
    /// nothing).
    pub fn cancel_handle(&self) -> CancelHandle {
        CancelHandle { raw: Arc::clone(&self.raw) }
    }
}

/// Cancels the runs of one [`RunOptions`] from any thread (`tern_run_options_cancel`).
#[derive(Debug, Clone)]
pub struct CancelHandle {
    raw: Arc<RawRunOptions>,
}

impl CancelHandle {
    /// As [`RunOptions::cancel`].
    pub fn cancel(&self) -> Result<()> {
        check(unsafe { sys::tern_run_options_cancel(self.raw.0.as_ptr()) })
    }

    /// As [`RunOptions::clear_cancel`].
    pub fn clear_cancel(&self) -> Result<()> {
        check(unsafe { sys::tern_run_options_clear_cancel(self.raw.0.as_ptr()) })
    }
}

/// A model compiled for its backends (`tern_session`). `run` may be called from many threads
/// at once.
#[derive(Debug)]
pub struct Session {
    ptr: NonNull<sys::tern_session>,
}

// The C contract: tern_session_run is safe to call on one session from many threads.
unsafe impl Send for Session {}
unsafe impl Sync for Session {}

impl Session {
    pub fn new(model: &Model, options: &SessionOptions) -> Result<Session> {
        Session::create(model, options.ptr.as_ptr())
    }

    /// A session with the default options (the CPU backend, process thread counts).
    pub fn with_defaults(model: &Model) -> Result<Session> {
        Session::create(model, std::ptr::null())
    }

    fn create(model: &Model, options: *const sys::tern_session_options) -> Result<Session> {
        let mut out = std::ptr::null_mut();
        check(unsafe { sys::tern_session_create(model.as_ptr(), options, &mut out) })?;
        Ok(Session { ptr: NonNull::new(out).expect("tern returned a NULL session") })
    }

    /// Runs the model on named inputs (borrowed for the call) and returns the named outputs, in
    /// the order asked.
    pub(crate) fn raw(&self) -> *mut sys::tern_session {
        self.ptr.as_ptr()
    }

    pub fn run(&self, inputs: &[(&str, &Tensor)], outputs: &[&str]) -> Result<Vec<Tensor>> {
        self.run_impl(std::ptr::null(), inputs, outputs)
    }

    pub fn run_with(&self, options: &RunOptions, inputs: &[(&str, &Tensor)], outputs: &[&str]) -> Result<Vec<Tensor>> {
        self.run_impl(options.as_ptr(), inputs, outputs)
    }

    fn run_impl(
        &self,
        options: *const sys::tern_run_options,
        inputs: &[(&str, &Tensor)],
        outputs: &[&str],
    ) -> Result<Vec<Tensor>> {
        let in_names: Vec<CString> = inputs.iter().map(|(n, _)| to_cstring("input name", n)).collect::<Result<_>>()?;
        let out_names: Vec<CString> = outputs.iter().map(|n| to_cstring("output name", n)).collect::<Result<_>>()?;
        let in_ptrs: Vec<*const c_char> = in_names.iter().map(|c| c.as_ptr()).collect();
        let out_ptrs: Vec<*const c_char> = out_names.iter().map(|c| c.as_ptr()).collect();
        let tensors: Vec<*const sys::tern_tensor> = inputs.iter().map(|(_, t)| t.as_ptr()).collect();
        let mut results: Vec<*mut sys::tern_tensor> = vec![std::ptr::null_mut(); outputs.len()];
        check(unsafe {
            sys::tern_session_run(
                self.ptr.as_ptr(),
                options,
                in_ptrs.as_ptr(),
                tensors.as_ptr(),
                tensors.len(),
                out_ptrs.as_ptr(),
                out_ptrs.len(),
                results.as_mut_ptr(),
            )
        })?;
        Ok(results.into_iter().map(|p| unsafe { Tensor::from_raw(p) }).collect())
    }

    /// The value a run of this session would use for flag `name`, and where it came from.
    pub fn flag(&self, name: &str) -> Result<(String, String)> {
        let n = to_cstring("flag name", name)?;
        let mut source = std::ptr::null();
        let value = crate::backends::read_flag_buffer(|buf, len| unsafe {
            sys::tern_session_flag_get(self.ptr.as_ptr(), n.as_ptr(), buf, len, &mut source)
        })?;
        Ok((value, unsafe { crate::cstr(source) }))
    }

    /// Writes the optimized graph with packed weights as `.tern`; returns the packed layouts written.
    pub fn save_optimized(&self, path: impl AsRef<Path>) -> Result<usize> {
        let c = to_cstring("path", &path.as_ref().to_string_lossy())?;
        let mut packed = 0usize;
        check(unsafe { sys::tern_session_save_optimized(self.ptr.as_ptr(), c.as_ptr(), &mut packed) })?;
        Ok(packed)
    }

    /// (activation arena bytes, packed weight bytes) of the most recent plan.
    pub fn memory_info(&self) -> Result<(usize, usize)> {
        let (mut act, mut packed) = (0usize, 0usize);
        check(unsafe { sys::tern_session_memory_info(self.ptr.as_ptr(), &mut act, &mut packed) })?;
        Ok((act, packed))
    }

    /// One figure of the session's memory and planning by name: "plans", "plan_bytes",
    /// "packed_weight_bytes", "arena_bytes", "full_plans", "template_plans".
    pub fn memory_stat(&self, name: &str) -> Result<u64> {
        let n = to_cstring("stat name", name)?;
        let mut value = 0u64;
        check(unsafe { sys::tern_session_memory_stat(self.ptr.as_ptr(), n.as_ptr(), &mut value) })?;
        Ok(value)
    }

    /// The dtype and shape (every dim known) the session's most recent plan gives the model's
    /// value `name`. An error before the first plan, or for a value the plan does not hold
    /// (optimized away, fused, or computed per run).
    pub fn value_shape(&self, name: &str) -> Result<(DType, Vec<i64>)> {
        let n = to_cstring("value name", name)?;
        let (mut dtype, mut rank, mut shape) = (0, 0usize, std::ptr::null());
        unsafe {
            // The shape lives until the next call on this thread: copied at once.
            check(sys::tern_session_value_shape(self.ptr.as_ptr(), n.as_ptr(), &mut dtype, &mut rank, &mut shape))?;
            Ok((DType::from_raw(dtype), crate::model::dims(shape, rank)))
        }
    }

    /// Writes the profiling trace (sessions made with [`SessionOptions::profiling`]).
    pub fn end_profiling(&mut self) -> Result<()> {
        check(unsafe { sys::tern_session_end_profiling(self.ptr.as_ptr()) })
    }
}

impl Drop for Session {
    fn drop(&mut self) {
        unsafe { sys::tern_session_destroy(self.ptr.as_ptr()) }
    }
}
