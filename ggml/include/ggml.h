// ggml.h - tensors, types, ops and compute graphs.
//
// A tensor has a type, ne[4] (elements per dim, innermost first) and nb[4] (byte strides),
// so views, permutes and transposes cost nothing until ggml_cont. Op builders do not compute:
// they record a node. A graph is built from an output tensor and computed by a backend
// (ggml-backend.h), or directly on the CPU with ggml_graph_compute_with_ctx.
//
//   ggml_init_params ip = { 16*1024*1024, nullptr, false };
//   ggml_context * ctx = ggml_init(ip);
//   ggml_tensor * a = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, 4096, 4096);  // [K=4096, M=4096]
//   ggml_tensor * x = ggml_new_tensor_1d(ctx, GGML_TYPE_F32, 4096);        // [K]
//   ggml_tensor * y = ggml_mul_mat(ctx, a, x);                             // [M]
//   ggml_cgraph * gf = ggml_new_graph(ctx);
//   ggml_build_forward_expand(gf, y);
//   ggml_graph_compute_with_ctx(ctx, gf, /*n_threads=*/2);
//   ggml_free(ctx);
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdio>

#define GGML_MAX_DIMS 4
#define GGML_MAX_SRC 4
#define GGML_MAX_OP_PARAMS 64  // bytes
#define GGML_MAX_NAME 64
#define GGML_DEFAULT_GRAPH_SIZE 2048
#define GGML_MEM_ALIGN 16

// ---------------------------------------------------------------------------------------------
// Bugs (not bad input) abort with file:line.
[[noreturn]] void ggml_abort(const char * file, int line, const char * fmt, ...);
#define GGML_ABORT(...) ggml_abort(__FILE__, __LINE__, __VA_ARGS__)
#define GGML_ASSERT(x) \
    do { if (!(x)) ggml_abort(__FILE__, __LINE__, "GGML_ASSERT(%s) failed", #x); } while (0)

// ---------------------------------------------------------------------------------------------
// Types. Numbering is ggml's, so GGUF files from the wider ecosystem load.
enum ggml_type : int32_t {
    GGML_TYPE_F32  = 0,
    GGML_TYPE_F16  = 1,
    GGML_TYPE_Q4_0 = 2,
    GGML_TYPE_Q4_1 = 3,
    GGML_TYPE_Q5_0 = 6,
    GGML_TYPE_Q5_1 = 7,
    GGML_TYPE_Q8_0 = 8,
    GGML_TYPE_Q8_1 = 9,
    GGML_TYPE_Q2_K = 10,
    GGML_TYPE_Q3_K = 11,
    GGML_TYPE_Q4_K = 12,
    GGML_TYPE_Q5_K = 13,
    GGML_TYPE_Q6_K = 14,
    GGML_TYPE_Q8_K = 15,
    GGML_TYPE_I32  = 26,
    GGML_TYPE_COUNT = 39,  // table size; only the types above are supported
};

typedef uint16_t ggml_fp16_t;

#define QK8_0 32
struct block_q8_0 {
    ggml_fp16_t d;       // delta = max|x| / 127
    int8_t      qs[QK8_0]; // quants: round(x / d)
};
static_assert(sizeof(block_q8_0) == 34, "wrong q8_0 block size");

#define QK8_1 32
struct block_q8_1 {
    ggml_fp16_t d;       // delta
    ggml_fp16_t s;       // d * sum(qs)
    int8_t      qs[QK8_1];
};
static_assert(sizeof(block_q8_1) == 36, "wrong q8_1 block size");

// ---- 32-weight blocks (ggml's "legacy" quants). Weight j of a block: qs[j % 16] holds j in its
// low nibble for j < 16 and in its high nibble for j >= 16; q5's 5th bit of weight j is bit j of qh.
#define QK4_0 32
struct block_q4_0 {
    ggml_fp16_t d;             // delta: x = d * (q - 8), q in [0, 15]
    uint8_t     qs[QK4_0 / 2]; // nibbles
};
static_assert(sizeof(block_q4_0) == 18, "wrong q4_0 block size");

#define QK4_1 32
struct block_q4_1 {
    ggml_fp16_t d;             // delta: x = d * q + m, q in [0, 15]
    ggml_fp16_t m;             // min
    uint8_t     qs[QK4_1 / 2]; // nibbles
};
static_assert(sizeof(block_q4_1) == 20, "wrong q4_1 block size");

#define QK5_0 32
struct block_q5_0 {
    ggml_fp16_t d;             // delta: x = d * (q - 16), q in [0, 31]
    uint8_t     qh[4];         // 5th bits, little-endian uint32
    uint8_t     qs[QK5_0 / 2]; // low 4 bits
};
static_assert(sizeof(block_q5_0) == 22, "wrong q5_0 block size");

#define QK5_1 32
struct block_q5_1 {
    ggml_fp16_t d;             // delta: x = d * q + m, q in [0, 31]
    ggml_fp16_t m;             // min
    uint8_t     qh[4];         // 5th bits
    uint8_t     qs[QK5_1 / 2]; // low 4 bits
};
static_assert(sizeof(block_q5_1) == 24, "wrong q5_1 block size");

// ---- K-quants: 256-weight super-blocks of 16 or 32-weight sub-blocks with quantized scales.
#define QK_K 256
#define K_SCALE_SIZE 12
struct block_q2_K {            // 2.625 bits per weight
    uint8_t     scales[QK_K / 16]; // 16 sub-blocks of 16: scale (low 4 bits) and min (high 4 bits)
    uint8_t     qs[QK_K / 4];      // 2-bit quants
    ggml_fp16_t d;                 // super-block scale of the scales
    ggml_fp16_t dmin;              // super-block scale of the mins
};
static_assert(sizeof(block_q2_K) == 84, "wrong q2_K block size");

struct block_q3_K {            // 3.4375 bits per weight
    uint8_t     hmask[QK_K / 8];   // high bit of each 3-bit quant
    uint8_t     qs[QK_K / 4];      // low 2 bits
    uint8_t     scales[12];        // 16 6-bit scales
    ggml_fp16_t d;                 // super-block scale
};
static_assert(sizeof(block_q3_K) == 110, "wrong q3_K block size");

struct block_q4_K {            // 4.5 bits per weight
    ggml_fp16_t d;                    // super-block scale of the scales
    ggml_fp16_t dmin;                 // super-block scale of the mins
    uint8_t     scales[K_SCALE_SIZE]; // 8 sub-blocks of 32: 6-bit scales and mins
    uint8_t     qs[QK_K / 2];         // 4-bit quants
};
static_assert(sizeof(block_q4_K) == 144, "wrong q4_K block size");

struct block_q5_K {            // 5.5 bits per weight
    ggml_fp16_t d;
    ggml_fp16_t dmin;
    uint8_t     scales[K_SCALE_SIZE]; // as q4_K
    uint8_t     qh[QK_K / 8];         // 5th bits
    uint8_t     qs[QK_K / 2];         // low 4 bits
};
static_assert(sizeof(block_q5_K) == 176, "wrong q5_K block size");

struct block_q6_K {            // 6.5625 bits per weight
    uint8_t     ql[QK_K / 2];      // low 4 bits
    uint8_t     qh[QK_K / 4];      // high 2 bits
    int8_t      scales[QK_K / 16]; // 16 sub-blocks of 16: 8-bit scales
    ggml_fp16_t d;                 // super-block scale
};
static_assert(sizeof(block_q6_K) == 210, "wrong q6_K block size");

struct block_q8_K {            // activations of the K-quant dots (CPU)
    float   d;                 // delta
    int8_t  qs[QK_K];          // quants
    int16_t bsums[QK_K / 16];  // sums of each group of 16 quants
};
static_assert(sizeof(block_q8_K) == 292, "wrong q8_K block size");

float       ggml_fp16_to_fp32(ggml_fp16_t h);
ggml_fp16_t ggml_fp32_to_fp16(float f);  // round to nearest even
void        ggml_fp16_to_fp32_row(const ggml_fp16_t * x, float * y, int64_t n);
void        ggml_fp32_to_fp16_row(const float * x, ggml_fp16_t * y, int64_t n);

// Per-type traits. to_float/from_float convert n values (n a multiple of blck_size).
// vec_dot computes sum(x[i]*y[i]) over n values with x of this type and y of vec_dot_type.
typedef void (*ggml_to_float_t)(const void * x, float * y, int64_t n);
typedef void (*ggml_from_float_t)(const float * x, void * y, int64_t n);
typedef void (*ggml_vec_dot_t)(int64_t n, float * s, const void * x, const void * y);

struct ggml_type_traits {
    const char *      type_name;    // "f32", "f16", "q8_0", "q8_1", "i32"
    int64_t           blck_size;    // elements per block
    size_t            type_size;    // bytes per block
    bool              is_quantized;
    bool              supported;    // false for ggml types this library does not implement
    ggml_to_float_t   to_float;     // reference dequantize / convert
    ggml_from_float_t from_float_ref; // reference quantize / convert (plain C++)
};
const ggml_type_traits * ggml_get_type_traits(ggml_type type);
bool         ggml_type_is_valid(int32_t type);  // in range and supported
const char * ggml_type_name(ggml_type type);
int64_t      ggml_blck_size(ggml_type type);
size_t       ggml_type_size(ggml_type type);
size_t       ggml_row_size(ggml_type type, int64_t ne);  // bytes of ne elements (ne % blck == 0)
bool         ggml_is_quantized(ggml_type type);

// Reference quantizers (plain C++, bit-identical to ggml's reference code: a file quantized here
// equals one quantized by llama.cpp's quantize without an importance matrix). k: a multiple of
// the block size. q8_0/q8_1 in ggml-quants.cpp, q4_0..q5_1 in ggml-quants-legacy.cpp, the
// K-quants (with their scale searches) in ggml-quants-k.cpp.
void quantize_row_q4_0_ref(const float * x, block_q4_0 * y, int64_t k);
void quantize_row_q4_1_ref(const float * x, block_q4_1 * y, int64_t k);
void quantize_row_q5_0_ref(const float * x, block_q5_0 * y, int64_t k);
void quantize_row_q5_1_ref(const float * x, block_q5_1 * y, int64_t k);
void quantize_row_q8_0_ref(const float * x, block_q8_0 * y, int64_t k);
void quantize_row_q8_1_ref(const float * x, block_q8_1 * y, int64_t k);
void quantize_row_q2_K_ref(const float * x, block_q2_K * y, int64_t k);
void quantize_row_q3_K_ref(const float * x, block_q3_K * y, int64_t k);
void quantize_row_q4_K_ref(const float * x, block_q4_K * y, int64_t k);
void quantize_row_q5_K_ref(const float * x, block_q5_K * y, int64_t k);
void quantize_row_q6_K_ref(const float * x, block_q6_K * y, int64_t k);
void quantize_row_q8_K_ref(const float * x, block_q8_K * y, int64_t k);
void dequantize_row_q4_0(const block_q4_0 * x, float * y, int64_t k);
void dequantize_row_q4_1(const block_q4_1 * x, float * y, int64_t k);
void dequantize_row_q5_0(const block_q5_0 * x, float * y, int64_t k);
void dequantize_row_q5_1(const block_q5_1 * x, float * y, int64_t k);
void dequantize_row_q8_0(const block_q8_0 * x, float * y, int64_t k);
void dequantize_row_q8_1(const block_q8_1 * x, float * y, int64_t k);
void dequantize_row_q2_K(const block_q2_K * x, float * y, int64_t k);
void dequantize_row_q3_K(const block_q3_K * x, float * y, int64_t k);
void dequantize_row_q4_K(const block_q4_K * x, float * y, int64_t k);
void dequantize_row_q5_K(const block_q5_K * x, float * y, int64_t k);
void dequantize_row_q6_K(const block_q6_K * x, float * y, int64_t k);
void dequantize_row_q8_K(const block_q8_K * x, float * y, int64_t k);

// ---------------------------------------------------------------------------------------------
// Ops (the registry is ggml-ops.def).
enum ggml_op : int32_t {
#define GGML_OP(name, sym, nsrc) GGML_OP_##name,
#include "ggml-ops.def"
#undef GGML_OP
    GGML_OP_COUNT,
};
const char * ggml_op_name(ggml_op op);     // "MUL_MAT"
const char * ggml_op_symbol(ggml_op op);   // "mul_mat"
int          ggml_op_n_src(ggml_op op);

enum ggml_rope_mode : int32_t {
    GGML_ROPE_TYPE_NORMAL = 0,  // Llama (GGUF/ggml): rotate adjacent pairs (x[2i], x[2i+1])
    GGML_ROPE_TYPE_NEOX   = 2,  // NeoX/HF: rotate (x[i], x[i + n_dims/2])
};

enum ggml_tensor_flag : int32_t {
    GGML_TENSOR_FLAG_INPUT  = 1,  // set by the caller before compute; allocator gives it its own slot
    GGML_TENSOR_FLAG_OUTPUT = 2,  // read after compute; never overwritten or reused
    GGML_TENSOR_FLAG_PARAM  = 4,  // a weight
};

struct ggml_backend_buffer;

struct ggml_tensor {
    ggml_type type;
    ggml_backend_buffer * buffer;  // owning backend buffer, nullptr for context memory

    int64_t ne[GGML_MAX_DIMS];     // elements per dim, innermost first
    size_t  nb[GGML_MAX_DIMS];     // byte strides: nb[0] = type_size, nb[1] = nb[0]*ne[0]/blck, ...

    ggml_op op;
    int32_t op_params[GGML_MAX_OP_PARAMS / sizeof(int32_t)];
    int32_t flags;

    ggml_tensor * src[GGML_MAX_SRC];

    ggml_tensor * view_src;        // for views: the tensor whose memory this aliases
    size_t        view_offs;       // byte offset into view_src's data

    void * data;
    char   name[GGML_MAX_NAME];
    void * extra;                  // backend specific
};

// Shape helpers.
int64_t ggml_nelements(const ggml_tensor * t);
int64_t ggml_nrows(const ggml_tensor * t);          // ne[1]*ne[2]*ne[3]
size_t  ggml_nbytes(const ggml_tensor * t);         // bytes spanned, honouring strides
int     ggml_n_dims(const ggml_tensor * t);         // 1..4 (trailing 1s dropped)
bool    ggml_is_contiguous(const ggml_tensor * t);  // dense, row-major in ne order
bool    ggml_is_contiguous_rows(const ggml_tensor * t); // nb[0] == type_size (each row dense)
bool    ggml_is_transposed(const ggml_tensor * t);
bool    ggml_is_permuted(const ggml_tensor * t);
bool    ggml_is_view_op(ggml_op op);
bool    ggml_are_same_shape(const ggml_tensor * a, const ggml_tensor * b);
bool    ggml_can_repeat(const ggml_tensor * small, const ggml_tensor * big); // big.ne[i] % small.ne[i] == 0
const char * ggml_get_name(const ggml_tensor * t);
ggml_tensor * ggml_set_name(ggml_tensor * t, const char * name);
ggml_tensor * ggml_format_name(ggml_tensor * t, const char * fmt, ...);
void    ggml_set_input(ggml_tensor * t);
void    ggml_set_output(ggml_tensor * t);
void    ggml_set_param(ggml_tensor * t);

// Typed op params.
inline int32_t ggml_get_op_params_i32(const ggml_tensor * t, int i) { return t->op_params[i]; }
inline float   ggml_get_op_params_f32(const ggml_tensor * t, int i) {
    float f; __builtin_memcpy(&f, &t->op_params[i], sizeof(f)); return f;
}
inline void ggml_set_op_params_i32(ggml_tensor * t, int i, int32_t v) { t->op_params[i] = v; }
inline void ggml_set_op_params_f32(ggml_tensor * t, int i, float v) { __builtin_memcpy(&t->op_params[i], &v, sizeof(v)); }

// Element access for tests and tools (contiguous or not; converts f16/i32; q8 read-only via dequant).
float   ggml_get_f32_nd(const ggml_tensor * t, int64_t i0, int64_t i1, int64_t i2, int64_t i3);
void    ggml_set_f32_nd(ggml_tensor * t, int64_t i0, int64_t i1, int64_t i2, int64_t i3, float v);
int32_t ggml_get_i32_1d(const ggml_tensor * t, int64_t i);

// ---------------------------------------------------------------------------------------------
// Context: owns tensor headers (and their data unless no_alloc).
struct ggml_init_params {
    size_t mem_size;    // bytes for tensor headers, graphs and (unless no_alloc) data
    void * mem_buffer;  // nullptr: allocated and owned by the context
    bool   no_alloc;    // true: tensors get no data (a backend buffer / the allocator places them)
};
struct ggml_context;
ggml_context * ggml_init(ggml_init_params params);
void           ggml_free(ggml_context * ctx);
size_t         ggml_used_mem(const ggml_context * ctx);
size_t         ggml_tensor_overhead();             // bytes of context memory per tensor header
size_t         ggml_graph_overhead_custom(size_t size);
bool           ggml_get_no_alloc(const ggml_context * ctx);
void           ggml_set_no_alloc(ggml_context * ctx, bool no_alloc);
ggml_tensor *  ggml_get_first_tensor(const ggml_context * ctx);
ggml_tensor *  ggml_get_next_tensor(const ggml_context * ctx, ggml_tensor * t);
ggml_tensor *  ggml_get_tensor(const ggml_context * ctx, const char * name);

ggml_tensor * ggml_new_tensor(ggml_context * ctx, ggml_type type, int n_dims, const int64_t * ne);
ggml_tensor * ggml_new_tensor_1d(ggml_context * ctx, ggml_type type, int64_t ne0);
ggml_tensor * ggml_new_tensor_2d(ggml_context * ctx, ggml_type type, int64_t ne0, int64_t ne1);
ggml_tensor * ggml_new_tensor_3d(ggml_context * ctx, ggml_type type, int64_t ne0, int64_t ne1, int64_t ne2);
ggml_tensor * ggml_new_tensor_4d(ggml_context * ctx, ggml_type type, int64_t ne0, int64_t ne1, int64_t ne2, int64_t ne3);
ggml_tensor * ggml_dup_tensor(ggml_context * ctx, const ggml_tensor * src);  // same type/shape, new data
ggml_tensor * ggml_view_tensor(ggml_context * ctx, ggml_tensor * src);       // same type/shape/strides, aliased

// ---------------------------------------------------------------------------------------------
// Op builders. Shapes in ne order. Result types are f32 unless stated.
ggml_tensor * ggml_dup(ggml_context * ctx, ggml_tensor * a);                  // contiguous copy
ggml_tensor * ggml_add(ggml_context * ctx, ggml_tensor * a, ggml_tensor * b); // b repeats over a
ggml_tensor * ggml_mul(ggml_context * ctx, ggml_tensor * a, ggml_tensor * b); // b repeats over a
ggml_tensor * ggml_scale(ggml_context * ctx, ggml_tensor * a, float s);
ggml_tensor * ggml_cpy(ggml_context * ctx, ggml_tensor * a, ggml_tensor * b); // a -> b (b's type); returns a view of b
ggml_tensor * ggml_cont(ggml_context * ctx, ggml_tensor * a);
ggml_tensor * ggml_cont_2d(ggml_context * ctx, ggml_tensor * a, int64_t ne0, int64_t ne1);
ggml_tensor * ggml_cont_4d(ggml_context * ctx, ggml_tensor * a, int64_t ne0, int64_t ne1, int64_t ne2, int64_t ne3);

ggml_tensor * ggml_reshape(ggml_context * ctx, ggml_tensor * a, ggml_tensor * shape_like);
ggml_tensor * ggml_reshape_1d(ggml_context * ctx, ggml_tensor * a, int64_t ne0);
ggml_tensor * ggml_reshape_2d(ggml_context * ctx, ggml_tensor * a, int64_t ne0, int64_t ne1);
ggml_tensor * ggml_reshape_3d(ggml_context * ctx, ggml_tensor * a, int64_t ne0, int64_t ne1, int64_t ne2);
ggml_tensor * ggml_reshape_4d(ggml_context * ctx, ggml_tensor * a, int64_t ne0, int64_t ne1, int64_t ne2, int64_t ne3);
// Views: strides nbN and offset in bytes.
ggml_tensor * ggml_view_1d(ggml_context * ctx, ggml_tensor * a, int64_t ne0, size_t offset);
ggml_tensor * ggml_view_2d(ggml_context * ctx, ggml_tensor * a, int64_t ne0, int64_t ne1, size_t nb1, size_t offset);
ggml_tensor * ggml_view_3d(ggml_context * ctx, ggml_tensor * a, int64_t ne0, int64_t ne1, int64_t ne2,
                           size_t nb1, size_t nb2, size_t offset);
ggml_tensor * ggml_view_4d(ggml_context * ctx, ggml_tensor * a, int64_t ne0, int64_t ne1, int64_t ne2, int64_t ne3,
                           size_t nb1, size_t nb2, size_t nb3, size_t offset);
// permute: axis i of a goes to position axisi of the result (ggml semantics).
ggml_tensor * ggml_permute(ggml_context * ctx, ggml_tensor * a, int axis0, int axis1, int axis2, int axis3);
ggml_tensor * ggml_transpose(ggml_context * ctx, ggml_tensor * a);  // swap dims 0 and 1

// a: [n_embd, n_rows] f32/f16/q8_0, b: i32 [n] (or [n, ne1b]) -> f32 [n_embd, n, ...]
ggml_tensor * ggml_get_rows(ggml_context * ctx, ggml_tensor * a, ggml_tensor * b);
// Scatter rows: a[:, c[i], i2, i3] = b[:, i, i2, i3]; the result is a view of a (like ggml_cpy).
//   a: f32/f16 [ne0, R, ne2, ne3] (any strides: a transposed view scatters columns), or q8_0/q4_0 with dense
//   rows of whole blocks (each row is quantized on write, as the type's reference quantizer does),
//   b: f32 [ne0, n, ne2, ne3],
//   c: i32 [n] contiguous, indices distinct and in [0, R). KV-cache writes at the step's cells: the graph
//   keeps its pointers when only c's contents change from step to step.
ggml_tensor * ggml_set_rows(ggml_context * ctx, ggml_tensor * a, ggml_tensor * b, ggml_tensor * c);
// Set a[i0, i1] = -inf where i0 > n_past + i1.
ggml_tensor * ggml_diag_mask_inf(ggml_context * ctx, ggml_tensor * a, int n_past);
// softmax over ne0 of (a*scale + mask); mask f32/f16 [ne0, >=ne1] broadcast over dims 2,3.
ggml_tensor * ggml_soft_max(ggml_context * ctx, ggml_tensor * a);
ggml_tensor * ggml_soft_max_ext(ggml_context * ctx, ggml_tensor * a, ggml_tensor * mask, float scale);
// softmax with built-in causal masking: column i0 > n_past + i1 is excluded.
ggml_tensor * ggml_soft_max_causal(ggml_context * ctx, ggml_tensor * a, float scale, int n_past);
// a: [head_dim, n_head, n_tokens, 1], pos: i32 [n_tokens]; freq_factors: optional f32 [n_dims/2]
// theta_i = pos * freq_scale * base^(-2i/n_dims) / freq_factors[i]; dims >= n_dims pass through.
ggml_tensor * ggml_rope_ext(ggml_context * ctx, ggml_tensor * a, ggml_tensor * pos, ggml_tensor * freq_factors,
                            int n_dims, int mode, float freq_base, float freq_scale);
ggml_tensor * ggml_rms_norm(ggml_context * ctx, ggml_tensor * a, float eps);  // over ne0
ggml_tensor * ggml_silu(ggml_context * ctx, ggml_tensor * a);
ggml_tensor * ggml_swiglu_split(ggml_context * ctx, ggml_tensor * a, ggml_tensor * b);  // silu(a) * b
// a: [K, M, A2, A3] (f32/f16/q8_0), b: [K, N, B2, B3] f32 with B2 % A2 == 0, B3 % A3 == 0
//   -> f32 [M, N, B2, B3]. Each b row is dotted with each a row (a^T b).
ggml_tensor * ggml_mul_mat(ggml_context * ctx, ggml_tensor * a, ggml_tensor * b);
ggml_tensor * ggml_argmax(ggml_context * ctx, ggml_tensor * a);  // f32 [n, rows] -> i32 [rows]
// Fused attention, ggml layout:
//   q: f32 [head_dim, n_tokens, n_head, 1]; k: f32/f16/q8_0/q4_0 [head_dim, n_kv, n_head_kv, 1];
//   v: f32/f16/q8_0/q4_0 [head_dim, n_kv, n_head_kv, 1] (K and V types independent; quantized rows are
//   read in place, head_dim a multiple of the block); mask: optional f32/f16 [n_kv, >=n_tokens]
//   (nullptr: no mask); n_head % n_head_kv == 0.
//   -> f32 [head_dim, n_head, n_tokens, 1] (ready to reshape to [n_embd, n_tokens]).
// params: f32 scale, i32 causal_n_past (-1: none; else key j is visible to query i iff j <= n_past + i)
ggml_tensor * ggml_flash_attn_ext(ggml_context * ctx, ggml_tensor * q, ggml_tensor * k, ggml_tensor * v,
                                  ggml_tensor * mask, float scale, int causal_n_past);
// Hints for the kernels (i32 op params 2 and 3), not a change of the result: the queries come from n_seq
// sequences (default 1), and with shared = true the keys are a cache shared by several sequences, so that each
// query sees only its own sequence's few keys among the n_kv (its mask row is mostly -inf). Kernels then find
// each query's visible key range from the mask and skip the rest, per query when n_seq is large.
void          ggml_flash_attn_ext_set_seqs(ggml_tensor * fa, int n_seq, bool shared);
// The attention mask of a batch from its KV cache cells: cells i32 [3, n_kv] (each cell's position, then its
// sequence bits 0..31 and 32..63), seq and pos i32 [n_tokens] (each token's sequence id 0..63 and position).
//   -> type (f16 or f32) [n_kv, n_tokens]: 0 where token i may see cell j (the cell holds sequence seq[i] at a
//   position <= pos[i]), -inf elsewhere.
// What crosses to a GPU per step is then 12 bytes a cell and 8 a token instead of the whole mask (a 64-sequence
// decode at 40k cells: 0.5 MB against 5.2 MB, and no n_kv x n_tokens pass on the host).
ggml_tensor * ggml_kq_mask(ggml_context * ctx, ggml_tensor * cells, ggml_tensor * seq, ggml_tensor * pos,
                           ggml_type type);
// The element-wise sum of a (f32, contiguous) over the ranks of comm (ggml-backend.h): every rank's graph has one
// such node with its own rank, run at the same time (a thread or process per rank); each rank's result is the same
// sum, added in rank order. The tensor-parallel split (llm, -sm row) reduces its partial projections this way.
struct ggml_comm;
ggml_tensor * ggml_all_reduce(ggml_context * ctx, ggml_tensor * a, ggml_comm * comm, int rank);
ggml_comm *   ggml_all_reduce_comm(const ggml_tensor * t);  // of an ALL_REDUCE node

// ---------------------------------------------------------------------------------------------
// Graphs.
struct ggml_cgraph;
ggml_cgraph * ggml_new_graph(ggml_context * ctx);                    // GGML_DEFAULT_GRAPH_SIZE nodes
ggml_cgraph * ggml_new_graph_custom(ggml_context * ctx, size_t size);
void          ggml_build_forward_expand(ggml_cgraph * gf, ggml_tensor * t);  // appends t and its ancestors
int           ggml_graph_n_nodes(const ggml_cgraph * gf);
ggml_tensor * ggml_graph_node(const ggml_cgraph * gf, int i);        // i < 0 counts from the end
int           ggml_graph_n_leafs(const ggml_cgraph * gf);
ggml_tensor * ggml_graph_leaf(const ggml_cgraph * gf, int i);
ggml_tensor * ggml_graph_get_tensor(const ggml_cgraph * gf, const char * name);
void          ggml_graph_clear(ggml_cgraph * gf);

// Compute a graph whose tensors all have data in host memory (CPU backend, n_threads).
void ggml_graph_compute_with_ctx(ggml_context * ctx, ggml_cgraph * gf, int n_threads);

// Logging (stderr by default).
enum ggml_log_level { GGML_LOG_LEVEL_DEBUG, GGML_LOG_LEVEL_INFO, GGML_LOG_LEVEL_WARN, GGML_LOG_LEVEL_ERROR };
typedef void (*ggml_log_callback)(ggml_log_level level, const char * text, void * user);
void ggml_log_set(ggml_log_callback cb, void * user);
void ggml_log(ggml_log_level level, const char * fmt, ...);
#define GGML_LOG_INFO(...)  ggml_log(GGML_LOG_LEVEL_INFO, __VA_ARGS__)
#define GGML_LOG_WARN(...)  ggml_log(GGML_LOG_LEVEL_WARN, __VA_ARGS__)
#define GGML_LOG_ERROR(...) ggml_log(GGML_LOG_LEVEL_ERROR, __VA_ARGS__)
#define GGML_LOG_DEBUG(...) ggml_log(GGML_LOG_LEVEL_DEBUG, __VA_ARGS__)

int64_t ggml_time_us();
