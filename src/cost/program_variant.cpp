// Program variants (include/gpemu/program_variant.h): names, parsers, and how
// a variant maps onto the analytical model's options.
#include "gpemu/cost_model.h"

#include <algorithm>
#include <array>
#include <utility>

#include <fmt/format.h>

#include "cost/text_fields.h"
#include "gpemu/error.h"

namespace gpemu {
namespace {

std::string key(std::string_view text) {
  std::string k = cost_detail::to_lower(cost_detail::trim(text));
  std::replace(k.begin(), k.end(), '-', '_');
  return k;
}

template <typename E, std::size_t N>
E parse_named(std::string_view text, std::string_view what, const std::array<std::pair<std::string_view, E>, N>& names,
              std::string_view meaning) {
  const std::string k = key(text);
  for (const auto& [name, value] : names)
    if (k == name) return value;
  std::string accepted;
  for (const auto& [name, value] : names) accepted += (accepted.empty() ? "" : ", ") + std::string(name);
  throw InputError(fmt::format("{}: unknown {} '{}'; accepted: {}", what, meaning, text, accepted));
}

}  // namespace

std::string_view to_string(MatmulPrecision v) { return v == MatmulPrecision::High ? "high" : "highest"; }
std::string_view to_string(AmpFlavour v) {
  switch (v) {
    case AmpFlavour::None: return "none";
    case AmpFlavour::Autocast: return "autocast";
    case AmpFlavour::PureHalf: return "pure_half";
  }
  return "none";
}
std::string_view to_string(HalfType v) { return v == HalfType::BF16 ? "bf16" : "fp16"; }
std::string_view to_string(MemoryFormat v) { return v == MemoryFormat::ChannelsLast ? "channels_last" : "nchw"; }
std::string_view to_string(AttentionKernel v) { return v == AttentionKernel::Fused ? "fused" : "eager"; }

MatmulPrecision parse_matmul_precision(std::string_view text, std::string_view what) {
  // "tf32"/"fp32" are the names benchmark tables use for the same switch.
  static constexpr std::array<std::pair<std::string_view, MatmulPrecision>, 4> names = {{
      {"highest", MatmulPrecision::Highest},
      {"high", MatmulPrecision::High},
      {"fp32", MatmulPrecision::Highest},
      {"tf32", MatmulPrecision::High},
  }};
  return parse_named(text, what, names, "matmul precision");
}

AmpFlavour parse_amp_flavour(std::string_view text, std::string_view what) {
  static constexpr std::array<std::pair<std::string_view, AmpFlavour>, 4> names = {{
      {"none", AmpFlavour::None},
      {"autocast", AmpFlavour::Autocast},
      {"pure_half", AmpFlavour::PureHalf},
      {"o2", AmpFlavour::PureHalf},
  }};
  return parse_named(text, what, names, "AMP flavour");
}

HalfType parse_half_type(std::string_view text, std::string_view what) {
  static constexpr std::array<std::pair<std::string_view, HalfType>, 2> names = {{
      {"fp16", HalfType::FP16},
      {"bf16", HalfType::BF16},
  }};
  return parse_named(text, what, names, "half-precision type");
}

MemoryFormat parse_memory_format(std::string_view text, std::string_view what) {
  static constexpr std::array<std::pair<std::string_view, MemoryFormat>, 4> names = {{
      {"nchw", MemoryFormat::NCHW},
      {"channels_last", MemoryFormat::ChannelsLast},
      {"nhwc", MemoryFormat::ChannelsLast},
      {"contiguous", MemoryFormat::NCHW},
  }};
  return parse_named(text, what, names, "memory format");
}

AttentionKernel parse_attention(std::string_view text, std::string_view what) {
  static constexpr std::array<std::pair<std::string_view, AttentionKernel>, 3> names = {{
      {"eager", AttentionKernel::Eager},
      {"fused", AttentionKernel::Fused},
      {"sdpa", AttentionKernel::Fused},
  }};
  return parse_named(text, what, names, "attention kernel");
}

void parse_fused_ops(std::string_view text, ProgramVariant& into, std::string_view what) {
  constexpr std::string_view kAccepted = "none, all, or a comma-separated set of softmax, layer_norm, gelu, optimizer";
  bool softmax = false, ln = false, gelu = false, opt = false;
  const std::string all = key(text);
  std::string_view rest = all;
  if (rest.empty()) throw InputError(fmt::format("{}: empty; accepted: {}", what, kAccepted));
  while (!rest.empty()) {
    const std::size_t comma = rest.find(',');
    const std::string_view item = cost_detail::trim(rest.substr(0, comma));
    rest = comma == std::string_view::npos ? std::string_view() : rest.substr(comma + 1);
    if (item == "none") continue;
    if (item == "all")
      softmax = ln = gelu = opt = true;
    else if (item == "softmax")
      softmax = true;
    else if (item == "layer_norm" || item == "layernorm")
      ln = true;
    else if (item == "gelu")
      gelu = true;
    else if (item == "optimizer")
      opt = true;
    else
      throw InputError(fmt::format("{}: unknown fused op '{}' in '{}'; accepted: {}", what, item, text, kAccepted));
  }
  into.fused_softmax = softmax;
  into.fused_layer_norm = ln;
  into.fused_gelu = gelu;
  into.fused_optimizer = opt;
}

std::string fused_ops_string(const ProgramVariant& v) {
  std::string s;
  auto add = [&](bool on, std::string_view name) {
    if (on) s += (s.empty() ? "" : ",") + std::string(name);
  };
  add(v.fused_softmax, "softmax");
  add(v.fused_layer_norm, "layer_norm");
  add(v.fused_gelu, "gelu");
  add(v.fused_optimizer, "optimizer");
  return s.empty() ? "none" : s;
}

zoo::Precision zoo_precision(const ProgramVariant& v) {
  if (v.amp == AmpFlavour::None) return zoo::Precision::FP32;
  if (v.amp == AmpFlavour::PureHalf)
    return v.half == HalfType::BF16 ? zoo::Precision::HALF_BF16 : zoo::Precision::HALF_FP16;
  return v.half == HalfType::BF16 ? zoo::Precision::AMP_BF16 : zoo::Precision::AMP_FP16;
}

ProgramVariant variant_from_precision(zoo::Precision p) {
  ProgramVariant v;
  if (p != zoo::Precision::FP32) v.amp = zoo::is_pure_half(p) ? AmpFlavour::PureHalf : AmpFlavour::Autocast;
  if (zoo::is_bf16(p)) v.half = HalfType::BF16;
  return v;
}

AnalyticalOptions to_analytical_options(const ProgramVariant& v, AnalyticalOptions base) {
  base.variant = v;
  base.precision = zoo_precision(v);
  base.tf32_conv = v.tf32_conv;
  base.tf32_matmul = v.matmul_precision == MatmulPrecision::High;
  return base;
}

std::optional<std::string> unsupported_part(const ProgramVariant& v) {
  std::vector<std::string> missing;
  if (v.micro_steps < 1) missing.push_back(fmt::format("{} micro-steps (at least 1)", v.micro_steps));
  if (missing.empty()) return std::nullopt;
  return fmt::format("{} {} not modelled: the model zoo has no graph for {} yet", cost_detail::join(missing),
                     missing.size() == 1 ? "is" : "are", missing.size() == 1 ? "it" : "them");
}

std::string describe(const ProgramVariant& v) {
  std::string amp =
      v.amp == AmpFlavour::None ? std::string("fp32") : fmt::format("amp {} {}", to_string(v.amp), to_string(v.half));
  return fmt::format("{}, matmul precision {}, cudnn tf32 {}, {}, {} attention, fused {}{}, {} micro-step{}", amp,
                     to_string(v.matmul_precision), v.tf32_conv ? "on" : "off", to_string(v.memory_format),
                     to_string(v.attention), fused_ops_string(v), v.foreach_optimizer ? ", foreach optimizer" : "",
                     v.micro_steps, v.micro_steps == 1 ? "" : "s");
}

std::string task_model(std::string_view model, std::string_view task) {
  const std::string m = zoo::canonical_name(model);
  const std::string t = key(task);
  if (t.empty()) return m;
  const bool bert = m == "bert_base" || m == "bert_large";
  if (bert) {
    if (t == "pretraining" || t == "squad") return m + "_" + t;
    if (t == "mlm_all") return m;
    throw InputError(
        fmt::format("--task '{}' for {}: accepted: pretraining (masked-only MLM head + next-sentence "
                    "head), squad (question-answering head), mlm_all (MLM logits at every position)",
                    task, m));
  }
  // Other models have one task: their own (classification for the CNNs,
  // recommendation for DLRM, segmentation for the 3D U-Net, language modelling for GPT/Llama).
  static constexpr std::array<std::string_view, 5> own = {"classification", "recommendation", "segmentation",
                                                          "language_modeling", "default"};
  if (std::find(own.begin(), own.end(), t) != own.end()) return m;
  throw InputError(
      fmt::format("--task '{}' for {}: only BERT models have task variants (pretraining, squad); "
                  "other models accept their own task ({})",
                  task, m, cost_detail::join(own)));
}

namespace {

bool has_suffix(std::string_view name, std::string_view suffix) {
  return name.size() > suffix.size() && name.substr(name.size() - suffix.size()) == suffix;
}

}  // namespace

bool is_fused_graph(std::string_view model) { return has_suffix(model, "_fused"); }
bool runs_multihead_attention(std::string_view model) { return zoo::canonical_name(model) == "vit_b_16"; }

TorchPreset torch_preset(std::string_view version, std::string_view what) {
  const std::string v = key(version);
  TorchPreset p;
  if (v == "1" || v == "1.x" || v.starts_with("1.")) return p;
  if (v == "2" || v == "2.x" || v.starts_with("2.")) {
    p.major = 2;
    p.zero_grad_to_none = p.foreach_optimizer = p.multihead_sdpa = true;
    p.sync = StepSync::Pipelined;
    p.default_host = true;
    return p;
  }
  throw InputError(
      fmt::format("{} '{}': accepted: 1 (PyTorch 1.x defaults, as GPEmu's profiles were measured), 2 "
                  "(PyTorch 2.x defaults: zero_grad to None, foreach optimizers, MultiheadAttention "
                  "through SDPA, steps back to back on the default host)",
                  what, cost_detail::quoted_excerpt(version)));
}

ProgramVariantNames with_torch_defaults(ProgramVariantNames names, const TorchPreset& preset, std::string_view model) {
  if (names.attention.empty())
    names.attention = preset.multihead_sdpa && runs_multihead_attention(model) ? "fused" : "eager";
  if (names.foreach.empty())
    names.foreach =
        preset.foreach_optimizer && names.fused.find("optimizer") == std::string::npos && names.fused != "all" ? "on"
                                                                                                               : "off";
  return names;
}
bool is_sdpa_graph(std::string_view model) { return has_suffix(model, "_sdpa"); }

std::string variant_model(const std::string& model, ProgramVariant& v, std::string_view what) {
  std::string graph = model;
  if (is_fused_graph(model)) {
    v.fused_softmax = v.fused_layer_norm = v.fused_gelu = true;
  } else if (v.fused_chains()) {
    if (!(v.fused_softmax && v.fused_layer_norm && v.fused_gelu))
      throw InputError(fmt::format(
          "{} {}: the zoo's fused graphs fuse the attention softmax, LayerNorm and GELU chains together (scale + "
          "softmax + dropout, bias + dropout + residual add + LayerNorm, and bias + GELU, one kernel each, as "
          "DeepLearningExamples' NVFuser-scripted BERT runs them); accepted: softmax,layer_norm,gelu (optionally "
          "with optimizer), all, optimizer, none",
          what, fused_ops_string(v)));
    graph = model + "_fused";
    if (!zoo::has_model(graph))
      throw InputError(
          fmt::format("{} {}: {} has no fused graph in the zoo; fused softmax/LayerNorm/GELU chains are traced for "
                      "BERT's pretraining and squad heads (--model bert_base|bert_large --task pretraining|squad)",
                      what, fused_ops_string(v), model));
  }
  // The attention flag is named as `what` names the fused one: a flag or a keyword.
  const std::string attention = what.substr(0, 2) == "--" ? "--attention" : "attention";
  if (is_sdpa_graph(model)) {
    v.attention = AttentionKernel::Fused;
  } else if (v.attention == AttentionKernel::Fused) {
    if (v.fused_chains())
      throw InputError(fmt::format(
          "{} fused with {} {}: the zoo has no graph with both fused attention and fused softmax/LayerNorm/GELU "
          "chains (the fused attention kernel does the softmax itself); accepted: {} fused with {} none or "
          "optimizer, or {} eager with the fused chains",
          attention, what, fused_ops_string(v), attention, what, attention));
    graph = model + "_sdpa";
    if (!zoo::has_model(graph))
      throw InputError(
          fmt::format("{} fused: {} has no fused-attention graph in the zoo; it is traced for the models with "
                      "eager self-attention: bert_base, bert_large (and their pretraining and squad tasks), "
                      "gpt2_small, gpt2_medium, llama2_7b, vit_b_16",
                      attention, model));
  }
  return graph;
}

ProgramVariant to_variant(const ProgramVariantNames& f, zoo::Precision precision, bool keywords) {
  const auto name = [keywords](std::string flag) {
    if (!keywords) return "--" + flag;
    std::replace(flag.begin(), flag.end(), '-', '_');
    return flag;
  };
  ProgramVariant v = variant_from_precision(precision);
  v.matmul_precision = parse_matmul_precision(f.matmul_precision, name("matmul-precision"));
  if (f.cudnn_tf32 == "on")
    v.tf32_conv = true;
  else if (f.cudnn_tf32 == "off")
    v.tf32_conv = false;
  else
    throw InputError(fmt::format("{}: unknown value '{}'; accepted: on, off", name("cudnn-tf32"), f.cudnn_tf32));
  const AmpFlavour amp = parse_amp_flavour(f.amp, name("amp"));
  if (v.amp != AmpFlavour::None) {
    if (amp == AmpFlavour::None)
      throw InputError(fmt::format("{} none contradicts {} amp/bf16; use {} fp32 for a run without AMP", name("amp"),
                                   name("precision"), name("precision")));
    v.amp = amp;
  }
  v.memory_format = parse_memory_format(f.memory_format, name("memory-format"));
  v.attention = parse_attention(f.attention, name("attention"));
  parse_fused_ops(f.fused, v, name("fused"));
  if (f.foreach == "on")
    v.foreach_optimizer = true;
  else if (f.foreach == "off")
    v.foreach_optimizer = false;
  else
    throw InputError(
        fmt::format("{}: unknown value '{}'; accepted: on (foreach multi-tensor optimizer kernels, "
                    "PyTorch 2's default), off (one kernel per parameter)",
                    name("foreach"), f.foreach));
  if (v.foreach_optimizer && v.fused_optimizer)
    throw InputError(fmt::format("{} on with {} optimizer: a fused optimizer is one kernel already; give one of them",
                                 name("foreach"), name("fused")));
  if (f.micro_steps < 1)
    throw InputError(
        fmt::format("{} {}: must be at least 1 (1: no gradient accumulation)", name("micro-steps"), f.micro_steps));
  v.micro_steps = f.micro_steps;
  return v;
}

}  // namespace gpemu
