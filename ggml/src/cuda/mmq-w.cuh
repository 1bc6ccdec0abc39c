// mmq-w.cuh - the small-N quantized GEMM on Hopper's warpgroup tensor-core MMA (wgmma, sm_90a): dst = a^T b with a
// quantized in the kernel layout and b the activations in f16, for N up to MMW_MAX_N (batched decode of 5..64
// sequences and prompts of up to 64 tokens by default, ctx.mmq_wg_n; ahead of k_mms and k_mmqh). Included only by the
// instance files mmqw-<type>.cu, which CMake also builds for sm_90a; the kernel is empty in any other pass and
// mmqw.cu's probe (ggml_cuda_mmw_ok) says whether the device runs the sm_90a one.
//
// Why: at N = 64 the streamed kernel (mmq-s.cuh) issues as many mma.sync m16n8k16 as the weights take bytes to read
// (4096 x 4096 q8_0: ~3.8 us of tensor work against ~4.2 us of bytes on an H200) and the two do not overlap within a
// warp; the tiled one (mmq-h.cuh) is bound by its shared-memory fragment loads. wgmma m64nNk16 does the products at
// about twice mma.sync's rate, reads the activations straight from shared memory (no fragment loads through the
// registers) and runs asynchronously to the warp's integer work. H200, q8_0, us a call (bench-mmvq, 4096 x 4096 /
// 4096 x 11008 / 11008 x 4096): N = 64 14.1 / 27.1 / 27.2 against 18.6 / 36.8 / 35.9 tiled; N = 32 11.2 / 19.6 /
// 19.4 against 12.5 / 30.8 / 30.7 streamed (docs/perf.md, twentieth session).
//
// A block of 2 warpgroups (8 warps) owns MMW_BM (128) weight rows and a K range of kr values (the K split):
//   - it streams its activation slice (NT columns x kr values, f16) through a ring of MMW_STAGES chunk slots in
//     shared memory, one contiguous range per chunk copied MMW_STAGES - 1 chunks ahead (one bulk copy, see below):
//     the kernel producing the activations writes them in the order wgmma reads (a norm, the SwiGLU, the
//     decode attention: mmw-order.cuh), else mulmat.cu converts them (ggml_cuda_mmw_order, mmqw.cu; cached for
//     the GEMMs that share them): the K-major canonical layout without swizzle: per k16
//     step, NT / 8 column groups x 2 k halves of 8 x 8 "core matrices" of 128 contiguous bytes (core (group, half)
//     at 256 group + 128 half bytes of the step's tile), zero past N and K (K padded to a multiple of MMW_KC);
//   - warp w owns rows 16w .. 16w + 15 of the block (warp w % 4 of its warpgroup's m64 tile); per chunk of 128 values
//     of K, lane (g, t) (g = lane / 4, t = lane % 4) loads 32-value unit t of rows g and g + 8 (T::mmq_load: the
//     raw bytes, mmw_pf chunks in flight), dequantizes them (mmqh_s8x4: d * q + m in f16) straight into the A
//     fragments of the chunk's 8 k16 steps: in step s the lane's logical k 2t, 2t + 1 are values 4s, 4s + 1 of its
//     unit and 2t + 8, 2t + 9 values 4s + 2, 4s + 3, so the activations are stored with the same permutation;
//   - 8 wgmma per chunk (one commit group), accumulators d[NT / 2]: d[4j + e] is row g + 8 (e / 2), column
//     8j + 2t + e % 2 of the warp's 16 x NT tile;
//   - the K split's partial sums, through ctx.mmw_tick's counts (no memset of dst before the launch, which can then
//     start early as the other kernels do): slice 0 of a tile zeroes it while its first chunks arrive and releases
//     that by a count, and every slice adds its sums at its end after an acquire of the count (zero, the default:
//     none waits for another slice to finish); else (GGML_CUDA_MMW_ZERO=0) the block with a tile's first ticket
//     (taken when it starts) stores its sums and the others wait for it to finish, then add theirs. Without the
//     counts they are added into dst, zeroed by mmq_launch.
// The chunks are copied by one bulk copy each (the TMA unit, bulk-copy.cuh) issued by thread 0, MMW_STAGES - 1 ahead:
// it completes on the slot's full barrier, which every thread waits for; each warp arrives on the slot's empty barrier
// once its MMAs of the chunk are done, and thread 0 waits for that before refilling the slot. No block barrier a chunk,
// so one warpgroup may run ahead of the other (twenty-eighth session: bench-mmvq N = 64 12.6 / 22.2 / 24.6 -> 12.0 /
// 20.7 / 23.4 us; GGML_CUDA_MMW_BULK=0: 16-byte cp.async by every thread and a __syncthreads a chunk, as before).
// The ring (instead of the whole slice staged before chunk 0, as before the twenty-seventh session) frees the K range
// from the shared memory: a block takes up to all of K, and the split is chosen for one wave alone (mmw_kr). H200,
// q8_0, us a call (bench-mmvq, 4096 x 4096 / 4096 x 11008 / 11008 x 4096): N = 64 15.8 / 34.4 / 34.9 -> 15.0 /
// 26.5 / 25.6, N = 32 10.2 / 21.4 / 20.2 -> 9.2 / 16.4 / 18.7. ncu had put a third of the blocks' warp time in the
// split's end (the ticket's round trip, a sequentially consistent fence in every block) and a quarter in the slice's
// copy before chunk 0, with 6-chunk blocks.
// Ragged edges: rows past M load row M - 1 (not stored); columns past N and K past the last unit are zero.
// Groups (mmw_group): one launch may take 2-3 weights of one type and K multiplying the same activations (q, k, v or
// gate, up of a batched decode step, fusion codes 15 / 16): their row blocks follow each other in the grid.
#pragma once
#include "bulk-copy.cuh"
#include "cp-async.cuh"
#include "mmq-t.cuh"

#define MMW_BM 128                // weight rows per block: 2 warpgroups of 64
#define MMW_KC 128                // K values per chunk: unit t of 32 values for lane t
#define MMW_MAX_N 64              // columns: NT = 32 or 64
#define MMW_MIN_KR (2 * MMW_KC)   // the smallest K range per block
#define MMW_STAGES 4              // activation chunks in flight (a ring of slots)
#define MMW_SMEM (MMW_STAGES * MMW_KC * MMW_MAX_N * 2) // the most activation bytes per block (64 KB)

#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define GGML_CUDA_WGMMA 1
#endif

// chunks of raw weight units in flight per lane: 2, one for the types whose units take more than 48 bytes of
// registers (q3_K, q5_K, q6_K spill at two: 128 registers for two blocks per SM)
template <typename T> static constexpr int mmw_pf() { return sizeof(typename T::MU) > 48 ? 1 : 2; }

// d += a (16 x 16 of this warp's rows, in mma.m16n8k16's A fragment order) x b (16 x N, the descriptor's tile),
// f16 -> f32, one wgmma m64nNk16 of the warpgroup
template <int N> __device__ void mmw_mma(float (&d)[N / 2], const int (&a)[4], uint64_t desc);
template <> __device__ __forceinline__ void mmw_mma<32>(float (&d)[16], const int (&a)[4], uint64_t desc) {
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %21, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n32k16.f32.f16.f16 {"
                 "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15}, "
                 "{%16, %17, %18, %19}, %20, p, 1, 1, 0;\n}\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
                   "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc), "r"(1));
}
template <> __device__ __forceinline__ void mmw_mma<64>(float (&d)[32], const int (&a)[4], uint64_t desc) {
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %37, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16 {"
                 "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
                 "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, "
                 "{%32, %33, %34, %35}, %36, p, 1, 1, 0;\n}\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
                   "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
                   "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
                   "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc), "r"(1));
}

// the shared-memory descriptor of a K-major tile without swizzle at byte address addr: core matrices 128 bytes
// apart along K (leading dimension offset), 256 apart along N (stride dimension offset)
static __device__ __forceinline__ uint64_t mmw_desc(uint32_t addr) {
    return (uint64_t)((addr >> 4) & 0x3fff) | (uint64_t)(128 >> 4) << 16 | (uint64_t)(256 >> 4) << 32;
}

// keep the compiler from moving accumulator reads or writes across the asynchronous MMA
template <int N> static __device__ __forceinline__ void mmw_fence_acc(float (&d)[N]) {
#pragma unroll
    for (int i = 0; i < N; ++i)
        asm volatile("" : "+f"(d[i])::"memory");
}

static __device__ __forceinline__ int mmw_ld_acquire(const int * p) {
    int v;
    asm volatile("ld.acquire.gpu.global.b32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
    return v;
}

// The weights of one launch: one (batched) weight, or a group of 2-3 two-dimensional weights of one type and K that
// multiply the same activations (q, k, v; gate, up): row blocks rb[m] .. rb[m + 1] - 1 of the grid are weight m's
// (rb[n..3] = the grid's row blocks), its result dst[m] with columns ldd[m] floats apart.
struct mmw_group {
    qregs w[3];
    float * dst[3];
    int64_t ldd[3];
    int M[3];
    int rb[4];
};

// dst [M, N, B2, B3] (grp: one weight, or a group without batches); weight rows flat (row + (i2/r2)*M +
// (i3/r3)*M*A2); xw: the activations of batch bz at
// xw + bz * Kp * NT in the order of ggml_cuda_mmw_order (16-byte aligned); kr: K values per block (a multiple of
// MMW_KC), blockIdx.z % ksplit its slice. early: the weights may be read before pdl_wait(). tick (ctx.mmw_tick, or
// nullptr): two zeroed ints per tile (bz, blockIdx.y), for the K split without a memset of dst (see the end); zero:
// slice 0 zeroes the tile (with tick).
template <typename T, int NT>
static __global__ void __launch_bounds__(MMQ_NT, 2)
    k_mmw(const mmw_group grp, const half * __restrict__ xw, int K, int N, int64_t Kp, int64_t A2, int64_t B2,
          int64_t r2, int64_t r3, cuda_shape ds, int * tick, int kr, int bulk, int zero, int early, int ksplit) {
#if defined(GGML_CUDA_WGMMA)
    constexpr int SB = T::MMQ_SB, PF = mmw_pf<T>();
    extern __shared__ int4 mmw_smem[];
    __shared__ __align__(8) uint64_t bar_full[MMW_STAGES], bar_empty[MMW_STAGES]; // (bulk) per slot
    half * sx = (half *)mmw_smem; // [MMW_STAGES slots][8 steps of k16][NT / 8 groups][2 halves][8 columns][8 values]
    const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32, g = lane / 4, t = lane % 4;
    const int64_t bz = blockIdx.z / ksplit, i2 = bz % B2, i3 = bz / B2;
    const int k0 = (int)(blockIdx.z % ksplit) * kr, k1 = min(K, k0 + kr);
    if (k0 >= K && !tick) return; // (with tick every split has keys, mmw_launch_nt; each must take its ticket)
    const int m = ((int)blockIdx.y >= grp.rb[1]) + ((int)blockIdx.y >= grp.rb[2]); // the group's weight m
    const qregs w = grp.w[m];
    float * __restrict__ dst = grp.dst[m];
    const int M = grp.M[m];
    const int r0 = ((int)blockIdx.y - grp.rb[m]) * MMW_BM + 16 * warp;
    const int64_t off = (i2 / r2) * M + (i3 / r3) * M * A2;
    const int nbr = K / T::QK;
    int64_t wb[2]; // first block of rows r0 + g, r0 + g + 8
#pragma unroll
    for (int i = 0; i < 2; ++i)
        wb[i] = ((int64_t)min(r0 + g + 8 * i, M - 1) + off) * nbr;
    const int nc = (k1 - k0 + MMW_KC - 1) / MMW_KC;

    typename T::MU u[PF][2]; // the raw units of the chunks in flight
    auto load = [&](int c, typename T::MU(&uu)[2]) {
        const int kv = k0 + c * MMW_KC + 32 * t;
        if (kv < k1) {
#pragma unroll
            for (int i = 0; i < 2; ++i)
                T::mmq_load(w, wb[i] + kv / T::QK, (kv % T::QK) / 32, uu[i]);
        }
    };

    if (bulk && tid == 0) {
#pragma unroll
        for (int i = 0; i < MMW_STAGES; ++i) {
            mbar_init(&bar_full[i], 1);               // the copying thread's arrival (+ the chunk's bytes)
            mbar_init(&bar_empty[i], MMQ_NT / 32);    // every warp done with the slot's chunk
        }
        mbar_init_fence();
    }
    if (!early) pdl_wait();
#pragma unroll
    for (int p = 0; p < PF; ++p)
        load(p, u[p]); // the first weights before pdl_wait: they do not depend on the kernel before
    pdl_wait();
    const half * xs = xw + (bz * Kp + k0) * NT; // the block's activation slice, chunk after chunk
    constexpr int CP = MMW_KC * NT / 8;         // 16-byte pieces of a chunk
    // (bulk) chunk c into slot c % MMW_STAGES by one copy of thread 0, completing on bar_full of the slot
    auto bulk_chunk = [&](int c) {
        const int slot = c % MMW_STAGES;
        constexpr uint32_t bytes = MMW_KC * NT * sizeof(half);
        mbar_arrive_expect_tx(&bar_full[slot], bytes);
        bulk_copy_g2s(sx + slot * (MMW_KC * NT), xs + (int64_t)c * MMW_KC * NT, bytes, &bar_full[slot]);
    };
    // chunk c's activations into slot c % MMW_STAGES (one cp.async group per chunk, empty past the slice)
    auto copy_chunk = [&](int c) {
        if (c < nc) {
            half * dstc = sx + (c % MMW_STAGES) * (MMW_KC * NT);
            const half * srcc = xs + (int64_t)c * MMW_KC * NT;
            for (int i = tid; i < CP; i += MMQ_NT)
                cp_async16(dstc + 8 * i, srcc + 8 * i);
        }
        cp_async_commit();
    };
    int ticket = 0; // the K split's ticket (thread 0), taken now: its round trip hides behind the chunks
    int * cnt = nullptr;
    const int rb0 = ((int)blockIdx.y - grp.rb[m]) * MMW_BM; // the block's first row
    float * const base0 = (float *)((char *)dst + i2 * ds.nb[2] + i3 * ds.nb[3]) + rb0;
    if (ksplit > 1 && tick) {
        cnt = tick + 2 * (bz * gridDim.y + blockIdx.y); // {tickets taken | tile zeroed, blocks done}
        if (!zero && tid == 0) ticket = atomicAdd(cnt, 1);
    }
    if (bulk) {
        __syncthreads(); // (the barriers initialised)
        if (tid == 0)
            for (int c = 0; c < MMW_STAGES - 1 && c < nc; ++c)
                bulk_chunk(c);
    } else {
#pragma unroll
        for (int c = 0; c < MMW_STAGES - 1; ++c)
            copy_chunk(c);
    }
    if (cnt && zero && blockIdx.z % ksplit == 0) {
        // (zero) slice 0 zeroes the tile while its first chunks arrive and releases it by cnt[0] (thread 0 after the
        // barrier: cumulative over the block's stores); every slice adds its sums at the end
        for (int f = tid; f < MMW_BM * N; f += MMQ_NT)
            if (rb0 + f % MMW_BM < M) base0[(int64_t)(f / MMW_BM) * grp.ldd[m] + f % MMW_BM] = 0.0f;
        __syncthreads();
        if (tid == 0) asm volatile("red.release.gpu.global.add.s32 [%0], 1;" ::"l"(cnt) : "memory");
    }
    const uint32_t sbase = (uint32_t)__cvta_generic_to_shared(sx);

    float d[NT / 2];
#pragma unroll
    for (int i = 0; i < NT / 2; ++i)
        d[i] = 0.0f;
    for (int c0 = 0; c0 < nc; c0 += PF) {
#pragma unroll
        for (int p = 0; p < PF; ++p) {
            const int c = c0 + p;
            if (c >= nc) break;
            const int kv = k0 + c * MMW_KC + 32 * t;
            int q[2][8];
            half2 d2[2][2], m2[2][2];
#pragma unroll
            for (int i = 0; i < 2; ++i) {
                float dd[2] = {0.0f, 0.0f}, mm[2] = {0.0f, 0.0f};
#pragma unroll
                for (int e = 0; e < 8; ++e)
                    q[i][e] = 0;
                if (kv < k1) T::mmq_unpack(u[p][i], (kv % T::QK) / 32, q[i], dd, mm);
#pragma unroll
                for (int e = 0; e < 2; ++e) {
                    d2[i][e] = __float2half2_rn(dd[e]);
                    m2[i][e] = __float2half2_rn(mm[e]);
                }
            }
            load(c + PF, u[p]); // in flight during this chunk's MMAs
            int a[8][4];
#pragma unroll
            for (int s = 0; s < 8; ++s) {
                const int sb = SB == 32 ? 0 : s / 4;
                half2 lo0, hi0, lo1, hi1;
                mmqh_s8x4(q[0][s], d2[0][sb], m2[0][sb], lo0, hi0);
                mmqh_s8x4(q[1][s], d2[1][sb], m2[1][sb], lo1, hi1);
                a[s][0] = *(const int *)&lo0; // row g, logical k 2t, 2t + 1
                a[s][1] = *(const int *)&lo1; // row g + 8
                a[s][2] = *(const int *)&hi0; // row g, logical k 2t + 8, 2t + 9
                a[s][3] = *(const int *)&hi1;
            }
            if (bulk) {
                // thread 0 refills the slot of chunk c - 1 with chunk c + MMW_STAGES - 1 once every warp is done
                // with it; every thread waits for chunk c's bytes (no block barrier: a warpgroup may run ahead)
                if (tid == 0 && c + MMW_STAGES - 1 < nc) {
                    if (c >= 1) mbar_wait(&bar_empty[(c - 1) % MMW_STAGES], ((c - 1) / MMW_STAGES) & 1);
                    bulk_chunk(c + MMW_STAGES - 1);
                }
                mbar_wait(&bar_full[c % MMW_STAGES], (c / MMW_STAGES) & 1);
                __syncwarp();
            } else {
                // chunk c's activations in (every thread's copies, then visible to the tensor cores), and every
                // warp done with slot c - 1 (its MMAs waited for), which takes chunk c + MMW_STAGES - 1
                cp_async_wait<MMW_STAGES - 2>();
                asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
                __syncthreads();
                copy_chunk(c + MMW_STAGES - 1);
            }
            const int slot = c % MMW_STAGES;
            mmw_fence_acc(d);
            asm volatile("wgmma.fence.sync.aligned;" ::: "memory");
#pragma unroll
            for (int s = 0; s < 8; ++s)
                mmw_mma<NT>(d, a[s], mmw_desc(sbase + (uint32_t)(8 * slot + s) * NT * 32));
            asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");
            asm volatile("wgmma.wait_group.sync.aligned 0;" ::: "memory");
            mmw_fence_acc(d);
            if (bulk && lane == 0) mbar_arrive(&bar_empty[slot]);
        }
    }
    pdl_trigger();
    // dst contiguous (qt_mmw): rows r0 + g (e < 2) and r0 + g + 8 (e >= 2), column 8j + 2t + e % 2 of d[4j + e]
    // K split (ksplit > 1): without tick, the splits add into dst, zeroed before the launch (mmq_launch); with tick
    // and zero, after slice 0 has zeroed the tile (long done, as a rule); with tick alone, the block with the tile's
    // first ticket stores its sums and the others wait for that, then add theirs
    bool atomic = ksplit > 1;
    if (atomic && tick && zero) {
        if (tid == 0)
            while (mmw_ld_acquire(cnt) == 0) __nanosleep(64);
        __syncthreads();
    } else if (atomic && tick) {
        __shared__ int s_ticket;
        if (tid == 0) s_ticket = ticket;
        __syncthreads(); // (every warp's sums are final here)
        atomic = s_ticket != 0;
        if (atomic) {
            if (tid == 0)
                while (mmw_ld_acquire(cnt + 1) == 0) __nanosleep(64);
            __syncthreads();
        }
    }
    const bool ok0 = r0 + g < M, ok1 = r0 + g + 8 < M;
    float * base = base0 + 16 * warp + g; // (r0 = rb0 + 16 warp)
    const int64_t ldd = grp.ldd[m];
#pragma unroll
    for (int j = 0; j < NT / 8; ++j)
#pragma unroll
        for (int e = 0; e < 2; ++e) {
            const int n = 8 * j + 2 * t + e;
            if (n >= N) continue;
            float * p = base + n * ldd;
            if (atomic) {
                if (ok0) atomicAdd(p, d[4 * j + e]);
                if (ok1) atomicAdd(p + 8, d[4 * j + 2 + e]);
            } else {
                if (ok0) p[0] = d[4 * j + e];
                if (ok1) p[8] = d[4 * j + 2 + e];
            }
        }
    if (cnt) {
        // done: (tickets) the first block's stores released to the others by its count (thread 0 after the barrier:
        // the block's stores before it); the others only count (their adds need no order before the kernel's end);
        // the last of the tile's blocks zeroes both counts for the next launch
        __syncthreads();
        if (tid == 0) {
            int prev;
            if (atomic) {
                prev = atomicAdd(cnt + 1, 1);
            } else {
                asm volatile("atom.add.release.gpu.global.s32 %0, [%1], 1;" : "=r"(prev) : "l"(cnt + 1) : "memory");
            }
            if (prev == ksplit - 1) {
                cnt[0] = 0;
                cnt[1] = 0;
            }
        }
    }
#else
    __trap(); // never launched: ggml_cuda_mmw_ok is false where this pass runs
#endif
}

// the K range per block (a multiple of MMW_KC, MMW_MIN_KR .. all of K): the fewest waves of two blocks per SM x K
// values per block, the larger range on a tie (fewer partial sums). GGML_CUDA_MMQ_KS (ctx.mmq_ks): the range of that
// many slices (1: no split, so no partial sums are added in the blocks' arrival order: bit-reproducible results)
static inline int mmw_kr(const ggml_cuda_context & ctx, int64_t row_blocks, int64_t K) {
    const int64_t kmax = std::max<int64_t>(MMW_MIN_KR, cuda_ceil_div(K, MMW_KC) * MMW_KC);
    if (ctx.mmq_ks > 0) return (int)std::min(kmax, cuda_ceil_div(cuda_ceil_div(K, ctx.mmq_ks), MMW_KC) * MMW_KC);
    int64_t best_kr = kmax, best = INT64_MAX;
    for (int64_t kr = kmax; kr >= MMW_MIN_KR; kr -= MMW_KC) {
        const int64_t cost = cuda_ceil_div(row_blocks * cuda_ceil_div(K, kr), 2 * (int64_t)ctx.n_sm) * (kr + ctx.mmw_ov);
        if (cost < best) {
            best = cost;
            best_kr = kr;
        }
    }
    return (int)best_kr;
}

// one launch of k_mmw for grp (row_blocks of it in all) times bw (B2 x B3 batches) in tiles of NT columns; dst0:
// grp.dst[0]'s tensor (the memset of the fallback K split: one weight only)
template <typename T, int NT>
static void mmw_launch_nt(ggml_cuda_context & ctx, const mmw_group & grp, int64_t row_blocks, int64_t K, int64_t N,
                       int64_t A2, int64_t A3, bool early, const ggml_tensor * bw, ggml_tensor * dst0) {
    const int64_t B2 = bw->ne[2], B3 = bw->ne[3];
    const int kr = mmw_kr(ctx, row_blocks * B2 * B3, K);
    const int ks = (int)cuda_ceil_div(K, kr);
    GGML_ASSERT(row_blocks <= 65535 && B2 * B3 * ks <= 65535);
    const size_t smem = (size_t)MMW_STAGES * MMW_KC * NT * sizeof(half);
    static thread_local std::map<int, bool> attr_set; // up to MMW_SMEM of shared memory: allowed once per device
    bool & done = attr_set[ctx.device];
    if (!done) {
        CUDA_CHECK(cudaFuncSetAttribute(k_mmw<T, NT>, cudaFuncAttributeMaxDynamicSharedMemorySize, MMW_SMEM));
        done = true;
    }
    const dim3 grid(1, (unsigned)row_blocks, (unsigned)(B2 * B3 * ks));
    const half * xw = (const half *)bw->data;
    const int64_t Kp = bw->ne[0], r2 = B2 / A2, r3 = B3 / A3;
    if (ks > 1 && ctx.mmw_tick && row_blocks * B2 * B3 <= GGML_CUDA_MMW_TILES) {
        // the K split through the tile counts: no memset, and a programmatic dependent launch like the others
        ggml_cuda_launch(ctx, k_mmw<T, NT>, grid, dim3(MMQ_NT), smem, grp, xw, (int)K, (int)N, Kp, A2, B2, r2, r3,
                         cuda_shape_of(dst0), ctx.mmw_tick, kr, ctx.mmw_bulk ? 1 : 0, ctx.mmw_zero ? 1 : 0,
                         early ? 1 : 0, ks);
        return;
    }
    GGML_ASSERT(ks == 1 || grp.rb[1] == row_blocks); // (groups are launched only with the counts)
    mmq_launch(ctx, k_mmw<T, NT>, grid, smem, ks, early, dst0, grp, xw, (int)K, (int)N, Kp, A2, B2, r2, r3,
               cuda_shape_of(dst0), (int *)nullptr, kr, ctx.mmw_bulk ? 1 : 0, 0);
}

// the same, the column tile picked by bw's padded width (ggml_cuda_mmw_nt: 32 or 64)
template <typename T>
static void mmw_launch(ggml_cuda_context & ctx, const mmw_group & grp, int64_t row_blocks, int64_t K, int64_t N,
                       int64_t A2, int64_t A3, bool early, const ggml_tensor * bw, ggml_tensor * dst0) {
    if (bw->ne[1] == 32)
        mmw_launch_nt<T, 32>(ctx, grp, row_blocks, K, N, A2, A3, early, bw, dst0);
    else
        mmw_launch_nt<T, 64>(ctx, grp, row_blocks, K, N, A2, A3, early, bw, dst0);
}

// bw: the activations of dst = a^T b in wgmma order (ggml_cuda_mmw_order): f16 [ggml_cuda_mmw_kpad(K),
// ggml_cuda_mmw_nt(N), B2, B3], dense, 16-byte aligned
template <typename T>
static void qt_mmw(ggml_cuda_context & ctx, const ggml_tensor * a, const void * w, bool early, const ggml_tensor * bw,
                   ggml_tensor * dst) {
    const int64_t K = a->ne[0], M = a->ne[1], N = dst->ne[1];
    GGML_ASSERT(a->type == T::type && K % T::QK == 0 && K <= INT32_MAX && M <= INT32_MAX && N <= MMW_MAX_N);
    GGML_ASSERT(ggml_is_contiguous(dst) && dst->type == GGML_TYPE_F32);
    GGML_ASSERT(bw->type == GGML_TYPE_F16 && bw->ne[0] == ggml_cuda_mmw_kpad(K) && bw->ne[1] == ggml_cuda_mmw_nt(N) &&
                dst->ne[0] == M && bw->ne[2] % a->ne[2] == 0 && bw->ne[3] % a->ne[3] == 0 &&
                (uintptr_t)bw->data % 16 == 0);
    if (M == 0 || N == 0 || bw->ne[2] * bw->ne[3] == 0) return;
    const int64_t row_blocks = cuda_ceil_div(M, MMW_BM);
    mmw_group grp = {};
    grp.w[0] = qt_regs_of(T::type, w, ggml_nelements(a) / T::QK);
    grp.dst[0] = (float *)dst->data;
    grp.ldd[0] = (int64_t)(dst->nb[1] / sizeof(float));
    grp.M[0] = (int)M;
    grp.rb[1] = grp.rb[2] = grp.rb[3] = (int)row_blocks;
    mmw_launch<T>(ctx, grp, row_blocks, K, N, a->ne[2], a->ne[3], early, bw, dst);
}

// n = 2 or 3 two-dimensional weights a[m] of this type and one K (their data in the kernel layout, read early) times
// the same activations bw (one batch): dst[m] = a[m]^T b in one launch. Needs ctx.mmw_tick (the K split of a group
// adds no memset).
template <typename T>
static void qt_mmw_group(ggml_cuda_context & ctx, const ggml_tensor * const * a, int n, const ggml_tensor * bw,
                         ggml_tensor * const * dst) {
    GGML_ASSERT(n >= 2 && n <= 3 && ctx.mmw_tick && bw->ne[2] == 1 && bw->ne[3] == 1);
    const int64_t K = a[0]->ne[0], N = dst[0]->ne[1];
    mmw_group grp = {};
    int64_t rb = 0;
    for (int m = 0; m < n; ++m) {
        GGML_ASSERT(a[m]->type == T::type && a[m]->ne[0] == K && ggml_is_contiguous(dst[m]) && dst[m]->ne[1] == N &&
                    dst[m]->ne[0] == a[m]->ne[1] && a[m]->ne[1] <= INT32_MAX);
        grp.w[m] = qt_regs_of(T::type, a[m]->data, ggml_nelements(a[m]) / T::QK);
        grp.dst[m] = (float *)dst[m]->data;
        grp.ldd[m] = a[m]->ne[1];
        grp.M[m] = (int)a[m]->ne[1];
        rb += cuda_ceil_div(a[m]->ne[1], MMW_BM);
        grp.rb[m + 1] = (int)rb;
    }
    for (int m = n + 1; m < 4; ++m)
        grp.rb[m] = (int)rb;
    mmw_launch<T>(ctx, grp, rb, K, N, 1, 1, true, bw, dst[0]);
}

#define GGML_CUDA_MMW_INSTANCE(T, name)                                                                                \
    extern const ggml_cuda_mmqh_fn ggml_cuda_mmw_##name;                                                               \
    const ggml_cuda_mmqh_fn ggml_cuda_mmw_##name = qt_mmw<T>;                                                          \
    extern const ggml_cuda_mmw_group_fn ggml_cuda_mmw_group_##name;                                                    \
    const ggml_cuda_mmw_group_fn ggml_cuda_mmw_group_##name = qt_mmw_group<T>;
