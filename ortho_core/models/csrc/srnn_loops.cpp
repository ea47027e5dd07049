// The time loops of the packed SRNN (ortho_core/models/srnn_kernels.py) for one block of
// members, in C++: per step one batched matmul through ATen and one fused elementwise pass
// written here, with no Python between the steps. Loaded by ortho_core/models/srnn_native.py
// and registered as torch.ops.ortho_srnn.{forward_states,backward_states}.
#include <ATen/core/Tensor.h>
#include <ATen/ops/baddbmm.h>
#include <ATen/ops/bmm.h>
#include <ATen/ops/empty.h>
#include <c10/core/impl/LocalDispatchKeySet.h>
#include <torch/library.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <optional>

namespace {

// tanh(x) as the rational function of Eigen's float tanh (relative error below 4e-7),
// which GCC vectorises; std::tanh is a scalar call.
inline float tanh_of(float x) {
  constexpr float clamp = 7.90531110763549805f;
  const float c = x < -clamp ? -clamp : (x > clamp ? clamp : x);
  const float c2 = c * c;
  float p = c2 * -2.76076847742355e-16f + 2.00018790482477e-13f;
  p = c2 * p + -8.60467152213735e-11f;
  p = c2 * p + 5.12229709037114e-08f;
  p = c2 * p + 1.48572235717979e-05f;
  p = c2 * p + 6.37261928875436e-04f;
  p = c2 * p + 4.89352455891786e-03f;
  p = c * p;
  float q = c2 * 1.19825839466702e-06f + 1.18534705686654e-04f;
  q = c2 * q + 2.26843463243900e-03f;
  q = c2 * q + 4.89352518554385e-03f;
  return std::fabs(x) < 0.0004f ? x : p / q;
}

inline double tanh_of(double x) { return std::tanh(x); }

// h_t = tanh(a_t) for every member of the block (states' member stride `stride`, the
// scratch's n = B·H), where a_t = W_hh h_{t-1} (`prod`, or 0 for t = 0 when it is null) plus
// either the pre-activation already in h_t (`inputs` null) or, for one input per step, the
// outer product b_h + x_t w_xh computed here from `inputs` (B) and `w_xh`, `b_h` (k, H).
template <typename T>
void activate(const T* prod, T* hs, int64_t stride, int64_t members, int64_t batch,
              int64_t hidden, const T* inputs, const T* w_xh, const T* b_h) {
  const int64_t n = batch * hidden;
  for (int64_t m = 0; m < members; ++m) {
    T* __restrict h = hs + m * stride;
    const T* __restrict p = prod ? prod + m * n : nullptr;
    if (inputs == nullptr) {
      for (int64_t i = 0; i < n; ++i) h[i] = tanh_of(h[i] + (p ? p[i] : T(0)));
      continue;
    }
    const T* __restrict w = w_xh + m * hidden;
    const T* __restrict b = b_h + m * hidden;
    for (int64_t r = 0; r < batch; ++r) {
      const T x = inputs[r];
      T* __restrict hr = h + r * hidden;
      const T* __restrict pr = p ? p + r * hidden : nullptr;
      for (int64_t j = 0; j < hidden; ++j) {
        hr[j] = tanh_of(b[j] + x * w[j] + (pr ? pr[j] : T(0)));
      }
    }
  }
}

// da[i] = dh[i] * (1 - h[i]^2): the derivative of tanh through its output.
template <typename T>
void tanh_backward_rows(const T* dh, const T* h, T* da, int64_t stride, int64_t members,
                        int64_t n) {
  for (int64_t m = 0; m < members; ++m) {
    const T* __restrict g = dh + m * n;
    const T* __restrict s = h + m * stride;
    T* __restrict d = da + m * stride;
    for (int64_t i = 0; i < n; ++i) d[i] = g[i] * (T(1) - s[i] * s[i]);
  }
}

// Below autograd and view tracking: the loops are never differentiated through. Writes through
// these views do not bump `out`'s version counter, so it is bumped once at the end.
struct BelowAutograd {
  c10::impl::ExcludeDispatchKeyGuard guard{c10::autograd_dispatch_keyset_with_ADInplaceOrView};
};

template <typename T>
void forward_loop(const at::Tensor& x_rows, const at::Tensor& w_xh, const at::Tensor& w_hh,
                  const at::Tensor& b_h, const at::Tensor& out, int64_t projection_steps) {
  const int64_t k = out.size(0), steps = out.size(1), batch = out.size(2), hidden = out.size(3);
  const int64_t n = batch * hidden, stride = steps * n;
  const at::Tensor w_hh_t = w_hh.transpose(1, 2).contiguous();  // srnn_kernels.step_weights
  at::Tensor scratch = at::empty({k, batch, hidden}, out.options());
  T* hs = out.data_ptr<T>();
  const T* prod = scratch.data_ptr<T>();
  if (x_rows.size(1) == 1) {  // one input (pixels): b_h + x_t w_xh inside the elementwise pass
    const at::Tensor xs = x_rows.contiguous(), w = w_xh.contiguous(), b = b_h.contiguous();
    const T *x = xs.data_ptr<T>(), *wp = w.data_ptr<T>(), *bp = b.data_ptr<T>();
    for (int64_t t = 0; t < steps; ++t) {
      if (t) at::bmm_out(scratch, out.select(1, t - 1), w_hh_t);
      activate<T>(t ? prod : nullptr, hs + t * n, stride, k, batch, hidden, x + t * batch, wp,
                  bp);
    }
    return;
  }
  const at::Tensor bias = b_h.unsqueeze(1), w_xh_t = w_xh.transpose(1, 2);
  for (int64_t start = 0; start < steps; start += projection_steps) {
    const int64_t stop = std::min(start + projection_steps, steps);
    const at::Tensor rows = x_rows.narrow(0, start * batch, (stop - start) * batch);
    at::Tensor pre = out.narrow(1, start, stop - start).view({k, -1, hidden});
    at::baddbmm_out(pre, bias, rows.expand({k, -1, -1}), w_xh_t);
    for (int64_t t = start; t < stop; ++t) {
      if (t) at::bmm_out(scratch, out.select(1, t - 1), w_hh_t);
      activate<T>(t ? prod : nullptr, hs + t * n, stride, k, batch, hidden, nullptr, nullptr,
                  nullptr);
    }
  }
}

void forward_states(const at::Tensor& x_rows, const at::Tensor& w_xh, const at::Tensor& w_hh,
                    const at::Tensor& b_h, const at::Tensor& out, int64_t projection_steps) {
  TORCH_CHECK(out.is_contiguous(), "forward_states: out must be contiguous");
  {
    BelowAutograd below;
    if (out.scalar_type() == at::kFloat) {
      forward_loop<float>(x_rows, w_xh, w_hh, b_h, out, projection_steps);
    } else {
      TORCH_CHECK(out.scalar_type() == at::kDouble, "forward_states: float32 or float64");
      forward_loop<double>(x_rows, w_xh, w_hh, b_h, out, projection_steps);
    }
  }
  out.unsafeGetTensorImpl()->bump_version();
}

// Every `projection_steps` steps, from the rows of ∂a just written (still in cache):
// sums += Σ_t inputs_t ∂a_t over them, and grad_hh += Σ_{t≥1} ∂a_tᵀ h_{t−1}.
template <typename T>
void backward_loop(const at::Tensor& hs, const at::Tensor& w_hh, const at::Tensor& grad,
                   const at::Tensor& out, const std::optional<at::Tensor>& inputs,
                   const std::optional<at::Tensor>& sums, const std::optional<at::Tensor>& grad_hh,
                   int64_t projection_steps) {
  const int64_t k = hs.size(0), steps = hs.size(1), batch = hs.size(2), hidden = hs.size(3);
  const int64_t n = batch * hidden, stride = steps * n;
  at::Tensor dh = grad.contiguous().clone();
  const T* h = hs.data_ptr<T>();
  T* da = out.data_ptr<T>();
  const T* g = dh.data_ptr<T>();
  tanh_backward_rows<T>(g, h + (steps - 1) * n, da + (steps - 1) * n, stride, k, n);
  int64_t done = steps;  // the steps from here on are written and not yet summed
  for (int64_t t = steps - 1; t >= 0; --t) {
    if (t) {
      at::bmm_out(dh, out.select(1, t), w_hh);
      tanh_backward_rows<T>(g, h + (t - 1) * n, da + (t - 1) * n, stride, k, n);
    }
    const int64_t first = t ? t - 1 : 0;
    if (first % projection_steps != 0 || done <= first) continue;
    if (sums && inputs) {
      const at::Tensor rows = out.narrow(1, first, done - first)
                                  .view({k, (done - first) * batch, hidden});
      const at::Tensor xs = inputs->narrow(1, first * batch, (done - first) * batch);
      sums->baddbmm_(xs.expand({k, -1, -1}), rows);
    }
    const int64_t later = std::max<int64_t>(first, 1);
    if (grad_hh && done > later) {
      const at::Tensor rows = out.narrow(1, later, done - later)
                                  .view({k, (done - later) * batch, hidden});
      const at::Tensor earlier = hs.narrow(1, later - 1, done - later)
                                     .view({k, (done - later) * batch, hidden});
      grad_hh->baddbmm_(rows.transpose(1, 2), earlier);
    }
    done = first;
  }
}

void backward_states(const at::Tensor& hs, const at::Tensor& w_hh, const at::Tensor& grad,
                     const at::Tensor& out, const std::optional<at::Tensor>& inputs,
                     const std::optional<at::Tensor>& sums,
                     const std::optional<at::Tensor>& grad_hh, int64_t projection_steps) {
  TORCH_CHECK(hs.is_contiguous() && out.is_contiguous(),
              "backward_states: hs and out must be contiguous");
  {
    BelowAutograd below;
    if (out.scalar_type() == at::kFloat) {
      backward_loop<float>(hs, w_hh, grad, out, inputs, sums, grad_hh, projection_steps);
    } else {
      TORCH_CHECK(out.scalar_type() == at::kDouble, "backward_states: float32 or float64");
      backward_loop<double>(hs, w_hh, grad, out, inputs, sums, grad_hh, projection_steps);
    }
  }
  for (const auto& written : {std::optional<at::Tensor>(out), sums, grad_hh}) {
    if (written) written->unsafeGetTensorImpl()->bump_version();
  }
}

}  // namespace

TORCH_LIBRARY(ortho_srnn, m) {
  m.def("forward_states(Tensor x_rows, Tensor w_xh, Tensor w_hh, Tensor b_h, Tensor(a!) out, "
        "int projection_steps) -> ()");
  m.def("backward_states(Tensor hs, Tensor w_hh, Tensor grad, Tensor(a!) out, Tensor? inputs, "
        "Tensor(b!)? sums, Tensor(c!)? grad_hh, int projection_steps) -> ()");
}

TORCH_LIBRARY_IMPL(ortho_srnn, CPU, m) {
  m.impl("forward_states", &forward_states);
  m.impl("backward_states", &backward_states);
}
