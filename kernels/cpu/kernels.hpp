// Everything the CPU kernels offer, for code that wants one include.
#pragma once

#include "kernels/cpu/bandwidth.hpp"    // measure_read_bandwidth_gbs
#include "kernels/cpu/elementwise.hpp"  // rms_norm, rope, silu_mul, add_inplace, dot_f32, axpy_f32, softmax_inplace
#include "kernels/cpu/isa.hpp"          // isa_name, Isa
#include "kernels/cpu/matmul.hpp"       // matmul, matmul_with_isa
#include "kernels/cpu/quantize.hpp"     // dequantize_row, quantize_row_reference, supports_type
#include "kernels/cpu/thread_pool.hpp"  // ThreadPool
