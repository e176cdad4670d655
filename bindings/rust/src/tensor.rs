use std::marker::PhantomData;
use std::ptr::NonNull;

use crate::error::{Error, Result, Status};
use crate::{check, sys};

/// Element types; the values are ONNX's TensorProto.DataType numbers (`tern_dtype`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DType {
    Float32,
    UInt8,
    Int8,
    UInt16,
    Int16,
    Int32,
    Int64,
    String,
    Bool,
    Float16,
    Float64,
    UInt32,
    UInt64,
    BFloat16,
    /// A code this version of the bindings does not know.
    Unknown(i32),
}

impl DType {
    pub fn from_raw(v: sys::tern_dtype) -> DType {
        match v {
            1 => DType::Float32,
            2 => DType::UInt8,
            3 => DType::Int8,
            4 => DType::UInt16,
            5 => DType::Int16,
            6 => DType::Int32,
            7 => DType::Int64,
            8 => DType::String,
            9 => DType::Bool,
            10 => DType::Float16,
            11 => DType::Float64,
            12 => DType::UInt32,
            13 => DType::UInt64,
            16 => DType::BFloat16,
            other => DType::Unknown(other),
        }
    }

    pub fn to_raw(self) -> sys::tern_dtype {
        match self {
            DType::Float32 => 1,
            DType::UInt8 => 2,
            DType::Int8 => 3,
            DType::UInt16 => 4,
            DType::Int16 => 5,
            DType::Int32 => 6,
            DType::Int64 => 7,
            DType::String => 8,
            DType::Bool => 9,
            DType::Float16 => 10,
            DType::Float64 => 11,
            DType::UInt32 => 12,
            DType::UInt64 => 13,
            DType::BFloat16 => 16,
            DType::Unknown(v) => v,
        }
    }
}

/// Rust types that are a Tern element type, bit for bit.
///
/// # Safety
/// `DTYPE` must describe `Self`'s size and representation exactly.
pub unsafe trait Element: Copy + 'static {
    const DTYPE: DType;
}
unsafe impl Element for f32 {
    const DTYPE: DType = DType::Float32;
}
unsafe impl Element for f64 {
    const DTYPE: DType = DType::Float64;
}
unsafe impl Element for u8 {
    const DTYPE: DType = DType::UInt8;
}
unsafe impl Element for i8 {
    const DTYPE: DType = DType::Int8;
}
unsafe impl Element for u16 {
    const DTYPE: DType = DType::UInt16;
}
unsafe impl Element for i16 {
    const DTYPE: DType = DType::Int16;
}
unsafe impl Element for i32 {
    const DTYPE: DType = DType::Int32;
}
unsafe impl Element for i64 {
    const DTYPE: DType = DType::Int64;
}
unsafe impl Element for u32 {
    const DTYPE: DType = DType::UInt32;
}
unsafe impl Element for u64 {
    const DTYPE: DType = DType::UInt64;
}
unsafe impl Element for bool {
    const DTYPE: DType = DType::Bool;
}

/// A tensor that owns its storage (`tern_tensor`): made by [`Tensor::zeros`] or
/// [`Tensor::from_slice`], or returned by [`crate::Session::run`].
#[derive(Debug)]
pub struct Tensor {
    ptr: NonNull<sys::tern_tensor>,
}

// A tensor is plain memory with no thread affinity; it is not synchronised, so not Sync.
unsafe impl Send for Tensor {}

impl Tensor {
    /// A zero-filled tensor.
    pub fn zeros(dtype: DType, shape: &[i64]) -> Result<Tensor> {
        crate::check_abi()?;
        let mut out = std::ptr::null_mut();
        check(unsafe { sys::tern_tensor_create(dtype.to_raw(), shape.as_ptr(), shape.len(), &mut out) })?;
        Ok(unsafe { Tensor::from_raw(out) })
    }

    /// A tensor holding a copy of `data` (which must have exactly the shape's element count).
    pub fn from_slice<T: Element>(shape: &[i64], data: &[T]) -> Result<Tensor> {
        let mut t = Tensor::zeros(T::DTYPE, shape)?;
        let dst = t.as_mut_slice::<T>()?;
        if dst.len() != data.len() {
            return Err(Error::new(
                Status::InvalidArgument,
                format!("shape {:?} holds {} elements, the data has {}", shape, dst.len(), data.len()),
            ));
        }
        dst.copy_from_slice(data);
        Ok(t)
    }

    /// A zero-filled tensor on `device` ("cpu", "cuda", "cuda:1", ...). An error with
    /// [`Status::BackendUnavailable`] when this build or machine lacks the device.
    pub fn zeros_on(dtype: DType, shape: &[i64], device: &str) -> Result<Tensor> {
        crate::check_abi()?;
        let d = crate::to_cstring("device", device)?;
        let mut out = std::ptr::null_mut();
        check(unsafe {
            sys::tern_tensor_create_on_device(dtype.to_raw(), shape.as_ptr(), shape.len(), d.as_ptr(), &mut out)
        })?;
        Ok(unsafe { Tensor::from_raw(out) })
    }

    /// Reads a serialized ONNX TensorProto file (the `input_N.pb` / `output_N.pb` files of ONNX
    /// test data sets).
    pub fn read_onnx_file(path: impl AsRef<std::path::Path>) -> Result<Tensor> {
        crate::check_abi()?;
        let c = crate::to_cstring("path", &path.as_ref().to_string_lossy())?;
        let mut out = std::ptr::null_mut();
        check(unsafe { sys::tern_tensor_read_onnx_file(c.as_ptr(), &mut out) })?;
        Ok(unsafe { Tensor::from_raw(out) })
    }

    /// Takes ownership of a handle from the C API.
    ///
    /// # Safety
    /// `ptr` must be a live tensor that nothing else destroys.
    pub unsafe fn from_raw(ptr: *mut sys::tern_tensor) -> Tensor {
        Tensor { ptr: NonNull::new(ptr).expect("tern returned a NULL tensor") }
    }

    pub fn as_ptr(&self) -> *const sys::tern_tensor {
        self.ptr.as_ptr()
    }

    pub fn dtype(&self) -> DType {
        DType::from_raw(unsafe { sys::tern_tensor_dtype(self.ptr.as_ptr()) })
    }

    pub fn shape(&self) -> &[i64] {
        unsafe {
            let rank = sys::tern_tensor_rank(self.ptr.as_ptr());
            let dims = sys::tern_tensor_shape(self.ptr.as_ptr());
            if rank == 0 || dims.is_null() {
                &[]
            } else {
                std::slice::from_raw_parts(dims, rank)
            }
        }
    }

    /// Where the data is: "cpu", "cuda:0", ...
    pub fn device(&self) -> String {
        unsafe { crate::cstr(sys::tern_tensor_device(self.ptr.as_ptr())) }
    }

    /// Copies this tensor's elements into `dst` (same dtype and shape, any pair of devices).
    pub fn copy_to(&self, dst: &mut Tensor) -> Result<()> {
        check(unsafe { sys::tern_tensor_copy(self.ptr.as_ptr(), dst.ptr.as_ptr()) })
    }

    pub fn byte_size(&self) -> usize {
        unsafe { sys::tern_tensor_byte_size(self.ptr.as_ptr()) }
    }

    /// The raw element bytes.
    ///
    /// # Panics
    /// For a tensor in a device's memory ([`Tensor::zeros_on`]): copy it into a CPU tensor
    /// with [`Tensor::copy_to`] first.
    pub fn as_bytes(&self) -> &[u8] {
        if let Err(e) = self.check_host() {
            panic!("{}", e);
        }
        let n = self.byte_size();
        let p = unsafe { sys::tern_tensor_data(self.ptr.as_ptr()) };
        if n == 0 || p.is_null() {
            &[]
        } else {
            unsafe { std::slice::from_raw_parts(p as *const u8, n) }
        }
    }

    /// The elements as `T`; an error when `T` is not the tensor's dtype.
    pub fn as_slice<T: Element>(&self) -> Result<&[T]> {
        self.check_dtype::<T>()?;
        let n = self.byte_size() / std::mem::size_of::<T>();
        let p = unsafe { sys::tern_tensor_data(self.ptr.as_ptr()) };
        if n == 0 || p.is_null() {
            return Ok(&[]);
        }
        Ok(unsafe { std::slice::from_raw_parts(p as *const T, n) })
    }

    pub fn as_mut_slice<T: Element>(&mut self) -> Result<&mut [T]> {
        self.check_dtype::<T>()?;
        let n = self.byte_size() / std::mem::size_of::<T>();
        let p = unsafe { sys::tern_tensor_data(self.ptr.as_ptr()) };
        if n == 0 || p.is_null() {
            return Ok(&mut []);
        }
        Ok(unsafe { std::slice::from_raw_parts_mut(p as *mut T, n) })
    }

    /// Takes a DLPack 1.x tensor without copying (`tern_tensor_from_dlpack`): on success the
    /// tensor owns `managed` and calls its deleter once, when the tensor and any run using it
    /// are done; on failure `managed` stays the caller's. CPU memory in a dense row-major layout
    /// only (else `Status::Unsupported` saying why).
    ///
    /// # Safety
    /// `managed` must point to a valid `DLManagedTensorVersioned` whose data stays valid until
    /// its deleter runs.
    pub unsafe fn from_dlpack(managed: *mut sys::DLManagedTensorVersioned) -> Result<Tensor> {
        crate::check_abi()?;
        let mut out = std::ptr::null_mut();
        check(sys::tern_tensor_from_dlpack(managed, &mut out))?;
        Ok(Tensor::from_raw(out))
    }

    /// Exports the tensor as a DLPack 1.x managed tensor sharing its memory
    /// (`tern_tensor_to_dlpack`); the memory stays alive until the [`DLPackTensor`] is dropped
    /// or its pointer, taken with [`DLPackTensor::into_raw`], is deleted by its receiver.
    pub fn to_dlpack(&self) -> Result<DLPackTensor> {
        let mut out = std::ptr::null_mut();
        check(unsafe { sys::tern_tensor_to_dlpack(self.ptr.as_ptr(), &mut out) })?;
        Ok(DLPackTensor { ptr: NonNull::new(out).expect("tern returned a NULL DLPack tensor") })
    }

    /// Whether the tensor came from a DLPack tensor flagged read-only (`tern_tensor_is_read_only`).
    pub fn is_read_only(&self) -> bool {
        unsafe { sys::tern_tensor_is_read_only(self.ptr.as_ptr()) != 0 }
    }

    /// Device memory is not readable from the host: its data pointer is a device address.
    fn check_host(&self) -> Result<()> {
        let device = self.device();
        if device == "cpu" {
            return Ok(());
        }
        Err(Error::new(
            Status::InvalidArgument,
            format!("the tensor is in {}'s memory: copy it into a CPU tensor (Tensor::copy_to) to read it", device),
        ))
    }

    fn check_dtype<T: Element>(&self) -> Result<()> {
        self.check_host()?;
        if self.dtype() != T::DTYPE {
            return Err(Error::new(
                Status::InvalidArgument,
                format!("the tensor holds {:?}, not {:?}", self.dtype(), T::DTYPE),
            ));
        }
        Ok(())
    }
}

impl Drop for Tensor {
    fn drop(&mut self) {
        unsafe { sys::tern_tensor_destroy(self.ptr.as_ptr()) }
    }
}

/// A tensor that borrows a slice, zero-copy (`tern_tensor_create_from_data`): the slice stays
/// borrowed, and unchanged, as long as the view lives. Derefs to [`Tensor`] for reading and for
/// passing to [`crate::Session::run`].
#[derive(Debug)]
pub struct TensorView<'a> {
    tensor: Tensor,
    _data: PhantomData<&'a [u8]>,
}

impl<'a> TensorView<'a> {
    pub fn new<T: Element>(shape: &[i64], data: &'a [T]) -> Result<TensorView<'a>> {
        crate::check_abi()?;
        let mut out = std::ptr::null_mut();
        // The C API takes a mutable pointer but never writes through a borrowed input.
        check(unsafe {
            sys::tern_tensor_create_from_data(
                T::DTYPE.to_raw(),
                shape.as_ptr(),
                shape.len(),
                data.as_ptr() as *mut std::os::raw::c_void,
                std::mem::size_of_val(data),
                None,
                std::ptr::null_mut(),
                &mut out,
            )
        })?;
        Ok(TensorView { tensor: unsafe { Tensor::from_raw(out) }, _data: PhantomData })
    }
}

impl std::ops::Deref for TensorView<'_> {
    type Target = Tensor;
    fn deref(&self) -> &Tensor {
        &self.tensor
    }
}

/// A DLPack 1.x managed tensor made by [`Tensor::to_dlpack`]; dropping it runs its deleter.
#[derive(Debug)]
pub struct DLPackTensor {
    ptr: NonNull<sys::DLManagedTensorVersioned>,
}

unsafe impl Send for DLPackTensor {}

impl DLPackTensor {
    /// The struct, for reading its `dl_tensor`.
    pub fn as_ref(&self) -> &sys::DLManagedTensorVersioned {
        unsafe { self.ptr.as_ref() }
    }

    /// Hands the struct to a DLPack consumer, which must call its deleter once.
    pub fn into_raw(self) -> *mut sys::DLManagedTensorVersioned {
        let p = self.ptr.as_ptr();
        std::mem::forget(self);
        p
    }
}

impl Drop for DLPackTensor {
    fn drop(&mut self) {
        unsafe {
            let p = self.ptr.as_ptr();
            if let Some(d) = (*p).deleter {
                d(p)
            }
        }
    }
}
