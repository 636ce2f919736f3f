// kernelgap's prelude for CUDA sources compiled by clang with -nocudainc (runner/toolchains/clang.py).
// It stands in for the CUDA headers, which clang is not given: the execution-space keywords, the
// built-in variables (threadIdx, blockIdx, blockDim, gridDim) and the math functions the suite's
// kernels call, as thin wrappers on libdevice (linked with -mlink-builtin-bitcode; unused ones are
// dropped). __syncthreads is a clang builtin already. Add a function here when a kernel needs it.
#pragma once

#define __global__ __attribute__((global))
#define __device__ __attribute__((device))
#define __host__ __attribute__((host))
#define __shared__ __attribute__((shared))
#define __constant__ __attribute__((constant))
#define __forceinline__ __inline__ __attribute__((always_inline))
#define __launch_bounds__(...) __attribute__((launch_bounds(__VA_ARGS__)))

#include <__clang_cuda_builtin_vars.h>

extern "C" {
__device__ double __nv_exp(double);
__device__ float __nv_expf(float);
__device__ double __nv_log(double);
__device__ float __nv_logf(float);
__device__ double __nv_tanh(double);
__device__ float __nv_tanhf(float);
__device__ double __nv_rsqrt(double);
__device__ float __nv_rsqrtf(float);
__device__ double __nv_pow(double, double);
__device__ float __nv_powf(float, float);
}

#define KERNELGAP_MATH static __device__ __forceinline__
// Transcendentals come from libdevice, as with nvcc.
KERNELGAP_MATH double exp(double x) { return __nv_exp(x); }
KERNELGAP_MATH float expf(float x) { return __nv_expf(x); }
KERNELGAP_MATH double log(double x) { return __nv_log(x); }
KERNELGAP_MATH float logf(float x) { return __nv_logf(x); }
KERNELGAP_MATH double tanh(double x) { return __nv_tanh(x); }
KERNELGAP_MATH float tanhf(float x) { return __nv_tanhf(x); }
KERNELGAP_MATH double rsqrt(double x) { return __nv_rsqrt(x); }
KERNELGAP_MATH float rsqrtf(float x) { return __nv_rsqrtf(x); }
KERNELGAP_MATH double pow(double x, double y) { return __nv_pow(x, y); }
KERNELGAP_MATH float powf(float x, float y) { return __nv_powf(x, y); }
// Single PTX instructions: builtins, not libdevice. __nv_sqrtf would pick sqrt.approx unless the
// __CUDA_PREC_SQRT reflection is set, while nvcc without fast-math emits sqrt.rn.f32.
KERNELGAP_MATH double sqrt(double x) { return __builtin_sqrt(x); }
KERNELGAP_MATH float sqrtf(float x) { return __builtin_sqrtf(x); }
KERNELGAP_MATH double fabs(double x) { return __builtin_fabs(x); }
KERNELGAP_MATH float fabsf(float x) { return __builtin_fabsf(x); }
KERNELGAP_MATH double fmax(double x, double y) { return __builtin_fmax(x, y); }
KERNELGAP_MATH float fmaxf(float x, float y) { return __builtin_fmaxf(x, y); }
KERNELGAP_MATH double fmin(double x, double y) { return __builtin_fmin(x, y); }
KERNELGAP_MATH float fminf(float x, float y) { return __builtin_fminf(x, y); }
KERNELGAP_MATH double fma(double x, double y, double z) { return __builtin_fma(x, y, z); }
KERNELGAP_MATH float fmaf(float x, float y, float z) { return __builtin_fmaf(x, y, z); }
// C++ float overloads, as the CUDA headers give nvcc: exp(float) is expf, not exp on a double.
KERNELGAP_MATH float exp(float x) { return expf(x); }
KERNELGAP_MATH float log(float x) { return logf(x); }
KERNELGAP_MATH float tanh(float x) { return tanhf(x); }
KERNELGAP_MATH float rsqrt(float x) { return rsqrtf(x); }
KERNELGAP_MATH float pow(float x, float y) { return powf(x, y); }
KERNELGAP_MATH float sqrt(float x) { return sqrtf(x); }
KERNELGAP_MATH float fabs(float x) { return fabsf(x); }
KERNELGAP_MATH float fmax(float x, float y) { return fmaxf(x, y); }
KERNELGAP_MATH float fmin(float x, float y) { return fminf(x, y); }
KERNELGAP_MATH float fma(float x, float y, float z) { return fmaf(x, y, z); }
#undef KERNELGAP_MATH
