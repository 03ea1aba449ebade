/* Initializers (torch.nn.init): fill a tensor in place with values drawn from kiln's Philox
 * generator (kn_manual_seed), so a seed reproduces a model exactly. They run without grad
 * history, return KN_OK or an error, and take any float tensor (a view is filled in place). */
#ifndef KILN_NN_INIT_H
#define KILN_NN_INIT_H

#include <stdint.h>

#include "kiln/status.h"
#include "kiln/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum kn_fan_mode { KN_FAN_IN = 0, KN_FAN_OUT } kn_fan_mode;
typedef enum kn_nonlinearity {
    KN_NL_LINEAR = 0, KN_NL_SIGMOID, KN_NL_TANH, KN_NL_RELU, KN_NL_LEAKY_RELU, KN_NL_SELU
} kn_nonlinearity;

/* torch.nn.init.calculate_gain: 1, 1, 5/3, sqrt(2), sqrt(2 / (1 + param^2)), 3/4. */
KN_API double kn_init_gain(kn_nonlinearity nl, double param);
/* PyTorch's fans of a weight with at least 2 dims: fan_in = size(1) * receptive field,
 * fan_out = size(0) * receptive field. */
KN_API kn_status kn_init_fans(kn_tensor *t, int64_t *fan_in, int64_t *fan_out);

KN_API kn_status kn_init_constant_(kn_tensor *t, double value);
KN_API kn_status kn_init_zeros_(kn_tensor *t);
KN_API kn_status kn_init_ones_(kn_tensor *t);
KN_API kn_status kn_init_uniform_(kn_tensor *t, double low, double high);
KN_API kn_status kn_init_normal_(kn_tensor *t, double mean, double std);
/* He initialization: std = gain(nl, a) / sqrt(fan); the uniform form draws from
 * +-sqrt(3) * std. PyTorch's default nonlinearity is leaky_relu with slope a. */
KN_API kn_status kn_init_kaiming_uniform_(kn_tensor *t, double a, kn_fan_mode mode, kn_nonlinearity nl);
KN_API kn_status kn_init_kaiming_normal_(kn_tensor *t, double a, kn_fan_mode mode, kn_nonlinearity nl);
/* Glorot initialization: std = gain * sqrt(2 / (fan_in + fan_out)); uniform +-sqrt(3) * std. */
KN_API kn_status kn_init_xavier_uniform_(kn_tensor *t, double gain);
KN_API kn_status kn_init_xavier_normal_(kn_tensor *t, double gain);

#ifdef __cplusplus
}
#endif
#endif
