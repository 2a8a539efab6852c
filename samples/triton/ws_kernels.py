"""Triton kernels written for ptxkit's fence tests, compiled into ``ws/`` by `generate`:
two matmuls that Triton warp-specializes, with the tensor descriptors made in the kernel
(Triton stages each tensor map in shared memory first), one of them persistent (its
stage count runs on across tiles), and a flash-attention forward from host-side
descriptors. Plain functions, as in `triton_kernels`.
"""

from __future__ import annotations  # the kernels' `tl.constexpr` annotations stay strings

import triton.language as tl


def matmul_in_kernel_descriptors(a_ptr, b_ptr, c_ptr, M, N, K, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                                 BLOCK_K: tl.constexpr, WARP_SPECIALIZE: tl.constexpr):
    """C = A @ B^T through descriptors the kernel makes (a TMA store of C)."""
    a_desc = tl.make_tensor_descriptor(a_ptr, [M, K], [K, 1], [BLOCK_M, BLOCK_K])
    b_desc = tl.make_tensor_descriptor(b_ptr, [N, K], [K, 1], [BLOCK_N, BLOCK_K])
    c_desc = tl.make_tensor_descriptor(c_ptr, [M, N], [N, 1], [BLOCK_M, BLOCK_N])
    pid = tl.program_id(0)
    num_n = tl.cdiv(N, BLOCK_N)
    off_m = (pid // num_n) * BLOCK_M
    off_n = (pid % num_n) * BLOCK_N
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in tl.range(0, tl.cdiv(K, BLOCK_K), warp_specialize=WARP_SPECIALIZE):
        a = a_desc.load([off_m, k * BLOCK_K])
        b = b_desc.load([off_n, k * BLOCK_K])
        acc = tl.dot(a, b.T, acc)
    c_desc.store([off_m, off_n], acc.to(tl.float16))


def matmul_persistent(a_ptr, b_ptr, c_ptr, M, N, K, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                      BLOCK_K: tl.constexpr, NUM_SMS: tl.constexpr, WARP_SPECIALIZE: tl.constexpr):
    """C = A @ B^T, each program looping over tiles `NUM_SMS` apart (descriptors made in
    the kernel; the stage count runs on across tiles)."""
    a_desc = tl.make_tensor_descriptor(a_ptr, [M, K], [K, 1], [BLOCK_M, BLOCK_K])
    b_desc = tl.make_tensor_descriptor(b_ptr, [N, K], [K, 1], [BLOCK_N, BLOCK_K])
    c_desc = tl.make_tensor_descriptor(c_ptr, [M, N], [N, 1], [BLOCK_M, BLOCK_N])
    num_n = tl.cdiv(N, BLOCK_N)
    for tile in tl.range(tl.program_id(0), tl.cdiv(M, BLOCK_M) * num_n, NUM_SMS, warp_specialize=WARP_SPECIALIZE):
        off_m = (tile // num_n) * BLOCK_M
        off_n = (tile % num_n) * BLOCK_N
        acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
        for k in range(tl.cdiv(K, BLOCK_K)):
            a = a_desc.load([off_m, k * BLOCK_K])
            b = b_desc.load([off_n, k * BLOCK_K])
            acc = tl.dot(a, b.T, acc)
        c_desc.store([off_m, off_n], acc.to(tl.float16))


def attention_forward(q_desc, k_desc, v_desc, o_desc, N_CTX, sm_scale, HEAD: tl.constexpr,
                      BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    """O = softmax(Q K^T * sm_scale) V for one block of queries (online softmax)."""
    start_m = tl.program_id(0)
    q = q_desc.load([start_m * BLOCK_M, 0])
    m_i = tl.zeros([BLOCK_M], dtype=tl.float32) - float("inf")
    l_i = tl.zeros([BLOCK_M], dtype=tl.float32) + 1.0
    acc = tl.zeros([BLOCK_M, HEAD], dtype=tl.float32)
    qk_scale = sm_scale * 1.44269504
    for start_n in range(0, N_CTX, BLOCK_N):
        qk = tl.dot(q, k_desc.load([start_n, 0]).T)
        m_ij = tl.maximum(m_i, tl.max(qk, 1) * qk_scale)
        p = tl.math.exp2(qk * qk_scale - m_ij[:, None])
        alpha = tl.math.exp2(m_i - m_ij)
        l_i = l_i * alpha + tl.sum(p, 1)
        acc = tl.dot(p.to(tl.float16), v_desc.load([start_n, 0]), acc * alpha[:, None])
        m_i = m_ij
    o_desc.store([start_m * BLOCK_M, 0], (acc / l_i[:, None]).to(tl.float16))
