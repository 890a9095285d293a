// The step-time CSV (cost/step_times.h): reading it. Mapping each row's
// stated program onto the programs gpemu can run is step_time_programs.cpp.
#include "cost/step_times.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <fstream>
#include <sstream>

#include <fmt/format.h>

#include "common/fs_errors.h"
#include "cost/text_fields.h"
#include "gpemu/error.h"

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
  const std::string text = cost_detail::read_text_file(path.string());
  // Messages quote the path and the values as one printable line each.
  const std::string file = shown_path(path);
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
      return InputError(fmt::format("{}:{}: column '{}' is '{}'; expected {}", file, rec.line, c,
                                    cost_detail::quoted_excerpt(v), accepted));
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

}  // namespace gpemu
