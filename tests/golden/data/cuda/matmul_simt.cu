// matmul_int8_simt: grid=(1, 1, 1) block=(16, 16, 1) shared_bytes=2048
#include <cuda_fp16.h>

#ifndef VTA_CUDA_PRELUDE
#define VTA_CUDA_PRELUDE
__device__ __forceinline__ int vta_floordiv(int a, int b) {
  int q = a / b; return (q * b != a && ((a < 0) != (b < 0))) ? q - 1 : q;
}
__device__ __forceinline__ int vta_floormod(int a, int b) {
  int r = a % b; return (r != 0 && ((r < 0) != (b < 0))) ? r + b : r;
}
#endif

extern "C" __global__ void __launch_bounds__(256) matmul_int8_simt(const signed char* __restrict__ data, const signed char* __restrict__ kernel, const int* __restrict__ bias, signed char* __restrict__ res) {
  // stage: res
  const int m_o = ((int)blockIdx.y);
  const int n_o = ((int)blockIdx.x);
  const int m_i_o = ((int)threadIdx.y);
  const int n_i_o = ((int)threadIdx.x);
  __align__(16) int C_local[16];
  // stage: C_local
  #pragma unroll
  for (int m = 0; m < 4; ++m) {
    #pragma unroll
    for (int n = 0; n < 4; ++n) {
      C_local[((m * 4) + n)] = 0;
    }
  }
  for (int k_o = 0; k_o < 2; ++k_o) {
    __shared__ __align__(32) signed char data_shared[1024];
    __shared__ __align__(32) signed char kernel_shared[1024];
    // stage: data_shared
    #pragma unroll
    for (int ax0_ax1_f_o_o = 0; ax0_ax1_f_o_o < 4; ++ax0_ax1_f_o_o) {
      const int ax0_ax1_f_o_i = ((int)threadIdx.y);
      const int ax0_ax1_f_i = ((int)threadIdx.x);
      data_shared[((((((ax0_ax1_f_o_o * 256) + (ax0_ax1_f_o_i * 16)) + ax0_ax1_f_i) / 16) * 16) + ((((ax0_ax1_f_o_o * 256) + (ax0_ax1_f_o_i * 16)) + ax0_ax1_f_i) % 16))] = data[((((((ax0_ax1_f_o_o * 256) + (ax0_ax1_f_o_i * 16)) + ax0_ax1_f_i) / 16) * 32) + ((k_o * 16) + ((((ax0_ax1_f_o_o * 256) + (ax0_ax1_f_o_i * 16)) + ax0_ax1_f_i) % 16)))];
    }
    // stage: kernel_shared
    #pragma unroll
    for (int ax0_ax1_f_o_o_1 = 0; ax0_ax1_f_o_o_1 < 4; ++ax0_ax1_f_o_o_1) {
      const int ax0_ax1_f_o_i_1 = ((int)threadIdx.y);
      const int ax0_ax1_f_i_1 = ((int)threadIdx.x);
      kernel_shared[((((((ax0_ax1_f_o_o_1 * 256) + (ax0_ax1_f_o_i_1 * 16)) + ax0_ax1_f_i_1) / 16) * 16) + ((((ax0_ax1_f_o_o_1 * 256) + (ax0_ax1_f_o_i_1 * 16)) + ax0_ax1_f_i_1) % 16))] = kernel[((((((ax0_ax1_f_o_o_1 * 256) + (ax0_ax1_f_o_i_1 * 16)) + ax0_ax1_f_i_1) / 16) * 32) + ((k_o * 16) + ((((ax0_ax1_f_o_o_1 * 256) + (ax0_ax1_f_o_i_1 * 16)) + ax0_ax1_f_i_1) % 16)))];
    }
    __syncthreads();
    #pragma unroll
    for (int k_i = 0; k_i < 16; ++k_i) {
      __align__(16) signed char data_shared_local[4];
      __align__(16) signed char kernel_shared_local[4];
      // stage: data_shared_local
      #pragma unroll
      for (int ax0 = 0; ax0 < 4; ++ax0) {
        for (int ax1 = 0; ax1 < 1; ++ax1) {
          data_shared_local[(ax0 + ax1)] = data_shared[((((m_i_o * 4) + ax0) * 16) + (k_i + ax1))];
        }
      }
      // stage: kernel_shared_local
      #pragma unroll
      for (int ax0_1 = 0; ax0_1 < 4; ++ax0_1) {
        for (int ax1_1 = 0; ax1_1 < 1; ++ax1_1) {
          kernel_shared_local[(ax0_1 + ax1_1)] = kernel_shared[((((n_i_o * 4) + ax0_1) * 16) + (k_i + ax1_1))];
        }
      }
      #pragma unroll
      for (int m_1 = 0; m_1 < 4; ++m_1) {
        #pragma unroll
        for (int n_1 = 0; n_1 < 4; ++n_1) {
          C_local[((m_1 * 4) + n_1)] = (C_local[((m_1 * 4) + n_1)] + (((int)(data_shared_local[m_1])) * ((int)(kernel_shared_local[n_1]))));
        }
      }
    }
    __syncthreads();
  }
  #pragma unroll
  for (int m_i_i = 0; m_i_i < 4; ++m_i_i) {
    #pragma unroll
    for (int n_i_i = 0; n_i_i < 4; ++n_i_i) {
      res[(((((m_o * 64) + (m_i_o * 4)) + m_i_i) * 64) + (((n_o * 64) + (n_i_o * 4)) + n_i_i))] = ((signed char)(min(max(((C_local[((((m_o * 64) + m_i_i) * 4) + ((n_o * 64) + n_i_i))] >> 8) + bias[(((n_o * 64) + (n_i_o * 4)) + n_i_i)]), 0), 127)));
    }
  }
}
