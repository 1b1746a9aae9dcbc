// conv2d_int8_wmma: grid=(1, 1, 1) block=(32, 2, 2) shared_bytes=10240
#include <cuda_fp16.h>
#include <mma.h>
using namespace nvcuda;
#ifndef VTA_CUDA_PRELUDE
#define VTA_CUDA_PRELUDE
__device__ __forceinline__ int vta_floordiv(int a, int b) {
  int q = a / b; return (q * b != a && ((a < 0) != (b < 0))) ? q - 1 : q;
}
__device__ __forceinline__ int vta_floormod(int a, int b) {
  int r = a % b; return (r != 0 && ((r < 0) != (b < 0))) ? r + b : r;
}
#endif

extern "C" __global__ void __launch_bounds__(128) conv2d_int8_wmma(const signed char* __restrict__ data, const signed char* __restrict__ kernel, const int* __restrict__ bias, signed char* __restrict__ res) {
  // stage: res
  const int n_p_f_q_f_o = ((int)blockIdx.y);
  const int o_o = ((int)blockIdx.x);
  const int n_p_f_q_f_i_o = ((int)threadIdx.z);
  const int o_i_o = ((int)threadIdx.y);
  wmma::fragment<wmma::accumulator, 16, 16, 16, int> C_local[2][2];
  // stage: C_local
  #pragma unroll
  for (int m_o = 0; m_o < 2; ++m_o) {
    #pragma unroll
    for (int n_o = 0; n_o < 2; ++n_o) {
      wmma::fill_fragment(C_local[m_o][n_o], 0);
    }
  }
  for (int k_o = 0; k_o < 5; ++k_o) {
    __shared__ __align__(32) signed char im2col_shared[4096];
    __shared__ __align__(32) signed char kernel_pad_shared[2048];
    // stage: im2col_shared
    #pragma unroll
    for (int ax0_ax1_f_o_o_o = 0; ax0_ax1_f_o_o_o < 16; ++ax0_ax1_f_o_o_o) {
      const int ax0_ax1_f_o_o_i = ((int)threadIdx.z);
      const int ax0_ax1_f_o_i = ((int)threadIdx.y);
      const int ax0_ax1_f_i = ((int)threadIdx.x);
      im2col_shared[(((((k_o % 2) * 64) + (((((ax0_ax1_f_o_o_o * 128) + (ax0_ax1_f_o_o_i * 64)) + (ax0_ax1_f_o_i * 32)) + ax0_ax1_f_i) / 32)) * 32) + (((((ax0_ax1_f_o_o_o * 128) + (ax0_ax1_f_o_o_i * 64)) + (ax0_ax1_f_o_i * 32)) + ax0_ax1_f_i) % 32))] = ((((k_o * 32) + (((((ax0_ax1_f_o_o_o * 128) + (ax0_ax1_f_o_o_i * 64)) + (ax0_ax1_f_o_i * 32)) + ax0_ax1_f_i) % 32)) < 144) ? ((((((((((((ax0_ax1_f_o_o_o * 128) + (ax0_ax1_f_o_o_i * 64)) + (ax0_ax1_f_o_i * 32)) + ax0_ax1_f_i) / 32) / 8) % 8) + ((((k_o * 32) + (((((ax0_ax1_f_o_o_o * 128) + (ax0_ax1_f_o_o_i * 64)) + (ax0_ax1_f_o_i * 32)) + ax0_ax1_f_i) % 32)) / 3) % 3)) >= 1) && (((((((((ax0_ax1_f_o_o_o * 128) + (ax0_ax1_f_o_o_i * 64)) + (ax0_ax1_f_o_i * 32)) + ax0_ax1_f_i) / 32) / 8) % 8) + ((((k_o * 32) + (((((ax0_ax1_f_o_o_o * 128) + (ax0_ax1_f_o_o_i * 64)) + (ax0_ax1_f_o_i * 32)) + ax0_ax1_f_i) % 32)) / 3) % 3)) < 9)) && (((((((((ax0_ax1_f_o_o_o * 128) + (ax0_ax1_f_o_o_i * 64)) + (ax0_ax1_f_o_i * 32)) + ax0_ax1_f_i) / 32) % 8) + (((k_o * 32) + (((((ax0_ax1_f_o_o_o * 128) + (ax0_ax1_f_o_o_i * 64)) + (ax0_ax1_f_o_i * 32)) + ax0_ax1_f_i) % 32)) % 3)) >= 1) && ((((((((ax0_ax1_f_o_o_o * 128) + (ax0_ax1_f_o_o_i * 64)) + (ax0_ax1_f_o_i * 32)) + ax0_ax1_f_i) / 32) % 8) + (((k_o * 32) + (((((ax0_ax1_f_o_o_o * 128) + (ax0_ax1_f_o_o_i * 64)) + (ax0_ax1_f_o_i * 32)) + ax0_ax1_f_i) % 32)) % 3)) < 9))) ? data[((((((((((((ax0_ax1_f_o_o_o * 128) + (ax0_ax1_f_o_o_i * 64)) + (ax0_ax1_f_o_i * 32)) + ax0_ax1_f_i) / 32) / 64) * 16) + (((k_o * 32) + (((((ax0_ax1_f_o_o_o * 128) + (ax0_ax1_f_o_o_i * 64)) + (ax0_ax1_f_o_i * 32)) + ax0_ax1_f_i) % 32)) / 9)) * 8) + (((((((((ax0_ax1_f_o_o_o * 128) + (ax0_ax1_f_o_o_i * 64)) + (ax0_ax1_f_o_i * 32)) + ax0_ax1_f_i) / 32) / 8) % 8) + ((((k_o * 32) + (((((ax0_ax1_f_o_o_o * 128) + (ax0_ax1_f_o_o_i * 64)) + (ax0_ax1_f_o_i * 32)) + ax0_ax1_f_i) % 32)) / 3) % 3)) - 1)) * 8) + ((((((((ax0_ax1_f_o_o_o * 128) + (ax0_ax1_f_o_o_i * 64)) + (ax0_ax1_f_o_i * 32)) + ax0_ax1_f_i) / 32) % 8) + (((k_o * 32) + (((((ax0_ax1_f_o_o_o * 128) + (ax0_ax1_f_o_o_i * 64)) + (ax0_ax1_f_o_i * 32)) + ax0_ax1_f_i) % 32)) % 3)) - 1))] : ((signed char)0)) : ((signed char)0));
    }
    // stage: kernel_pad_shared
    #pragma unroll
    for (int ax0_ax1_o_f_o_o_o = 0; ax0_ax1_o_f_o_o_o < 1; ++ax0_ax1_o_f_o_o_o) {
      const int ax0_ax1_o_f_o_o_i = ((int)threadIdx.z);
      const int ax0_ax1_o_f_o_i = ((int)threadIdx.y);
      const int ax0_ax1_o_f_i = ((int)threadIdx.x);
      #pragma unroll
      for (int ax1_i = 0; ax1_i < 16; ++ax1_i) {
        if (((ax0_ax1_o_f_o_o_o * 2) + ax0_ax1_o_f_o_o_i) < 1) {
          kernel_pad_shared[(((((k_o % 2) * 32) + (((((ax0_ax1_o_f_o_o_o * 128) + (ax0_ax1_o_f_o_o_i * 64)) + (ax0_ax1_o_f_o_i * 32)) + ax0_ax1_o_f_i) / 2)) * 32) + (((((((ax0_ax1_o_f_o_o_o * 128) + (ax0_ax1_o_f_o_o_i * 64)) + (ax0_ax1_o_f_o_i * 32)) + ax0_ax1_o_f_i) % 2) * 16) + ax1_i))] = ((((((((ax0_ax1_o_f_o_o_o * 128) + (ax0_ax1_o_f_o_o_i * 64)) + (ax0_ax1_o_f_o_i * 32)) + ax0_ax1_o_f_i) / 2) < 32) && ((((k_o * 32) + ((((((ax0_ax1_o_f_o_o_o * 128) + (ax0_ax1_o_f_o_o_i * 64)) + (ax0_ax1_o_f_o_i * 32)) + ax0_ax1_o_f_i) % 2) * 16)) + ax1_i) < 144)) ? kernel[(((((((ax0_ax1_o_f_o_o_o * 128) + (ax0_ax1_o_f_o_o_i * 64)) + (ax0_ax1_o_f_o_i * 32)) + ax0_ax1_o_f_i) / 2) * 144) + (((k_o * 32) + ((((((ax0_ax1_o_f_o_o_o * 128) + (ax0_ax1_o_f_o_o_i * 64)) + (ax0_ax1_o_f_o_i * 32)) + ax0_ax1_o_f_i) % 2) * 16)) + ax1_i))] : ((signed char)0));
        }
      }
    }
    __syncthreads();
    #pragma unroll
    for (int k_i_o = 0; k_i_o < 2; ++k_i_o) {
      wmma::fragment<wmma::matrix_a, 16, 16, 16, signed char, wmma::row_major> im2col_shared_local[2][1];
      wmma::fragment<wmma::matrix_b, 16, 16, 16, signed char, wmma::col_major> kernel_pad_shared_local[2][1];
      // stage: im2col_shared_local
      #pragma unroll
      for (int ax0_o = 0; ax0_o < 2; ++ax0_o) {
        wmma::load_matrix_sync(im2col_shared_local[ax0_o][0], &im2col_shared[(((((k_o % 2) * 64) + ((n_p_f_q_f_i_o * 32) + (ax0_o * 16))) * 32) + (k_i_o * 16))], 32);
      }
      // stage: kernel_pad_shared_local
      #pragma unroll
      for (int ax0_o_1 = 0; ax0_o_1 < 2; ++ax0_o_1) {
        wmma::load_matrix_sync(kernel_pad_shared_local[ax0_o_1][0], &kernel_pad_shared[(((((k_o % 2) * 32) + (ax0_o_1 * 16)) * 32) + (k_i_o * 16))], 32);
      }
      #pragma unroll
      for (int m_o_1 = 0; m_o_1 < 2; ++m_o_1) {
        #pragma unroll
        for (int n_o_1 = 0; n_o_1 < 2; ++n_o_1) {
          wmma::mma_sync(C_local[m_o_1][n_o_1], im2col_shared_local[m_o_1][0], kernel_pad_shared_local[n_o_1][0], C_local[m_o_1][n_o_1]);
        }
      }
    }
  }
  #pragma unroll
  for (int n_p_f_q_f_i_i_o = 0; n_p_f_q_f_i_i_o < 2; ++n_p_f_q_f_i_i_o) {
    #pragma unroll
    for (int o_i_i_o = 0; o_i_i_o < 2; ++o_i_i_o) {
      __shared__ __align__(32) int C_local_warp[1024];
      // stage: C_local_warp
      wmma::store_matrix_sync(&C_local_warp[((((n_p_f_q_f_i_o * 2) + o_i_o) * 16) * 16)], C_local[n_p_f_q_f_i_i_o][o_i_i_o], 16, wmma::mem_row_major);
      __syncthreads();
      #pragma unroll
      for (int n_p_f_q_f_i_i_i_o_i_i_i_f_o = 0; n_p_f_q_f_i_i_i_o_i_i_i_f_o < 8; ++n_p_f_q_f_i_i_i_o_i_i_i_f_o) {
        const int n_p_f_q_f_i_i_i_o_i_i_i_f_i = ((int)threadIdx.x);
        if (((((o_o * 64) + (o_i_o * 32)) + (o_i_i_o * 16)) + (((n_p_f_q_f_i_i_i_o_i_i_i_f_o * 32) + n_p_f_q_f_i_i_i_o_i_i_i_f_i) % 16)) < 32) {
          res[((((((((((((n_p_f_q_f_o * 64) + (n_p_f_q_f_i_o * 32)) + (n_p_f_q_f_i_i_o * 16)) + (((n_p_f_q_f_i_i_i_o_i_i_i_f_o * 32) + n_p_f_q_f_i_i_i_o_i_i_i_f_i) / 16)) / 8) / 8) * 32) + ((((o_o * 64) + (o_i_o * 32)) + (o_i_i_o * 16)) + (((n_p_f_q_f_i_i_i_o_i_i_i_f_o * 32) + n_p_f_q_f_i_i_i_o_i_i_i_f_i) % 16))) * 8) + ((((((n_p_f_q_f_o * 64) + (n_p_f_q_f_i_o * 32)) + (n_p_f_q_f_i_i_o * 16)) + (((n_p_f_q_f_i_i_i_o_i_i_i_f_o * 32) + n_p_f_q_f_i_i_i_o_i_i_i_f_i) / 16)) / 8) % 8)) * 8) + (((((n_p_f_q_f_o * 64) + (n_p_f_q_f_i_o * 32)) + (n_p_f_q_f_i_i_o * 16)) + (((n_p_f_q_f_i_i_i_o_i_i_i_f_o * 32) + n_p_f_q_f_i_i_i_o_i_i_i_f_i) / 16)) % 8))] = ((signed char)(min(max(((C_local_warp[((((((n_p_f_q_f_i_o * 2) + o_i_o) * 16) + (((((((((((n_p_f_q_f_o * 64) + (n_p_f_q_f_i_o * 32)) + (n_p_f_q_f_i_i_o * 16)) + (((n_p_f_q_f_i_i_i_o_i_i_i_f_o * 32) + n_p_f_q_f_i_i_i_o_i_i_i_f_i) / 16)) / 8) / 8) * 64) + (((((((n_p_f_q_f_o * 64) + (n_p_f_q_f_i_o * 32)) + (n_p_f_q_f_i_i_o * 16)) + (((n_p_f_q_f_i_i_i_o_i_i_i_f_o * 32) + n_p_f_q_f_i_i_i_o_i_i_i_f_i) / 16)) / 8) % 8) * 8)) + (((((n_p_f_q_f_o * 64) + (n_p_f_q_f_i_o * 32)) + (n_p_f_q_f_i_i_o * 16)) + (((n_p_f_q_f_i_i_i_o_i_i_i_f_o * 32) + n_p_f_q_f_i_i_i_o_i_i_i_f_i) / 16)) % 8)) - (n_p_f_q_f_i_o * 32)) - (n_p_f_q_f_i_i_o * 16))) * 16) + (((o_o * 64) + (o_i_o * 32)) + (((n_p_f_q_f_i_i_i_o_i_i_i_f_o * 32) + n_p_f_q_f_i_i_i_o_i_i_i_f_i) % 16)))] >> 8) + bias[((((o_o * 64) + (o_i_o * 32)) + (o_i_i_o * 16)) + (((n_p_f_q_f_i_i_i_o_i_i_i_f_o * 32) + n_p_f_q_f_i_i_i_o_i_i_i_f_i) % 16))]), 0), 127)));
        }
      }
      __syncthreads();
    }
  }
}
