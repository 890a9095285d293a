// Internal: name tables of the DLIO enumerations.
#pragma once

#include <array>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include "gpemu/dlio.h"

namespace gpemu::dlio::detail {

template <class E>
struct EnumTable;

#define GPEMU_DLIO_ENUM_TABLE(E, ...)                                        \
  template <>                                                                \
  struct EnumTable<E> {                                                      \
    static constexpr std::pair<E, std::string_view> items[] = {__VA_ARGS__}; \
  };

GPEMU_DLIO_ENUM_TABLE(Framework, {Framework::TensorFlow, "tensorflow"}, {Framework::PyTorch, "pytorch"})
GPEMU_DLIO_ENUM_TABLE(DataFormat, {DataFormat::Tfrecord, "tfrecord"}, {DataFormat::Hdf5, "hdf5"},
                      {DataFormat::Csv, "csv"}, {DataFormat::Npz, "npz"}, {DataFormat::Npy, "npy"},
                      {DataFormat::Hdf5Opt, "hdf5_opt"}, {DataFormat::Jpeg, "jpeg"}, {DataFormat::Png, "png"},
                      {DataFormat::IndexedBinary, "indexed_binary"},
                      {DataFormat::MmapIndexedBinary, "mmap_indexed_binary"}, {DataFormat::Synthetic, "synthetic"},
                      {DataFormat::Parquet, "parquet"})
GPEMU_DLIO_ENUM_TABLE(DataLoaderKind, {DataLoaderKind::TensorFlow, "tensorflow"}, {DataLoaderKind::PyTorch, "pytorch"},
                      {DataLoaderKind::Dali, "dali"}, {DataLoaderKind::NativeDali, "native_dali"},
                      {DataLoaderKind::Synthetic, "synthetic"}, {DataLoaderKind::Custom, "custom"})
GPEMU_DLIO_ENUM_TABLE(Shuffle, {Shuffle::Off, "off"}, {Shuffle::Seed, "seed"}, {Shuffle::Random, "random"})
GPEMU_DLIO_ENUM_TABLE(ReadType, {ReadType::OnDemand, "on_demand"}, {ReadType::Memory, "memory"})
GPEMU_DLIO_ENUM_TABLE(FileAccess, {FileAccess::Multi, "multi"}, {FileAccess::Shared, "shared"},
                      {FileAccess::Collective, "collective"}, {FileAccess::Mpio, "mpio"}, {FileAccess::Posix, "posix"})
GPEMU_DLIO_ENUM_TABLE(Compression, {Compression::None, "none"}, {Compression::Gzip, "gzip"}, {Compression::Lzf, "lzf"},
                      {Compression::Bz2, "bz2"}, {Compression::Zip, "zip"}, {Compression::Xz, "xz"})
GPEMU_DLIO_ENUM_TABLE(CheckpointType, {CheckpointType::RankZero, "rank_zero"}, {CheckpointType::AllRanks, "all_ranks"})
GPEMU_DLIO_ENUM_TABLE(CheckpointMode, {CheckpointMode::Default, "default"}, {CheckpointMode::Subset, "subset"})
GPEMU_DLIO_ENUM_TABLE(DataType, {DataType::Fp16, "fp16"}, {DataType::Bf16, "bf16"}, {DataType::Fp32, "fp32"},
                      {DataType::Int8, "int8"}, {DataType::Uint8, "uint8"})
GPEMU_DLIO_ENUM_TABLE(Profiler, {Profiler::None, "none"}, {Profiler::Iostat, "iostat"}, {Profiler::Darshan, "darshan"},
                      {Profiler::Tensorboard, "tensorboard"})
GPEMU_DLIO_ENUM_TABLE(StorageType, {StorageType::LocalFs, "local_fs"}, {StorageType::ParallelFs, "parallel_fs"})
GPEMU_DLIO_ENUM_TABLE(StepTimeSource, {StepTimeSource::Auto, "auto"}, {StepTimeSource::Config, "config"},
                      {StepTimeSource::CostModel, "cost_model"})
GPEMU_DLIO_ENUM_TABLE(Distribution, {Distribution::Normal, "normal"}, {Distribution::Uniform, "uniform"},
                      {Distribution::Gamma, "gamma"}, {Distribution::Exponential, "exponential"},
                      {Distribution::Poisson, "poisson"})

#undef GPEMU_DLIO_ENUM_TABLE

template <class E>
std::string_view enum_name(E value) {
  for (const auto& [v, name] : EnumTable<E>::items) {
    if (v == value) return name;
  }
  return "?";
}

// Case-insensitive match on the DLIO spelling.
template <class E>
std::optional<E> parse_enum(std::string_view text) {
  for (const auto& [v, name] : EnumTable<E>::items) {
    if (name.size() != text.size()) continue;
    bool same = true;
    for (std::size_t i = 0; i < name.size() && same; ++i) {
      char c = text[i];
      if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
      same = c == name[i];
    }
    if (same) return v;
  }
  return std::nullopt;
}

template <class E>
std::string enum_choices() {
  std::string out = "one of ";
  bool first = true;
  for (const auto& [v, name] : EnumTable<E>::items) {
    if (!first) out += ", ";
    out += name;
    first = false;
  }
  return out;
}

}  // namespace gpemu::dlio::detail
