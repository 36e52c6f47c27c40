#pragma once
// grape gen for an encoding instance: type -> instance -> kernel, the road config -> rotary_spec
// -> kernel takes too.
//
//   gen::generate_instance_source(E::make(params), name, provenance, target)
//
// A rotate_qk instance of rotation planes that each follow the token axis becomes a rotary_spec
// (kernel_traits<R>::plane_spec) and takes the rotary_spec template (generate_source, entry
// grape_<name>_rope). Any other rotate_qk instance is baked through its representation's view
// (grape/view/concepts.hpp): relocate() lists the view's arrays, whose contents are baked as
// exact literals, and the view object's own bytes are baked with its pointers nulled
// (generate_view_source, entry grape_<name>_encode). The generated file must find the view's type
// in the embedded header text: grape's views (baked_view below) or, given a user_view, the headers
// of a user's own (grape gen --header, through the Python package).
#include <cstring>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "gen/kernel_gen.hpp"
#include "grape/detail/error.hpp"
#include "grape/inject/rotate_qk.hpp"
#include "grape/view/concepts.hpp"
#include "grape/view/kernel_traits.hpp"
#include "grape/view/planes.hpp"
#include "grape/view/rank2.hpp"
#include "grape/view/scaled_planes.hpp"
#include "grape/view/skew.hpp"

namespace grape::gen {

/// A view the generator can bake: its C++ name in the embedded headers and the header.
template <class V>
struct baked_view {
  static constexpr bool known = false;
};

template <int N>
struct baked_view<planes_view<N>> {
  static constexpr bool known = true;
  static std::string type_name() { return "grape::planes_view<" + std::to_string(N) + ">"; }
  static constexpr const char* header = "grape/view/planes.hpp";
};

template <>
struct baked_view<scaled_planes_view> {
  static constexpr bool known = true;
  static std::string type_name() { return "grape::scaled_planes_view"; }
  static constexpr const char* header = "grape/view/scaled_planes.hpp";
};

template <>
struct baked_view<rank2_view> {
  static constexpr bool known = true;
  static std::string type_name() { return "grape::rank2_view"; }
  static constexpr const char* header = "grape/view/rank2.hpp";
};

template <int N>
struct baked_view<skew_view<N>> {
  static constexpr bool known = true;
  static std::string type_name() { return "grape::skew_view<" + std::to_string(N) + ">"; }
  static constexpr const char* header = "grape/view/skew.hpp";
};

namespace detail {

template <class T>
constexpr bool always_false = false;

template <class T>
constexpr element_kind element_kind_of() {
  if constexpr (std::is_same_v<T, float>) return element_kind::f32;
  else if constexpr (std::is_same_v<T, double>) return element_kind::f64;
  else if constexpr (std::is_same_v<T, int>) return element_kind::i32;
  else if constexpr (std::is_same_v<T, std::int64_t>) return element_kind::i64;
  else if constexpr (std::is_same_v<T, std::uint64_t>) return element_kind::u64;
  else static_assert(always_false<T>, "grape: grape gen bakes arrays of float, double, int, int64 or uint64 only");
}

}  // namespace detail

/// The view's arrays (in relocate's order) and its bytes with every pointer null, so that the
/// baked bytes hold no host address; padding is cleared where the compiler can, so that the same
/// instance gives the same file.
/// A view grape does not know (a user's): its C++ name and the headers that define it, which the
/// generated file embeds (view_kernel_description::user_headers).
struct user_view {
  std::string type_name;
  std::vector<std::pair<std::string, std::string>> headers;  // (path as included, text), dependencies first
};

template <RepresentationView V>
void bake_view(const V& view, view_kernel_description& d, const user_view* user = nullptr) {
  if constexpr (baked_view<V>::known) {
    d.view_type = baked_view<V>::type_name();
    d.view_header = baked_view<V>::header;
  } else {
    if (user == nullptr || user->type_name.empty() || user->headers.empty())
      throw input_error("gen: this view is not one of grape's (planes_view, scaled_planes_view, rank2_view, "
                        "skew_view): give the headers that define it (grape gen --header)");
    d.view_type = user->type_name;
    d.view_header = user->headers.back().first;
    d.user_headers = user->headers;
  }
  d.rank = V::rank;
  d.dim = view.dim();
  d.state_floats = view.state_floats();
  d.scratch_floats = view.scratch_floats();
  V copy = view;
  copy.relocate([&d]<class T>(const T*& p, std::int64_t n) {
    baked_array a;
    a.kind = detail::element_kind_of<T>();
    a.count = p != nullptr && n > 0 ? n : 0;
    a.bytes.resize(static_cast<std::size_t>(a.count) * sizeof(T));
    if (a.count > 0) std::memcpy(a.bytes.data(), p, a.bytes.size());
    d.arrays.push_back(std::move(a));
    p = nullptr;
  });
#if defined(__has_builtin)
#if __has_builtin(__builtin_clear_padding)
  __builtin_clear_padding(&copy);
#endif
#endif
  d.view_bytes.resize(sizeof(V));
  std::memcpy(d.view_bytes.data(), &copy, sizeof(V));
  d.view_align = alignof(V);
}

namespace detail {
template <class I>
struct instance_parts {
  static constexpr bool rotate = false;
};
template <class R, layout_kind Q, layout_kind K>
struct instance_parts<rotate_instance<R, Q, K>> {
  static constexpr bool rotate = true;
  using representation = R;
};
}  // namespace detail

/// Whether generate_instance_source takes instances of type I with a user_view: rotate_qk
/// instances whose representation has a device-safe view.
template <class I>
constexpr bool viewable_instance() {
  using parts = detail::instance_parts<I>;
  if constexpr (!parts::rotate) return false;
  else return KernelRepresentation<typename parts::representation>;
}

/// Whether generate_instance_source takes instances of type I: rotate_qk instances whose
/// representation has a view the generator can bake.
template <class I>
constexpr bool bakeable_instance() {
  using parts = detail::instance_parts<I>;
  if constexpr (!parts::rotate) {
    return false;
  } else if constexpr (!KernelRepresentation<typename parts::representation>) {
    return false;
  } else {
    return baked_view<decltype(std::declval<const typename parts::representation&>().view())>::known;
  }
}

/// One generated file and its entry point.
struct generated_kernel {
  std::string source;
  std::string entry;
};

template <class R, layout_kind Q, layout_kind K>
generated_kernel generate_instance_source(const rotate_instance<R, Q, K>& inst, const std::string& name,
                                          const std::vector<std::string>& provenance, target t,
                                          const user_view* user = nullptr) {
  static_assert(KernelRepresentation<R>,
                "grape: grape gen needs a representation with a device-safe view: give it `view() "
                "const` returning a RepresentationView (grape/view/concepts.hpp)");
  if (const auto spec = kernel_traits<R>::plane_spec(inst); spec && spec->num_axes == 1) {
    const kernel_description k{name, *spec, provenance};
    return {generate_source(k, t), entry_point_name(name, t)};
  }
  view_kernel_description d;
  d.name = name;
  d.provenance = provenance;
  d.head_dim = inst.head_dim;
  d.q_layout = Q;
  d.k_layout = K;
  d.attention_factor = inst.attention_factor;
  bake_view(inst.rep.view(), d, user);
  return {generate_view_source(d, t), view_entry_point_name(name, t)};
}

}  // namespace grape::gen
