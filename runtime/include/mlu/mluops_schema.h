/*
 * mluops_schema.h — the op schema of the simulated kernel library: every op, described once.
 *
 * Why an X-macro table: the schema has to be usable from C (the public header declares each op's
 * prototype from it) and from C++ (the library's argument checking and dispatch, the CPU reference
 * dispatch, and later the hook wrappers, capture and replay all expand it), with no generator to run and
 * no second copy to drift. Adding an op means one row here plus its device kernel and its CPU reference.
 *
 * Each row is  OP(name, Symbol, ARGS)  where name is the canonical snake_case op name, Symbol the exported
 * C function, and ARGS a sequence (no commas between items) of the argument macros below, in C parameter
 * order. Every op takes a leading `mluopHandle_t handle`, not listed.
 *
 *   MLUOP_IN(n)            input tensor           -> const mluopTensorDescriptor_t n_desc, const void *n
 *   MLUOP_IN_OPT(n)        optional input tensor  -> same; both may be NULL (e.g. a bias)
 *   MLUOP_OUT(n)           output tensor          -> const mluopTensorDescriptor_t n_desc, void *n
 *   MLUOP_INOUT(n)         in-place tensor        -> const mluopTensorDescriptor_t n_desc, void *n
 *   MLUOP_OUT_OPT(n)       optional output        -> same; both may be NULL (e.g. a weight gradient)
 *   MLUOP_INOUT_OPT(n)     optional in-place      -> same; both may be NULL
 *   MLUOP_SCALAR(type, n)  scalar                 -> type n   (bool, int, int64_t, uint64_t, float, double)
 *   MLUOP_INTS(n)          small int array        -> const int *n, int n_count
 *   MLUOP_CONV(n)          convolution descriptor -> const mluopConvolutionDescriptor_t n
 *   MLUOP_WORKSPACE(n)     scratch memory         -> void *n, size_t n_size
 *
 * Each argument macro expands to a tuple (KIND, ...), so ARGS is a preprocessor sequence such as
 * (SCALAR, float, alpha)(IN, a)(IN, b)(OUT, c). A consumer walks it with an alternating pair of macros,
 * e.g. MLUOP_PARAMS(ARGS) below, which gives the C parameter list; the C++ side (mlu/op_args.h and the
 * library's entry points) walks it the same way to generate argument structs, visitors and entry points.
 *
 * Conventions: `reduction` is an mluopReduction_t value; random ops take their Philox seed and offset as
 * scalars, so a run can be reproduced exactly.
 */
#ifndef MLU_MLUOPS_SCHEMA_H_
#define MLU_MLUOPS_SCHEMA_H_

#define MLUOP_IN(n) (IN, n)
#define MLUOP_IN_OPT(n) (IN_OPT, n)
#define MLUOP_OUT(n) (OUT, n)
#define MLUOP_INOUT(n) (INOUT, n)
#define MLUOP_OUT_OPT(n) (OUT_OPT, n)
#define MLUOP_INOUT_OPT(n) (INOUT_OPT, n)
#define MLUOP_SCALAR(type, n) (SCALAR, type, n)
#define MLUOP_INTS(n) (INTS, n)
#define MLUOP_CONV(n) (CONV, n)
#define MLUOP_WORKSPACE(n) (WORKSPACE, n)

/* Ends a sequence walk: pastes _END onto the dangling alternator the walk leaves last (an empty macro). */
#define MLUOP_SEQ_END(...) MLUOP_SEQ_END_I(__VA_ARGS__)
#define MLUOP_SEQ_END_I(...) __VA_ARGS__##_END

/* MLUOP_PARAMS(ARGS): the C parameters of an op after its handle, each with a leading comma. */
#define MLUOP_PARAMS(seq) MLUOP_SEQ_END(MLUOP_PARAMS_A seq)
#define MLUOP_PARAMS_A(kind, ...) MLUOP_PARAM_##kind(__VA_ARGS__) MLUOP_PARAMS_B
#define MLUOP_PARAMS_B(kind, ...) MLUOP_PARAM_##kind(__VA_ARGS__) MLUOP_PARAMS_A
#define MLUOP_PARAMS_A_END
#define MLUOP_PARAMS_B_END
#define MLUOP_PARAM_IN(n) , const mluopTensorDescriptor_t n##_desc, const void *n
#define MLUOP_PARAM_IN_OPT(n) , const mluopTensorDescriptor_t n##_desc, const void *n
#define MLUOP_PARAM_OUT(n) , const mluopTensorDescriptor_t n##_desc, void *n
#define MLUOP_PARAM_INOUT(n) , const mluopTensorDescriptor_t n##_desc, void *n
#define MLUOP_PARAM_OUT_OPT(n) , const mluopTensorDescriptor_t n##_desc, void *n
#define MLUOP_PARAM_INOUT_OPT(n) , const mluopTensorDescriptor_t n##_desc, void *n
#define MLUOP_PARAM_SCALAR(type, n) , type n
#define MLUOP_PARAM_INTS(n) , const int *n, int n##_count
#define MLUOP_PARAM_CONV(n) , const mluopConvolutionDescriptor_t n
#define MLUOP_PARAM_WORKSPACE(n) , void *n, size_t n##_size

/* clang-format off */
#define MLUOP_FOR_EACH_OP(OP)                                                                              \
  /* creation, copy, layout */                                                                            \
  OP(fill, mluopFill, MLUOP_SCALAR(double, value) MLUOP_OUT(y))                                           \
  OP(copy, mluopCopy, MLUOP_IN(x) MLUOP_OUT(y))                                                           \
  OP(permute, mluopPermute, MLUOP_INTS(dims) MLUOP_IN(x) MLUOP_OUT(y))                                    \
  /* binary, broadcasting: c = a op b (add: c = a + alpha * b) */                                         \
  OP(add, mluopAdd, MLUOP_SCALAR(float, alpha) MLUOP_IN(a) MLUOP_IN(b) MLUOP_OUT(c))                      \
  OP(sub, mluopSub, MLUOP_IN(a) MLUOP_IN(b) MLUOP_OUT(c))                                                 \
  OP(mul, mluopMul, MLUOP_IN(a) MLUOP_IN(b) MLUOP_OUT(c))                                                 \
  OP(div, mluopDiv, MLUOP_IN(a) MLUOP_IN(b) MLUOP_OUT(c))                                                 \
  OP(maximum, mluopMaximum, MLUOP_IN(a) MLUOP_IN(b) MLUOP_OUT(c))                                         \
  OP(minimum, mluopMinimum, MLUOP_IN(a) MLUOP_IN(b) MLUOP_OUT(c))                                         \
  OP(add_scalar, mluopAddScalar, MLUOP_IN(x) MLUOP_SCALAR(double, value) MLUOP_OUT(y))                    \
  OP(mul_scalar, mluopMulScalar, MLUOP_IN(x) MLUOP_SCALAR(double, value) MLUOP_OUT(y))                    \
  /* unary */                                                                                             \
  OP(neg, mluopNeg, MLUOP_IN(x) MLUOP_OUT(y))                                                             \
  OP(abs, mluopAbs, MLUOP_IN(x) MLUOP_OUT(y))                                                             \
  OP(exp, mluopExp, MLUOP_IN(x) MLUOP_OUT(y))                                                             \
  OP(log, mluopLog, MLUOP_IN(x) MLUOP_OUT(y))                                                             \
  OP(sqrt, mluopSqrt, MLUOP_IN(x) MLUOP_OUT(y))                                                           \
  OP(rsqrt, mluopRsqrt, MLUOP_IN(x) MLUOP_OUT(y))                                                         \
  OP(tanh, mluopTanh, MLUOP_IN(x) MLUOP_OUT(y))                                                           \
  OP(sigmoid, mluopSigmoid, MLUOP_IN(x) MLUOP_OUT(y))                                                     \
  OP(relu, mluopRelu, MLUOP_IN(x) MLUOP_OUT(y))                                                           \
  OP(relu_backward, mluopReluBackward, MLUOP_IN(grad_output) MLUOP_IN(x) MLUOP_OUT(grad_input))           \
  OP(sigmoid_backward, mluopSigmoidBackward, MLUOP_IN(grad_output) MLUOP_IN(y) MLUOP_OUT(grad_input))     \
  OP(tanh_backward, mluopTanhBackward, MLUOP_IN(grad_output) MLUOP_IN(y) MLUOP_OUT(grad_input))           \
  /* reductions */                                                                                        \
  OP(sum, mluopReduceSum, MLUOP_INTS(dims) MLUOP_SCALAR(bool, keepdim) MLUOP_IN(x) MLUOP_OUT(y))          \
  OP(mean, mluopReduceMean, MLUOP_INTS(dims) MLUOP_SCALAR(bool, keepdim) MLUOP_IN(x) MLUOP_OUT(y))        \
  OP(max, mluopReduceMax, MLUOP_SCALAR(int, dim) MLUOP_SCALAR(bool, keepdim) MLUOP_IN(x)                  \
                          MLUOP_OUT(values) MLUOP_OUT(indices))                                           \
  OP(min, mluopReduceMin, MLUOP_SCALAR(int, dim) MLUOP_SCALAR(bool, keepdim) MLUOP_IN(x)                  \
                          MLUOP_OUT(values) MLUOP_OUT(indices))                                           \
  OP(argmax, mluopArgmax, MLUOP_SCALAR(int, dim) MLUOP_SCALAR(bool, keepdim) MLUOP_IN(x) MLUOP_OUT(indices)) \
  /* matrix products */                                                                                   \
  OP(matmul, mluopMatmul, MLUOP_SCALAR(bool, trans_a) MLUOP_SCALAR(bool, trans_b) MLUOP_IN(a) MLUOP_IN(b) \
                          MLUOP_OUT(c))                                                                   \
  OP(linear, mluopLinear, MLUOP_IN(x) MLUOP_IN(weight) MLUOP_IN_OPT(bias) MLUOP_OUT(y))                   \
  /* convolution */                                                                                       \
  OP(conv2d_forward, mluopConvolutionForward, MLUOP_CONV(conv_desc) MLUOP_IN(x) MLUOP_IN(w)               \
                     MLUOP_IN_OPT(bias) MLUOP_WORKSPACE(workspace) MLUOP_OUT(y))                          \
  OP(conv2d_backward_data, mluopConvolutionBackwardData, MLUOP_CONV(conv_desc) MLUOP_IN(grad_output)      \
                     MLUOP_IN(w) MLUOP_WORKSPACE(workspace) MLUOP_OUT(grad_input))                        \
  OP(conv2d_backward_filter, mluopConvolutionBackwardFilter, MLUOP_CONV(conv_desc) MLUOP_IN(x)            \
                     MLUOP_IN(grad_output) MLUOP_WORKSPACE(workspace) MLUOP_OUT(grad_w))                  \
  OP(conv2d_backward_bias, mluopConvolutionBackwardBias, MLUOP_IN(grad_output) MLUOP_OUT(grad_bias))      \
  /* pooling (kernel, stride, padding, dilation: 2 ints each, H then W; dilation may be left out) */      \
  OP(max_pool2d_forward, mluopMaxPool2dForward, MLUOP_INTS(kernel) MLUOP_INTS(stride) MLUOP_INTS(padding) \
                     MLUOP_INTS(dilation) MLUOP_SCALAR(bool, ceil_mode) MLUOP_IN(x) MLUOP_OUT(y)          \
                     MLUOP_OUT(indices))                                                                  \
  OP(max_pool2d_backward, mluopMaxPool2dBackward, MLUOP_INTS(kernel) MLUOP_INTS(stride)                   \
                     MLUOP_INTS(padding) MLUOP_INTS(dilation) MLUOP_SCALAR(bool, ceil_mode)               \
                     MLUOP_IN(grad_output) MLUOP_IN(indices) MLUOP_OUT(grad_input))                       \
  OP(avg_pool2d_forward, mluopAvgPool2dForward, MLUOP_INTS(kernel) MLUOP_INTS(stride) MLUOP_INTS(padding) \
                     MLUOP_SCALAR(bool, count_include_pad) MLUOP_IN(x) MLUOP_OUT(y))                      \
  OP(avg_pool2d_backward, mluopAvgPool2dBackward, MLUOP_INTS(kernel) MLUOP_INTS(stride)                   \
                     MLUOP_INTS(padding) MLUOP_SCALAR(bool, count_include_pad) MLUOP_IN(grad_output)      \
                     MLUOP_OUT(grad_input))                                                               \
  /* softmax */                                                                                           \
  OP(softmax_forward, mluopSoftmaxForward, MLUOP_SCALAR(int, dim) MLUOP_IN(x) MLUOP_OUT(y))               \
  OP(softmax_backward, mluopSoftmaxBackward, MLUOP_SCALAR(int, dim) MLUOP_IN(y) MLUOP_IN(grad_output)     \
                     MLUOP_OUT(grad_input))                                                               \
  OP(log_softmax_forward, mluopLogSoftmaxForward, MLUOP_SCALAR(int, dim) MLUOP_IN(x) MLUOP_OUT(y))        \
  OP(log_softmax_backward, mluopLogSoftmaxBackward, MLUOP_SCALAR(int, dim) MLUOP_IN(y)                    \
                     MLUOP_IN(grad_output) MLUOP_OUT(grad_input))                                         \
  /* losses (input [C], [N, C] or [N, C, d...], int64 target of its shape without C, optional class     \
     weights [C]; output [] or the target's shape by reduction) */                                        \
  OP(nll_loss_forward, mluopNllLossForward, MLUOP_SCALAR(int, reduction) MLUOP_SCALAR(int64_t, ignore_index) \
                     MLUOP_IN(input) MLUOP_IN(target) MLUOP_IN_OPT(weight) MLUOP_OUT(output))             \
  OP(nll_loss_backward, mluopNllLossBackward, MLUOP_SCALAR(int, reduction)                                \
                     MLUOP_SCALAR(int64_t, ignore_index) MLUOP_IN(grad_output) MLUOP_IN(target)           \
                     MLUOP_IN_OPT(weight) MLUOP_OUT(grad_input))                                          \
  OP(cross_entropy_forward, mluopCrossEntropyForward, MLUOP_SCALAR(int, reduction)                        \
                     MLUOP_SCALAR(int64_t, ignore_index) MLUOP_SCALAR(double, label_smoothing)            \
                     MLUOP_IN(logits) MLUOP_IN(target) MLUOP_IN_OPT(weight) MLUOP_OUT(output))            \
  OP(cross_entropy_backward, mluopCrossEntropyBackward, MLUOP_SCALAR(int, reduction)                      \
                     MLUOP_SCALAR(int64_t, ignore_index) MLUOP_SCALAR(double, label_smoothing)            \
                     MLUOP_IN(grad_output) MLUOP_IN(logits) MLUOP_IN(target) MLUOP_IN_OPT(weight)         \
                     MLUOP_OUT(grad_logits))                                                              \
  /* random (Philox 4x32-10; seed and offset are arguments) */                                           \
  OP(dropout_forward, mluopDropoutForward, MLUOP_SCALAR(float, p) MLUOP_SCALAR(uint64_t, seed)            \
                     MLUOP_SCALAR(uint64_t, offset) MLUOP_IN(x) MLUOP_OUT(y) MLUOP_OUT(mask))             \
  OP(dropout_backward, mluopDropoutBackward, MLUOP_SCALAR(float, p) MLUOP_IN(grad_output) MLUOP_IN(mask)  \
                     MLUOP_OUT(grad_input))                                                               \
  OP(uniform, mluopRandUniform, MLUOP_SCALAR(uint64_t, seed) MLUOP_SCALAR(uint64_t, offset)               \
                     MLUOP_SCALAR(double, low) MLUOP_SCALAR(double, high) MLUOP_OUT(y))                   \
  OP(normal, mluopRandNormal, MLUOP_SCALAR(uint64_t, seed) MLUOP_SCALAR(uint64_t, offset)                 \
                     MLUOP_SCALAR(double, mean) MLUOP_SCALAR(double, std) MLUOP_OUT(y))                   \
  /* optimizer: torch.optim.SGD's step (init_buffer: the buffer holds nothing yet, as at step 1) */       \
  OP(sgd_step, mluopSgdStep, MLUOP_SCALAR(float, lr) MLUOP_SCALAR(float, momentum)                        \
                     MLUOP_SCALAR(float, dampening) MLUOP_SCALAR(float, weight_decay)                     \
                     MLUOP_SCALAR(bool, nesterov) MLUOP_SCALAR(bool, init_buffer) MLUOP_INOUT(param)      \
                     MLUOP_IN(grad) MLUOP_INOUT_OPT(momentum_buffer))                                     \
  /* indexing, joining, comparison */                                                                     \
  OP(embedding_forward, mluopEmbeddingForward, MLUOP_IN(weight) MLUOP_IN(indices) MLUOP_OUT(y))           \
  OP(embedding_backward, mluopEmbeddingBackward, MLUOP_SCALAR(int64_t, padding_idx) MLUOP_IN(grad_output) \
                     MLUOP_IN(indices) MLUOP_OUT(grad_weight))                                            \
  OP(index_select, mluopIndexSelect, MLUOP_SCALAR(int, dim) MLUOP_IN(x) MLUOP_IN(index) MLUOP_OUT(y))     \
  OP(gather, mluopGather, MLUOP_SCALAR(int, dim) MLUOP_IN(x) MLUOP_IN(index) MLUOP_OUT(y))                \
  OP(scatter_add, mluopScatterAdd, MLUOP_SCALAR(int, dim) MLUOP_INOUT(y) MLUOP_IN(index) MLUOP_IN(src))   \
  OP(concat, mluopConcat, MLUOP_SCALAR(int, dim) MLUOP_IN(a) MLUOP_IN(b) MLUOP_OUT(y))                    \
  OP(split, mluopSplit, MLUOP_SCALAR(int, dim) MLUOP_IN(x) MLUOP_OUT(a) MLUOP_OUT(b))                     \
  OP(where, mluopWhere, MLUOP_IN(condition) MLUOP_IN(a) MLUOP_IN(b) MLUOP_OUT(y))                         \
  OP(eq, mluopEq, MLUOP_IN(a) MLUOP_IN(b) MLUOP_OUT(c))                                                   \
  OP(lt, mluopLt, MLUOP_IN(a) MLUOP_IN(b) MLUOP_OUT(c))                                                   \
  OP(gt, mluopGt, MLUOP_IN(a) MLUOP_IN(b) MLUOP_OUT(c))                                                   \
  /* activations, math, extra reductions, adaptive pooling */                                             \
  OP(gelu, mluopGelu, MLUOP_SCALAR(bool, approximate_tanh) MLUOP_IN(x) MLUOP_OUT(y))                      \
  OP(gelu_backward, mluopGeluBackward, MLUOP_SCALAR(bool, approximate_tanh) MLUOP_IN(grad_output)         \
                     MLUOP_IN(x) MLUOP_OUT(grad_input))                                                   \
  OP(silu, mluopSilu, MLUOP_IN(x) MLUOP_OUT(y))                                                           \
  OP(silu_backward, mluopSiluBackward, MLUOP_IN(grad_output) MLUOP_IN(x) MLUOP_OUT(grad_input))           \
  OP(sin, mluopSin, MLUOP_IN(x) MLUOP_OUT(y))                                                             \
  OP(cos, mluopCos, MLUOP_IN(x) MLUOP_OUT(y))                                                             \
  OP(pow, mluopPow, MLUOP_IN(a) MLUOP_IN(b) MLUOP_OUT(c))                                                 \
  OP(pow_scalar, mluopPowScalar, MLUOP_IN(x) MLUOP_SCALAR(double, exponent) MLUOP_OUT(y))                 \
  OP(norm, mluopReduceNorm, MLUOP_SCALAR(double, p) MLUOP_INTS(dims) MLUOP_SCALAR(bool, keepdim) MLUOP_IN(x) \
                     MLUOP_OUT(y))                                                                        \
  OP(var, mluopReduceVar, MLUOP_INTS(dims) MLUOP_SCALAR(bool, unbiased) MLUOP_SCALAR(bool, keepdim)       \
                     MLUOP_IN(x) MLUOP_OUT(y))                                                            \
  OP(adaptive_avg_pool2d_forward, mluopAdaptiveAvgPool2dForward, MLUOP_IN(x) MLUOP_OUT(y))                \
  OP(adaptive_avg_pool2d_backward, mluopAdaptiveAvgPool2dBackward, MLUOP_IN(grad_output)                  \
                     MLUOP_OUT(grad_input))                                                               \
  /* normalization, rotary position embedding */                                                          \
  OP(layer_norm_forward, mluopLayerNormForward, MLUOP_SCALAR(int, normalized_ndim)                        \
                     MLUOP_SCALAR(double, eps) MLUOP_IN(x) MLUOP_IN_OPT(weight) MLUOP_IN_OPT(bias)        \
                     MLUOP_OUT(y) MLUOP_OUT(mean) MLUOP_OUT(rstd))                                        \
  OP(layer_norm_backward, mluopLayerNormBackward, MLUOP_SCALAR(int, normalized_ndim)                      \
                     MLUOP_IN(grad_output) MLUOP_IN(x) MLUOP_IN(mean) MLUOP_IN(rstd) MLUOP_IN_OPT(weight) \
                     MLUOP_OUT(grad_input) MLUOP_OUT_OPT(grad_weight) MLUOP_OUT_OPT(grad_bias))           \
  OP(rms_norm_forward, mluopRmsNormForward, MLUOP_SCALAR(int, normalized_ndim) MLUOP_SCALAR(double, eps)  \
                     MLUOP_IN(x) MLUOP_IN_OPT(weight) MLUOP_OUT(y) MLUOP_OUT(rstd))                       \
  OP(rms_norm_backward, mluopRmsNormBackward, MLUOP_SCALAR(int, normalized_ndim) MLUOP_IN(grad_output)    \
                     MLUOP_IN(x) MLUOP_IN(rstd) MLUOP_IN_OPT(weight) MLUOP_OUT(grad_input)                \
                     MLUOP_OUT_OPT(grad_weight))                                                          \
  OP(batch_norm_forward, mluopBatchNormForward, MLUOP_SCALAR(bool, training)                              \
                     MLUOP_SCALAR(double, momentum) MLUOP_SCALAR(double, eps) MLUOP_IN(x)                 \
                     MLUOP_IN_OPT(weight) MLUOP_IN_OPT(bias) MLUOP_INOUT_OPT(running_mean)                \
                     MLUOP_INOUT_OPT(running_var) MLUOP_OUT(y) MLUOP_OUT_OPT(save_mean)                   \
                     MLUOP_OUT_OPT(save_invstd))                                                          \
  OP(batch_norm_backward, mluopBatchNormBackward, MLUOP_IN(grad_output) MLUOP_IN(x) MLUOP_IN_OPT(weight)  \
                     MLUOP_IN(save_mean) MLUOP_IN(save_invstd) MLUOP_OUT(grad_input)                      \
                     MLUOP_OUT_OPT(grad_weight) MLUOP_OUT_OPT(grad_bias))                                 \
  OP(rope_forward, mluopRopeForward, MLUOP_SCALAR(double, theta) MLUOP_SCALAR(int64_t, position_offset)   \
                     MLUOP_IN(x) MLUOP_OUT(y))                                                            \
  OP(rope_backward, mluopRopeBackward, MLUOP_SCALAR(double, theta) MLUOP_SCALAR(int64_t, position_offset) \
                     MLUOP_IN(grad_output) MLUOP_OUT(grad_input))                                         \
  /* attention */                                                                                         \
  OP(scaled_dot_product_attention_forward, mluopScaledDotProductAttentionForward, MLUOP_SCALAR(bool, causal) \
                     MLUOP_SCALAR(double, scale) MLUOP_IN(q) MLUOP_IN(k) MLUOP_IN(v) MLUOP_OUT(o)         \
                     MLUOP_OUT(lse))                                                                      \
  OP(scaled_dot_product_attention_backward, mluopScaledDotProductAttentionBackward, MLUOP_SCALAR(bool, causal) \
                     MLUOP_SCALAR(double, scale) MLUOP_IN(grad_o) MLUOP_IN(q) MLUOP_IN(k) MLUOP_IN(v)     \
                     MLUOP_IN(o) MLUOP_IN(lse) MLUOP_OUT(grad_q) MLUOP_OUT(grad_k) MLUOP_OUT(grad_v))     \
  /* optimizers II */                                                                                     \
  OP(adamw_step, mluopAdamwStep, MLUOP_SCALAR(float, lr) MLUOP_SCALAR(float, beta1) MLUOP_SCALAR(float, beta2) \
                     MLUOP_SCALAR(float, eps) MLUOP_SCALAR(float, weight_decay) MLUOP_SCALAR(int64_t, step) \
                     MLUOP_SCALAR(float, grad_scale) MLUOP_SCALAR(bool, amsgrad) MLUOP_INOUT(param)       \
                     MLUOP_IN(grad) MLUOP_INOUT(exp_avg) MLUOP_INOUT(exp_avg_sq)                          \
                     MLUOP_INOUT_OPT(max_exp_avg_sq) MLUOP_INOUT_OPT(model_param))                        \
  /* comparison, logical and bitwise (c bool for comparison and logical; bitwise: integer or bool) */        \
  OP(ne, mluopNe, MLUOP_IN(a) MLUOP_IN(b) MLUOP_OUT(c))                                                   \
  OP(le, mluopLe, MLUOP_IN(a) MLUOP_IN(b) MLUOP_OUT(c))                                                   \
  OP(ge, mluopGe, MLUOP_IN(a) MLUOP_IN(b) MLUOP_OUT(c))                                                   \
  OP(logical_and, mluopLogicalAnd, MLUOP_IN(a) MLUOP_IN(b) MLUOP_OUT(c))                                  \
  OP(logical_or, mluopLogicalOr, MLUOP_IN(a) MLUOP_IN(b) MLUOP_OUT(c))                                    \
  OP(logical_xor, mluopLogicalXor, MLUOP_IN(a) MLUOP_IN(b) MLUOP_OUT(c))                                  \
  OP(logical_not, mluopLogicalNot, MLUOP_IN(x) MLUOP_OUT(y))                                              \
  OP(bitwise_and, mluopBitwiseAnd, MLUOP_IN(a) MLUOP_IN(b) MLUOP_OUT(c))                                  \
  OP(bitwise_or, mluopBitwiseOr, MLUOP_IN(a) MLUOP_IN(b) MLUOP_OUT(c))                                    \
  OP(bitwise_xor, mluopBitwiseXor, MLUOP_IN(a) MLUOP_IN(b) MLUOP_OUT(c))                                  \
  OP(bitwise_not, mluopBitwiseNot, MLUOP_IN(x) MLUOP_OUT(y))                                              \
  /* integer-capable arithmetic: Python's modulo and floor division, clamp to optional bounds */           \
  OP(remainder, mluopRemainder, MLUOP_IN(a) MLUOP_IN(b) MLUOP_OUT(c))                                     \
  OP(floor_divide, mluopFloorDivide, MLUOP_IN(a) MLUOP_IN(b) MLUOP_OUT(c))                                \
  OP(clamp, mluopClamp, MLUOP_SCALAR(bool, has_min) MLUOP_SCALAR(double, min) MLUOP_SCALAR(bool, has_max) \
                     MLUOP_SCALAR(double, max) MLUOP_IN(x) MLUOP_OUT(y))                                  \
  /* rounding and sign (floating and integer), reciprocal and erf (floating) */                           \
  OP(floor, mluopFloor, MLUOP_IN(x) MLUOP_OUT(y))                                                         \
  OP(ceil, mluopCeil, MLUOP_IN(x) MLUOP_OUT(y))                                                           \
  OP(round, mluopRound, MLUOP_IN(x) MLUOP_OUT(y))                                                         \
  OP(trunc, mluopTrunc, MLUOP_IN(x) MLUOP_OUT(y))                                                         \
  OP(sign, mluopSign, MLUOP_IN(x) MLUOP_OUT(y))                                                           \
  OP(reciprocal, mluopReciprocal, MLUOP_IN(x) MLUOP_OUT(y))                                               \
  OP(erf, mluopErf, MLUOP_IN(x) MLUOP_OUT(y))                                                             \
  /* normal with tensor mean and std (broadcast to y; the same Philox stream as normal) */                \
  OP(normal_tensor, mluopRandNormalTensor, MLUOP_SCALAR(uint64_t, seed) MLUOP_SCALAR(uint64_t, offset)    \
                     MLUOP_IN(mean) MLUOP_IN(std) MLUOP_OUT(y))                                           \
  /* rotary embedding from given cos/sin tables [..., D/2] broadcast against x [..., D] (conj: inverse) */ \
  OP(rotary_embedding, mluopRotaryEmbedding, MLUOP_SCALAR(bool, conj) MLUOP_SCALAR(bool, interleaved)     \
                     MLUOP_IN(x) MLUOP_IN(cos) MLUOP_IN(sin) MLUOP_OUT(y))                                \
  /* variable-length attention: packed q [Tq, H, D], k/v [Tk, Hkv, D/Dv], sequence b in rows                \
     [cu_seqlens_*[b], cu_seqlens_*[b + 1]) (int32/int64 device data), o [Tq, H, Dv], lse [H, Tq] */        \
  OP(attention_varlen_forward, mluopAttentionVarlenForward, MLUOP_SCALAR(bool, causal)                    \
                     MLUOP_SCALAR(double, scale) MLUOP_IN(q) MLUOP_IN(k) MLUOP_IN(v) MLUOP_IN(cu_seqlens_q)  \
                     MLUOP_IN(cu_seqlens_k) MLUOP_OUT(o) MLUOP_OUT(lse))                                  \
  OP(attention_varlen_backward, mluopAttentionVarlenBackward, MLUOP_SCALAR(bool, causal)                  \
                     MLUOP_SCALAR(double, scale) MLUOP_IN(grad_o) MLUOP_IN(q) MLUOP_IN(k) MLUOP_IN(v)     \
                     MLUOP_IN(o) MLUOP_IN(lse) MLUOP_IN(cu_seqlens_q) MLUOP_IN(cu_seqlens_k)              \
                     MLUOP_OUT(grad_q) MLUOP_OUT(grad_k) MLUOP_OUT(grad_v))                               \
  /* sequences, sorting and selection along a dim (arange: y[i] = start + i * step, 1-d y; cumsum: y of    \
     x's dtype, or int64 for an integer or bool x; sort: stable, NaN above every number; topk: the k      \
     largest or smallest along dim, sorted, NaN the largest, ties by index) */                            \
  OP(arange, mluopArange, MLUOP_SCALAR(double, start) MLUOP_SCALAR(double, step) MLUOP_OUT(y))            \
  OP(cumsum, mluopCumsum, MLUOP_SCALAR(int, dim) MLUOP_IN(x) MLUOP_OUT(y))                                \
  OP(sort, mluopSort, MLUOP_SCALAR(int, dim) MLUOP_SCALAR(bool, descending) MLUOP_IN(x) MLUOP_OUT(values) \
                     MLUOP_OUT(indices))                                                                  \
  OP(topk, mluopTopk, MLUOP_SCALAR(int64_t, k) MLUOP_SCALAR(int, dim) MLUOP_SCALAR(bool, largest)          \
                     MLUOP_IN(x) MLUOP_OUT(values) MLUOP_OUT(indices))                                    \
  /* MobileNetV3's activations: hardsigmoid(x) = clamp(x + 3, 0, 6) / 6, hardswish(x) = x hardsigmoid(x) */ \
  OP(hardsigmoid, mluopHardsigmoid, MLUOP_IN(x) MLUOP_OUT(y))                                             \
  OP(hardsigmoid_backward, mluopHardsigmoidBackward, MLUOP_IN(grad_output) MLUOP_IN(x)                    \
                     MLUOP_OUT(grad_input))                                                               \
  OP(hardswish, mluopHardswish, MLUOP_IN(x) MLUOP_OUT(y))                                                 \
  OP(hardswish_backward, mluopHardswishBackward, MLUOP_IN(grad_output) MLUOP_IN(x) MLUOP_OUT(grad_input)) \
  /* end of the table */
/* clang-format on */

#endif /* MLU_MLUOPS_SCHEMA_H_ */
