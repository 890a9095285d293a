// The step-time CSV (include/gpemu/step_times.h): reading it, and mapping each
// row's stated program onto the programs gpemu can run.
#include "cost/step_times.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <fstream>
#include <sstream>

#include <fmt/format.h>

#include "cost/text_fields.h"
#include "gpemu/catalog.h"
#include "gpemu/error.h"
#include "gpemu/zoo.h"

namespace gpemu {
namespace {

using cost_detail::join;
using cost_detail::to_lower;
using cost_detail::trim;

// RFC 4180 records: fields separated by commas, quoted fields may hold commas,
// doubled quotes and line breaks. Returns the records with their first line.
struct Record {
  int line = 0;
  std::vector<std::string> fields;
};

std::vector<Record> csv_records(const std::string& text, const std::string& file) {
  std::vector<Record> out;
  Record cur;
  std::string field;
  bool quoted = false, field_started = false;
  int line = 1;
  cur.line = 1;
  std::size_t i = 0;
  if (text.starts_with("\xEF\xBB\xBF")) i = 3;
  auto end_field = [&] {
    cur.fields.push_back(std::move(field));
    field.clear();
    field_started = false;
  };
  auto end_record = [&] {
    end_field();
    const bool blank = cur.fields.size() == 1 && trim(cur.fields[0]).empty();
    if (!blank) out.push_back(std::move(cur));
    cur = Record{};
    cur.line = line;
  };
  for (; i < text.size(); ++i) {
    const char c = text[i];
    if (quoted) {
      if (c == '"') {
        if (i + 1 < text.size() && text[i + 1] == '"') {
          field += '"';
          ++i;
        } else {
          quoted = false;
        }
      } else {
        if (c == '\n') ++line;
        field += c;
      }
      continue;
    }
    if (c == '"' && !field_started) {
      quoted = field_started = true;
    } else if (c == ',') {
      end_field();
    } else if (c == '\r' && i + 1 < text.size() && text[i + 1] == '\n') {
      continue;
    } else if (c == '\n') {
      ++line;
      end_record();
    } else {
      field += c;
      field_started = true;
    }
  }
  if (quoted)
    throw InputError(fmt::format("{}:{}: a quoted field is not closed before the end of the file", file, cur.line));
  if (field_started || !cur.fields.empty()) end_record();
  return out;
}

constexpr std::array<std::string_view, 22> kColumns = {"gpu",
                                                       "model",
                                                       "precision",
                                                       "batch_size",
                                                       "seq_len",
                                                       "task",
                                                       "optimizer",
                                                       "matmul_precision",
                                                       "conv_precision",
                                                       "amp",
                                                       "memory_format",
                                                       "attention",
                                                       "fused_ops",
                                                       "mlm_positions",
                                                       "includes_h2d",
                                                       "includes_loss_and_optimizer",
                                                       "micro_steps",
                                                       "confidence",
                                                       "published_iteration_ms",
                                                       "published_figure",
                                                       "source",
                                                       "notes"};

struct Enumerated {
  std::string_view column;
  std::vector<std::string_view> values;
};
// The values gpu_training_step_times.md defines per enumerated column.
const std::vector<Enumerated>& enumerated() {
  static const std::vector<Enumerated> e = {
      {"precision", {"fp32", "tf32", "amp", "fp16", "bf16"}},
      {"task", {"classification", "pretraining", "squad", "lm", "recommendation", "segmentation", "unknown"}},
      {"optimizer", {"sgd", "adam", "adamw", "lamb", "none", "unknown"}},
      {"matmul_precision", {"fp32", "tf32", "fp16", "bf16", "unknown"}},
      {"conv_precision", {"fp32", "tf32", "fp16", "bf16", "n/a", "unknown"}},
      {"amp", {"none", "autocast", "pure_half", "unknown"}},
      {"memory_format", {"nchw", "channels_last", "n/a", "unknown"}},
      {"attention", {"eager", "fused", "n/a", "unknown"}},
      {"fused_ops", {"none", "some", "most", "unknown"}},
      {"mlm_positions", {"all", "masked", "n/a", "unknown"}},
      {"includes_h2d", {"yes", "no", "unknown"}},
      {"includes_loss_and_optimizer", {"yes", "no", "unknown"}},
      {"confidence", {"stated", "inferred"}},
  };
  return e;
}

}  // namespace

std::string StepTimeRow::source_repo() const {
  const std::size_t at = source.find('@');
  std::string_view s = at == std::string::npos ? std::string_view(source) : std::string_view(source).substr(0, at);
  const std::size_t space = s.find(' ');
  if (space != std::string_view::npos) s = s.substr(0, space);
  return std::string(trim(s));
}

std::vector<StepTimeRow> read_step_times(const std::filesystem::path& path) {
  const std::string file = path.string();
  const std::string text = cost_detail::read_text_file(file);
  const std::vector<Record> records = csv_records(text, file);
  if (records.empty()) throw InputError(fmt::format("{}: empty; expected a header row naming the columns", file));
  std::map<std::string, std::size_t> col;
  for (std::size_t i = 0; i < records[0].fields.size(); ++i) col[to_lower(trim(records[0].fields[i]))] = i;
  for (std::string_view c : kColumns)
    if (!col.contains(std::string(c)))
      throw InputError(fmt::format("{}:{}: the header has no '{}' column; the step-time format needs: {}", file,
                                   records[0].line, c, join(kColumns)));
  std::vector<StepTimeRow> rows;
  for (std::size_t r = 1; r < records.size(); ++r) {
    const Record& rec = records[r];
    auto get = [&](std::string_view c) -> std::string {
      const std::size_t i = col.at(std::string(c));
      if (i >= rec.fields.size())
        throw InputError(fmt::format("{}:{}: the row has {} fields, too few for column '{}' (field {})", file, rec.line,
                                     rec.fields.size(), c, i + 1));
      return std::string(trim(rec.fields[i]));
    };
    auto bad = [&](std::string_view c, const std::string& v, std::string_view accepted) {
      return InputError(fmt::format("{}:{}: column '{}' is '{}'; expected {}", file, rec.line, c, v, accepted));
    };
    StepTimeRow row;
    row.line = rec.line;
    row.gpu = get("gpu");
    row.model = to_lower(get("model"));
    if (row.gpu.empty()) throw bad("gpu", row.gpu, "a GPU name");
    if (row.model.empty()) throw bad("model", row.model, "a model name");
    const std::string b = get("batch_size");
    const auto batch = cost_detail::parse_batch_size(b);
    if (!batch) throw bad("batch_size", b, "a whole number >= 1");
    row.batch_size = *batch;
    const std::string s = get("seq_len");
    if (!s.empty()) {
      const auto seq = cost_detail::parse_batch_size(s);
      if (!seq) throw bad("seq_len", s, "a whole number >= 1 or empty");
      row.seq_len = *seq;
    }
    for (const Enumerated& e : enumerated()) {
      const std::string v = to_lower(get(e.column));
      if (std::find(e.values.begin(), e.values.end(), v) == e.values.end())
        throw bad(e.column, v, "one of " + join(e.values));
      std::string* target = nullptr;
      if (e.column == "precision")
        target = &row.precision;
      else if (e.column == "task")
        target = &row.task;
      else if (e.column == "optimizer")
        target = &row.optimizer;
      else if (e.column == "matmul_precision")
        target = &row.matmul_precision;
      else if (e.column == "conv_precision")
        target = &row.conv_precision;
      else if (e.column == "amp")
        target = &row.amp;
      else if (e.column == "memory_format")
        target = &row.memory_format;
      else if (e.column == "attention")
        target = &row.attention;
      else if (e.column == "fused_ops")
        target = &row.fused_ops;
      else if (e.column == "mlm_positions")
        target = &row.mlm_positions;
      else if (e.column == "includes_h2d")
        target = &row.includes_h2d;
      else if (e.column == "includes_loss_and_optimizer")
        target = &row.includes_loss_and_optimizer;
      else if (e.column == "confidence")
        target = &row.confidence;
      *target = v;
    }
    const std::string m = to_lower(get("micro_steps"));
    if (m == "unknown") {
      row.micro_steps = 0;
    } else {
      const auto ms = cost_detail::parse_batch_size(m);
      if (!ms) throw bad("micro_steps", m, "a whole number >= 1 or 'unknown'");
      row.micro_steps = *ms;
    }
    const std::string t = get("published_iteration_ms");
    const auto ms = cost_detail::parse_number(t);
    if (!ms || *ms <= 0) throw bad("published_iteration_ms", t, "a positive number of milliseconds");
    row.published_iteration_ms = *ms;
    row.published_figure = get("published_figure");
    row.source = get("source");
    row.notes = get("notes");
    rows.push_back(std::move(row));
  }
  return rows;
}

std::string_view to_string(RowFit f) {
  switch (f) {
    case RowFit::Exact: return "exact";
    case RowFit::Approximated: return "approximated";
    case RowFit::Unsupported: return "unsupported";
  }
  return "unsupported";
}

RowProgram row_program(const StepTimeRow& row) {
  RowProgram p;
  std::vector<std::string>& approx = p.approximations;
  std::vector<std::string>& unsup = p.unsupported;
  bool model_known = false;
  try {
    p.gpu_id = find_gpu(row.gpu).id;
  } catch (const InputError&) {
    unsup.push_back(fmt::format("GPU '{}' is not in the catalog", row.gpu));
  }

  // The model and its task.
  const std::string base = zoo::canonical_name(row.model);
  std::string nearest = base;
  const bool dle_dlrm = base == "dlrm_mlperf" && row.source_repo() == "NVIDIA/DeepLearningExamples";
  if (dle_dlrm) {
    // The CSV's DLRM rows are DeepLearningExamples' Criteo 1TB "small" model
    // (gpu_training_step_times.md: ~15 GB of tables, sparse embedding
    // gradients and updates): the zoo's dlrm_dle.
    p.zoo_model = "dlrm_dle";
    approx.push_back("DeepLearningExamples' DLRM as the zoo's dlrm_dle (FL=15 tables, sparse gradients)");
  } else if (row.task == "pretraining") {
    if (row.mlm_positions == "masked") {
      p.zoo_model = base + "_pretraining";
    } else if (row.mlm_positions == "all") {
      p.zoo_model = base;
      approx.push_back("no next-sentence head (zoo MLM at every position)");
    } else {
      unsup.push_back(fmt::format("mlm_positions '{}': the MLM head's positions are not stated", row.mlm_positions));
    }
  } else if (row.task == "squad") {
    p.zoo_model = base + "_squad";
  } else if (row.task == "unknown") {
    unsup.push_back("the task is unknown");
  } else {
    p.zoo_model = base;
  }
  if (!p.zoo_model.empty() && !zoo::has_model(p.zoo_model)) {
    unsup.push_back(fmt::format("the zoo has no {} (task {})", p.zoo_model, row.task));
    p.zoo_model.clear();
  }
  model_known = zoo::has_model(nearest);

  // Optimizer and what the step contains.
  AnalyticalOptions o;
  o.legacy_zero_grad = false;  // set_to_none or apex: no fill kernels (PyTorch >= 2.0 default)
  if (row.optimizer == "sgd") {
    o.optimizer = zoo::Optimizer::SGD;
  } else if (row.optimizer == "adam" || row.optimizer == "adamw") {
    o.optimizer = zoo::Optimizer::Adam;
    if (row.optimizer == "adamw") approx.push_back("AdamW as Adam's update kernels");
  } else if (row.optimizer == "lamb") {
    o.optimizer = zoo::Optimizer::Adam;
    approx.push_back("LAMB as Adam's update kernels (without LAMB's per-tensor norms)");
  } else {
    unsup.push_back(fmt::format("optimizer '{}'", row.optimizer));
  }
  if (row.includes_loss_and_optimizer != "yes")
    unsup.push_back(
        fmt::format("includes_loss_and_optimizer '{}': gpemu's step has both", row.includes_loss_and_optimizer));
  if (row.micro_steps == 0) unsup.push_back("micro_steps unknown");

  // The program variant.
  ProgramVariant v;
  v.micro_steps = std::max(row.micro_steps, 1);
  const bool half_mm = row.matmul_precision == "fp16" || row.matmul_precision == "bf16";
  if (row.amp == "none") {
    if (half_mm) unsup.push_back(fmt::format("matmul_precision {} without AMP", row.matmul_precision));
    if (row.matmul_precision == "tf32")
      v.matmul_precision = MatmulPrecision::High;
    else if (row.matmul_precision != "fp32")
      unsup.push_back(fmt::format("matmul_precision '{}'", row.matmul_precision));
  } else if (row.amp == "autocast" || row.amp == "pure_half") {
    v.amp = row.amp == "autocast" ? AmpFlavour::Autocast : AmpFlavour::PureHalf;
    if (row.matmul_precision == "bf16")
      v.half = HalfType::BF16;
    else if (row.matmul_precision != "fp16")
      unsup.push_back(fmt::format("AMP with matmul_precision '{}'", row.matmul_precision));
  } else {
    unsup.push_back("the AMP flavour is unknown");
  }
  if (row.conv_precision == "fp32")
    v.tf32_conv = false;
  else if (row.conv_precision == "unknown")
    unsup.push_back("conv_precision unknown");
  if (row.memory_format == "channels_last")
    v.memory_format = MemoryFormat::ChannelsLast;
  else if (row.memory_format == "unknown")
    unsup.push_back("memory_format unknown");
  if (row.attention == "fused")
    v.attention = AttentionKernel::Fused;
  else if (row.attention == "unknown")
    unsup.push_back("attention kernel unknown");
  if (row.fused_ops == "some") {
    approx.push_back("fused_ops 'some' (which kernels is not stated) as unfused kernels");
  } else if (row.fused_ops == "most") {
    // The zoo's fused graphs: scale-softmax-dropout, bias-GELU and
    // bias-dropout-residual-LayerNorm chains as one kernel each (what NVFuser
    // makes of the scripted layers), and a multi-tensor optimizer; dlrm_dle has
    // DeepLearningExamples' fused kernels in its one graph.
    if (dle_dlrm) {
      approx.push_back(
          "fused_ops 'most' as dlrm_dle's fused gather, dot-interaction and sparse-update kernels; CUDA graphs "
          "and apex's fused MLP not modelled");
    } else if (!p.zoo_model.empty() && zoo::has_model(p.zoo_model + "_fused")) {
      v.fused_softmax = v.fused_layer_norm = v.fused_gelu = v.fused_optimizer = true;
      p.zoo_model += "_fused";
      approx.push_back(
          "fused_ops 'most' as the zoo's fused graph (scale-softmax-dropout, bias-GELU and "
          "bias-dropout-residual-LayerNorm chains, multi-tensor optimizer); other elementwise work eager");
    } else {
      unsup.push_back(fmt::format(
          "fused_ops 'most': most elementwise and normalisation work fused (the zoo has no fused graph of {})",
          p.zoo_model.empty() ? base : p.zoo_model));
    }
  } else if (row.fused_ops == "unknown") {
    unsup.push_back("fused_ops unknown");
  }
  if (v.attention == AttentionKernel::Fused && !p.zoo_model.empty()) {
    try {
      p.zoo_model = variant_model(p.zoo_model, v, "fused_ops");
    } catch (const InputError& e) {
      unsup.push_back(e.what());
    }
  }
  if (auto missing = unsupported_part(v)) unsup.push_back(*missing);
  if (row.includes_h2d == "yes")
    approx.push_back("the batch's host-to-device copy is inside the measured time (overlapped); not added");

  o.seq_len = row.seq_len;
  p.options = to_analytical_options(v, o);
  if (!unsup.empty()) {
    p.fit = RowFit::Unsupported;
    p.nearest_available = !p.gpu_id.empty() && model_known;
    if (p.nearest_available && p.zoo_model.empty()) p.zoo_model = nearest;
    return p;
  }
  p.fit = approx.empty() ? RowFit::Exact : RowFit::Approximated;
  return p;
}

}  // namespace gpemu
