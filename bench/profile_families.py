"""Op families for side-by-side profiles: PyTorch's operators (their self CPU time) summed under
kiln's op names, so that `kiln train --profile` and torch.profiler can be read row by row.

An aten operator not listed here is kept under its own name (prefixed "aten::"), so nothing is
hidden; the list grows when a profile shows an unmatched operator worth a row."""

FAMILIES = {
    "matmul": ("aten::mm", "aten::addmm", "aten::bmm", "aten::baddbmm", "aten::matmul", "aten::linear",
               "aten::addmm_", "aten::dot"),
    "copy": ("aten::copy_", "aten::clone", "aten::contiguous", "aten::_to_copy", "aten::to", "aten::cat"),
    "views and allocation": ("aten::view", "aten::reshape", "aten::transpose", "aten::as_strided", "aten::t",
                             "aten::empty_strided", "aten::empty", "aten::expand", "aten::slice", "aten::split",
                             "aten::unsqueeze", "aten::permute", "aten::select", "aten::_unsafe_view",
                             "aten::narrow", "aten::detach", "aten::alias", "aten::resolve_conj",
                             "aten::resolve_neg", "aten::result_type", "aten::lift_fresh"),
    "adamw_update": ("aten::_fused_adamw_", "aten::_foreach_mul_", "aten::_foreach_add_", "aten::_foreach_lerp_",
                     "aten::_foreach_addcmul_", "aten::_foreach_addcdiv_", "aten::_foreach_sqrt",
                     "aten::_foreach_div_", "aten::_foreach_div", "aten::_foreach_sub_", "aten::_foreach_neg",
                     "aten::_foreach_add", "aten::_foreach_reciprocal_", "aten::_foreach_pow",
                     "aten::_foreach_sqrt_", "aten::_foreach_mul", "aten::sqrt", "aten::addcdiv_", "aten::lerp_",
                     "aten::addcmul_"),
    "grad_clip": ("aten::_foreach_norm", "aten::linalg_vector_norm", "aten::stack", "aten::clamp"),
    "scaled_dot_product_attention": ("aten::softmax", "aten::_softmax", "aten::masked_fill",
                                     "aten::masked_fill_", "aten::tril", "aten::where"),
    "scaled_dot_product_attention_backward": ("aten::_softmax_backward_data",),
    "layer_norm": ("aten::native_layer_norm", "aten::layer_norm"),
    "layer_norm_backward": ("aten::native_layer_norm_backward",),
    "gelu_tanh": ("aten::gelu",),
    "gelu_tanh_backward": ("aten::gelu_backward",),
    "cross_entropy": ("aten::log_softmax", "aten::_log_softmax", "aten::nll_loss", "aten::nll_loss_forward",
                      "aten::cross_entropy_loss", "aten::nll_loss_nd"),
    "cross_entropy_backward": ("aten::_log_softmax_backward_data", "aten::nll_loss_backward"),
    "embedding": ("aten::embedding", "aten::index_select"),
    "embedding_backward": ("aten::embedding_backward", "aten::embedding_dense_backward", "aten::index_add_"),
    "conv2d": ("aten::conv2d", "aten::convolution", "aten::_convolution", "aten::mkldnn_convolution",
               "aten::thnn_conv2d", "aten::_slow_conv2d_forward", "aten::_nnpack_spatial_convolution"),
    "conv2d_backward": ("aten::convolution_backward", "aten::mkldnn_convolution_backward",
                        "aten::_slow_conv2d_backward"),
    "batch_norm": ("aten::batch_norm", "aten::_batch_norm_impl_index", "aten::native_batch_norm",
                   "aten::_native_batch_norm_legit", "aten::_native_batch_norm_legit_functional"),
    "batch_norm_backward": ("aten::native_batch_norm_backward",),
    "relu": ("aten::relu", "aten::relu_", "aten::clamp_min", "aten::clamp_min_"),
    "relu_backward": ("aten::threshold_backward",),
    "max_pool2d": ("aten::max_pool2d", "aten::max_pool2d_with_indices"),
    "max_pool2d_backward": ("aten::max_pool2d_with_indices_backward",),
    "adaptive_avg_pool2d": ("aten::adaptive_avg_pool2d", "aten::_adaptive_avg_pool2d", "aten::mean",
                            "aten::_adaptive_avg_pool2d_backward"),
    "elementwise": ("aten::add", "aten::add_", "aten::mul", "aten::mul_", "aten::div", "aten::div_",
                    "aten::sub", "aten::neg", "aten::pow", "aten::tanh", "aten::fill_", "aten::zero_",
                    "aten::zeros", "aten::ones", "aten::sum", "aten::randint", "aten::random_", "aten::tanh_backward",
                    "aten::arange", "aten::item", "aten::_local_scalar_dense", "aten::reciprocal", "aten::rsub"),
}
BY_OP = {op: fam for fam, ops in FAMILIES.items() for op in ops}

# kiln's op names folded the same way (its backward and optimizer ops have their own names).
KILN = {"add": "elementwise", "mul": "elementwise", "mul_scalar": "elementwise", "div_scalar": "elementwise",
        "sum": "elementwise", "fill": "elementwise", "sqrt": "elementwise", "cat": "copy",
        "sub": "elementwise", "add_scalar": "elementwise", "rsqrt": "elementwise", "mean": "batch_norm",
        "var": "batch_norm", "conv_transpose2d": "conv2d_backward", "conv2d_backward_weight": "conv2d_backward",
        "max_pool2d_backward": "max_pool2d_backward", "adaptive_avg_pool2d_backward": "adaptive_avg_pool2d"}


def torch_family(name):
    """The family of a profiler event: autograd's and the optimizer's wrappers (their self time is
    the framework's bookkeeping) are one row."""
    if name.startswith(("autograd::", "Optimizer.")) or name.endswith("Backward0"):
        return "framework (autograd, optimizer wrappers)"
    return BY_OP.get(name, name)


def torch_families(key_averages, steps):
    """{family: self CPU ms per step}, largest first."""
    out = {}
    for e in key_averages:
        fam = torch_family(e.key)
        out[fam] = out.get(fam, 0.0) + e.self_cpu_time_total / 1e3 / steps
    return dict(sorted(((k, round(v, 3)) for k, v in out.items() if v >= 0.001), key=lambda kv: -kv[1]))


def kiln_family(op):
    return KILN.get(op, op)
