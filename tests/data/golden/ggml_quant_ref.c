/* Reference blocks from ggml itself (linked against llama.cpp's libggml-base): for
 * Q2_K, Q3_K, Q5_K, IQ4_NL and IQ4_XS, fixed pseudo-random rows quantized with
 * ggml_quantize_chunk (what llama-quantize calls, without an importance matrix) and
 * dequantized with ggml's to_float. Prints JSON on stdout; gen_ggml_quant_blocks.sh
 * builds and runs it. Only ggml's public API (ggml.h) is used. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "ggml.h"

enum { kRows = 3, kPerRow = 512 };

static uint64_t state = 0x2545F4914F6CDD1Dull;
static double uniform01(void) {  /* xorshift64*, 53 bits */
  state ^= state >> 12;
  state ^= state << 25;
  state ^= state >> 27;
  return (double)((state * 0x2545F4914F6CDD1Dull) >> 11) / 9007199254740992.0;
}
static double normal(void) {
  const double u = uniform01() + 1e-300, v = uniform01();
  return sqrt(-2.0 * log(u)) * cos(6.283185307179586 * v);
}

/* Row 0: N(0, 1). Row 1: N(0, 0.02) like trained weights. Row 2: N(0, 1) with a few
 * outliers of 8 and an all-zero run of 64 elements. */
static void make_rows(float* x) {
  for (int r = 0; r < kRows; ++r)
    for (int i = 0; i < kPerRow; ++i) {
      double v = normal() * (r == 1 ? 0.02 : 1.0);
      if (r == 2 && i % 97 == 5) v = v > 0 ? 8.0 : -8.0;
      if (r == 2 && i >= 256 && i < 320) v = 0.0;
      x[r * kPerRow + i] = (float)v;
    }
}

static void print_floats(const float* v, int n) {
  printf("[");
  for (int i = 0; i < n; ++i) printf("%s%.9g", i ? "," : "", (double)v[i]);
  printf("]");
}

int main(void) {
  const enum ggml_type types[] = {GGML_TYPE_Q2_K, GGML_TYPE_Q3_K, GGML_TYPE_Q5_K, GGML_TYPE_IQ4_NL, GGML_TYPE_IQ4_XS};
  const int n_types = (int)(sizeof types / sizeof types[0]);
  float x[kRows * kPerRow], y[kRows * kPerRow];
  make_rows(x);
  printf("{\"generator\":\"tests/data/golden/gen_ggml_quant_blocks.sh\",\"rows\":%d,\"n_per_row\":%d,\"input\":",
         kRows, kPerRow);
  print_floats(x, kRows * kPerRow);
  printf(",\"types\":[");
  for (int t = 0; t < n_types; ++t) {
    const struct ggml_type_traits* tr = ggml_get_type_traits(types[t]);
    const size_t row_size = ggml_row_size(types[t], kPerRow);
    uint8_t* q = malloc(row_size * kRows);
    const size_t written = ggml_quantize_chunk(types[t], x, q, 0, kRows, kPerRow, NULL);
    if (written != row_size * kRows) {
      fprintf(stderr, "%s: wrote %zu bytes, expected %zu\n", tr->type_name, written, row_size * kRows);
      return 1;
    }
    for (int r = 0; r < kRows; ++r) tr->to_float(q + r * row_size, y + r * kPerRow, kPerRow);
    printf("%s{\"ggml_type\":%d,\"name\":\"%s\",\"blocks_hex\":\"", t ? "," : "", (int)types[t], tr->type_name);
    for (size_t i = 0; i < row_size * kRows; ++i) printf("%02x", q[i]);
    printf("\",\"dequantized\":");
    print_floats(y, kRows * kPerRow);
    printf("}");
    free(q);
  }
  printf("]}\n");
  ggml_quantize_free();
  return 0;
}
