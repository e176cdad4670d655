// Included by every Tern compute shader. T is the storage type of float tensors, A the type
// arithmetic happens in: float32 (default), float16 storage with float32 arithmetic (F16), or
// float16 both (F16A, devices with shaderFloat16).
#if defined(F16) || defined(F16A)
#extension GL_EXT_shader_16bit_storage : require
#endif
#if defined(F16A)
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require
#define T float16_t
#define A float16_t
#elif defined(F16)
#define T float16_t
#define A float
#else
#define T float
#define A float
#endif

// The invocation's linear index when the groups of a 1-D dispatch are split over x and y. A macro:
// gl_WorkGroupSize is only known after the shader's local_size declaration, which follows this
// file.
#define linear_id()                                                                  \
  ((gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x) * gl_WorkGroupSize.x + \
   gl_LocalInvocationID.x)

// The workgroup's linear index (one workgroup per row or output).
#define group_id() (gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x)
