#pragma once
// Pieces of text both kinds of generated file share (kernel_gen.cpp: a rotary_spec's kernel;
// view_gen.cpp: an instance's view): the entry points' argument description, the entry points
// themselves with their argument checks, the storage conversions and the CUDA bad-position query,
// filled by @NAME@ substitution.
#include <map>
#include <string>
#include <vector>

namespace grape::gen::detail {

/// The header comment's description of the entry point's arguments; @POSITIONS_DOC@ is the
/// positions line(s), which differ (tokens_positions_doc for the rotary_spec kernel).
extern const char* const arguments_doc;
extern const char* const tokens_positions_doc;
/// check_shapes(...) and rows_disjoint(...) (kHeadDim comes from the template).
extern const char* const shape_checks;
/// f32_io, bf16_io and (with _Float16) f16_io for C++; GRAPE_@UNAME@_HAVE_F16 says which. (A CUDA
/// source carries the kernels' own grape::cuda::storage<T>: embedded_headers.hpp.)
extern const char* const cpp_storage_io;
/// The head of a C++ file's per-token loop over Q (qt) and K (kt) of storage IO (OpenMP when the
/// compiler has it): the template writes the loop's body and closes it.
extern const char* const cpp_token_loop;
/// The doc and definition of @ENTRY@_bad_positions (reads grape_@NAME@_detail::bad_position_flag).
extern const char* const cuda_bad_positions_doc;
extern const char* const cuda_bad_positions;

/// The C entry points @ENTRY@: check dtype, shapes and positions, then run the detail namespace's
/// code for the dtype's storage type. What differs between the two kinds of file are tags filled
/// with the template's other values:
///   @CHECK_POSITIONS@  (C++) the loop that returns 4 on a negative position, over [tokens] or
///                      [rank, tokens] positions;
///   @HEADS_LIMIT@      (CUDA) the largest q_heads + k_heads whose kernel indices fit an int:
///                      int_max over the units of work per head (int_max / d::kHalf for RoPE's
///                      planes, int_max for a view's whole heads);
///   @ENTRY_SETUP@      lines run once the call has work, before the dispatch (the view's rebuild);
///   @RUN_TOKENS@       (C++) the function run per storage type: rotate_tokens or encode_tokens;
///   @VIEW_ARG@         "view, " where that function or launch takes the view first, else empty.
extern const char* const cpp_entry;
extern const char* const cuda_entry;

/// The snippets above by their tags (ARGS_DOC, SHAPE_CHECKS, CPP_IO, CPP_TOKEN_LOOP,
/// CUDA_BAD_POSITIONS_DOC, CUDA_BAD_POSITIONS, CPP_ENTRY, CUDA_ENTRY): a template's first
/// substitution, before its own values.
std::map<std::string, std::string> shared_snippets();

/// Every @KEY@ in text replaced by its value.
std::string substitute(std::string text, const std::map<std::string, std::string>& values);

/// "#include <x>\n" for each standard header the embedded text needs, but <cstdint> (the
/// templates include it themselves).
std::string include_lines(const std::vector<std::string>& std_includes);

/// The name in upper case, for macros.
std::string upper(const std::string& name);

}  // namespace grape::gen::detail
