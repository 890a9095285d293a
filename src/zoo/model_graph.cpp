// Loading zoo files (format gpemu-zoo/1, docs/model-zoo.md) and evaluating
// them at a shape.
//
// At load time every (precision, optimizer) combination is flattened into a
// GraphPlan: the ops and tensors of the main trace followed by the optimizer
// section's, with BF16's dropped ops/tensors removed and indices renumbered.
// Shape-dependent quantities stay polynomial indices; evaluating at a shape
// evaluates each polynomial once and maps the indices, so ops() and tensors()
// are linear in the graph size with no parsing.
#include <algorithm>
#include <cmath>
#include <fstream>
#include <sstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "gpemu/error.h"
#include "gpemu/zoo.h"

namespace gpemu::zoo {

using nlohmann::json;

namespace {

constexpr std::string_view kFormat = "gpemu-zoo/1";

// One traced op/tensor table (the main trace or an optimizer section), as in the file.
struct Table {
  std::vector<int> op_kind, op_dtype, op_flops, op_rd, op_wr, op_par;
  std::vector<std::vector<int>> op_in, op_out;
  std::vector<int> t_size, t_alloc, t_free, t_role, t_dtype;
};

struct Variant {
  Table main;
  int fwd_begin = 0, fwd_end = 0, bwd_begin = 0, bwd_end = 0;
  std::vector<std::pair<int, int>> param_grad;
  Table sgd, adam;
  bool has_sgd = false, has_adam = false;
};

}  // namespace

// A flattened iteration for one (precision, optimizer).
struct GraphPlan {
  struct Op {
    int kind = 0;  // index into kinds
    OpClass op_class = OpClass::Other;
    Phase phase = Phase::Forward;
    int dtype = 0;                           // index into dtype names
    int flops = 0, rd = 0, wr = 0, par = 0;  // poly indices
  };
  struct Tensor {
    int size = 0;  // poly index
    int alloc = -1, free = -1;
    Role role = Role::Act;
    int dtype = 0;
  };
  bool valid = false;
  std::vector<Op> ops;
  std::vector<Tensor> tensors;
  std::vector<int> main_tensor_index;  // file main tensor id -> index in tensors (-1: dropped)
  std::array<std::pair<int, int>, 3> ranges{};
  std::vector<std::pair<int, int>> param_grad;  // indices into tensors
  std::vector<int> first_use;                   // per tensor: first op using it, -1: none
  std::vector<int> last_use;                    // per tensor: last op using it, -1: none
};

struct ModelGraph::Impl {
  std::filesystem::path file;
  std::string name, family, input;
  std::uint64_t params = 0;
  std::int64_t ref_b = 0, ref_s = 0;
  bool has_s = false;
  double fwd_flops_per_sample = 0;
  std::vector<std::array<int, 2>> basis;
  std::vector<std::vector<double>> poly;
  std::vector<std::string> kind_names;
  std::vector<OpClass> kind_class;
  std::vector<std::string> dtype_names;  // file dtypes, then "bf16" if absent
  int f16 = -1, bf16 = -1;
  std::vector<Role> roles;              // file role index -> Role
  GraphPlan plans[kPrecisionCount][2];  // [precision][optimizer]

  [[noreturn]] void fail(const std::string& what) const {
    throw InputError(fmt::format("{}: {}", file.string(), what));
  }

  const GraphPlan& plan(Precision p, Optimizer o) const {
    const GraphPlan& pl = plans[static_cast<int>(p)][static_cast<int>(o)];
    if (!pl.valid && is_pure_half(p) && !plans[static_cast<int>(p)][1 - static_cast<int>(o)].valid)
      throw InputError(
          fmt::format("{}: {} has no pure-half (apex O2-like) trace: the zoo traces pure half for transformers only; "
                      "accepted for it: --amp autocast (AMP with FP32 weights)",
                      file.string(), name));
    const Optimizer other = o == Optimizer::SGD ? Optimizer::Adam : Optimizer::SGD;
    if (!pl.valid && plans[static_cast<int>(p)][static_cast<int>(other)].valid)
      throw InputError(
          fmt::format("{}: {} is traced with the {} optimizer only (the model's notes say why); "
                      "accepted: --optimizer {}",
                      file.string(), name, to_string(other), to_string(other)));
    if (!pl.valid)
      throw InputError(fmt::format("{}: the zoo file has no {} trace with the {} optimizer", file.string(),
                                   to_string(p), to_string(o)));
    return pl;
  }

  Shape resolve(Shape s) const {
    if (s.batch < 0) throw InputError(fmt::format("batch size {} is impossible: it must be at least 1", s.batch));
    if (s.seq_len < 0)
      throw InputError(fmt::format("sequence length {} is impossible: it must be at least 1", s.seq_len));
    if (s.seq_len > kMaxSeqLen)
      throw InputError(fmt::format("sequence length {} is past the limit of {}; expected 1 to {}", s.seq_len,
                                   kMaxSeqLen, kMaxSeqLen));
    if (s.batch == 0) s.batch = ref_b;
    if (!has_s)
      s.seq_len = 0;
    else if (s.seq_len == 0)
      s.seq_len = ref_s;
    return s;
  }

  std::vector<double> eval(Shape s) const {
    s = resolve(s);
    const double b = static_cast<double>(s.batch), sl = static_cast<double>(s.seq_len);
    std::vector<double> mono(basis.size());
    for (std::size_t k = 0; k < basis.size(); ++k)
      mono[k] = std::pow(b, basis[k][0]) * (basis[k][1] ? std::pow(sl, basis[k][1]) : 1.0);
    std::vector<double> v(poly.size());
    for (std::size_t i = 0; i < poly.size(); ++i) {
      double acc = 0;
      for (std::size_t k = 0; k < poly[i].size(); ++k) acc += poly[i][k] * mono[k];
      v[i] = acc;
    }
    return v;
  }
};

namespace {

// A tensor past 2^62 bytes (4 EiB) can only come from an absurd batch size or
// sequence length; rounding it would wrap the 64-bit count.
std::uint64_t to_bytes(double v) {
  constexpr double kMaxTensorBytes = 4611686018427387904.0;
  if (!(v <= kMaxTensorBytes))
    throw InputError(
        fmt::format("a tensor of {:g} bytes is past the limit of {:g} bytes; expected a smaller batch "
                    "size or sequence length",
                    v, kMaxTensorBytes));
  return v <= 0 ? 0 : static_cast<std::uint64_t>(std::llround(v));
}

template <typename T>
T get_field(const ModelGraph::Impl& g, const json& obj, const char* key, const char* where) {
  auto it = obj.find(key);
  if (it == obj.end()) g.fail(fmt::format("missing field '{}{}'", where, key));
  try {
    return it->get<T>();
  } catch (const json::exception& e) {
    g.fail(fmt::format("field '{}{}' has the wrong type ({})", where, key, e.what()));
  }
}

const json& get_obj(const ModelGraph::Impl& g, const json& obj, const char* key, const char* where) {
  auto it = obj.find(key);
  if (it == obj.end() || !it->is_object()) g.fail(fmt::format("missing object '{}{}'", where, key));
  return *it;
}

Table read_table(const ModelGraph::Impl& g, const json& sec, const std::string& where) {
  Table t;
  const std::string ow = where + "ops.", tw = where + "tensors.";
  const json& ops = get_obj(g, sec, "ops", where.c_str());
  const json& ts = get_obj(g, sec, "tensors", where.c_str());
  t.op_kind = get_field<std::vector<int>>(g, ops, "kind", ow.c_str());
  t.op_dtype = get_field<std::vector<int>>(g, ops, "dtype", ow.c_str());
  t.op_flops = get_field<std::vector<int>>(g, ops, "flops", ow.c_str());
  t.op_rd = get_field<std::vector<int>>(g, ops, "rd", ow.c_str());
  t.op_wr = get_field<std::vector<int>>(g, ops, "wr", ow.c_str());
  t.op_par = get_field<std::vector<int>>(g, ops, "par", ow.c_str());
  t.op_in = get_field<std::vector<std::vector<int>>>(g, ops, "in", ow.c_str());
  t.op_out = get_field<std::vector<std::vector<int>>>(g, ops, "out", ow.c_str());
  const std::size_t n = t.op_kind.size();
  for (auto* c : {&t.op_dtype, &t.op_flops, &t.op_rd, &t.op_wr, &t.op_par})
    if (c->size() != n) g.fail(fmt::format("the columns of '{}' have different lengths", ow));
  if (t.op_in.size() != n || t.op_out.size() != n)
    g.fail(fmt::format("the columns of '{}' have different lengths", ow));
  t.t_size = get_field<std::vector<int>>(g, ts, "size", tw.c_str());
  t.t_alloc = get_field<std::vector<int>>(g, ts, "alloc", tw.c_str());
  t.t_free = get_field<std::vector<int>>(g, ts, "free", tw.c_str());
  t.t_role = get_field<std::vector<int>>(g, ts, "role", tw.c_str());
  t.t_dtype = get_field<std::vector<int>>(g, ts, "dtype", tw.c_str());
  const std::size_t m = t.t_size.size();
  for (auto* c : {&t.t_alloc, &t.t_free, &t.t_role, &t.t_dtype})
    if (c->size() != m) g.fail(fmt::format("the columns of '{}' have different lengths", tw));
  return t;
}

void check_range(const ModelGraph::Impl& g, const std::vector<int>& v, int lo, int hi, const std::string& what) {
  for (int x : v)
    if (x < lo || x >= hi) g.fail(fmt::format("'{}' holds {}, out of range [{}, {})", what, x, lo, hi));
}

// Validates a table given the op / tensor numbering it lives in.
void validate(const ModelGraph::Impl& g, const Table& t, const std::string& where, int op_base, int tensor_base,
              int tensors_total) {
  const int npoly = static_cast<int>(g.poly.size());
  const int n_ops_end = op_base + static_cast<int>(t.op_kind.size());
  check_range(g, t.op_kind, 0, static_cast<int>(g.kind_names.size()), where + "ops.kind");
  check_range(g, t.op_dtype, 0, static_cast<int>(g.dtype_names.size()), where + "ops.dtype");
  for (auto [col, nm] : {std::pair{&t.op_flops, "flops"}, {&t.op_rd, "rd"}, {&t.op_wr, "wr"}, {&t.op_par, "par"}})
    check_range(g, *col, 0, npoly, where + "ops." + nm);
  for (const auto& l : t.op_in) check_range(g, l, 0, tensors_total, where + "ops.in");
  for (const auto& l : t.op_out) check_range(g, l, 0, tensors_total, where + "ops.out");
  check_range(g, t.t_size, 0, npoly, where + "tensors.size");
  check_range(g, t.t_role, 0, static_cast<int>(g.roles.size()), where + "tensors.role");
  check_range(g, t.t_dtype, 0, static_cast<int>(g.dtype_names.size()), where + "tensors.dtype");
  for (std::size_t i = 0; i < t.t_alloc.size(); ++i) {
    const int a = t.t_alloc[i], f = t.t_free[i];
    if (a != -1 && (a < op_base || a >= n_ops_end))
      g.fail(fmt::format("'{}tensors.alloc' of tensor {} is {}, expected -1 or an op in [{}, {})", where,
                         tensor_base + i, a, op_base, n_ops_end));
    if (f != -1 && (f < 0 || f >= n_ops_end || (a != -1 && f < a)))
      g.fail(fmt::format("'{}tensors.free' of tensor {} is {}, expected -1 or an op in [{}, {}) not before its alloc",
                         where, tensor_base + i, f, std::max(a, 0), n_ops_end));
  }
}

// Builds the flattened plan of one variant with one optimizer section.
GraphPlan build_plan(const ModelGraph::Impl& g, const Variant& v, const Table& sec, bool bf16) {
  const int n_main = static_cast<int>(v.main.op_kind.size());
  const int n_sec = static_cast<int>(sec.op_kind.size());
  const int t_main = static_cast<int>(v.main.t_size.size());
  const int t_sec = static_cast<int>(sec.t_size.size());
  const int n_all = n_main + n_sec, t_all = t_main + t_sec;

  auto op_kind = [&](int k) -> const std::string& {
    return g.kind_names[k < n_main ? v.main.op_kind[k] : sec.op_kind[k - n_main]];
  };
  auto op_ins = [&](int k) -> const std::vector<int>& { return k < n_main ? v.main.op_in[k] : sec.op_in[k - n_main]; };
  auto op_outs = [&](int k) -> const std::vector<int>& {
    return k < n_main ? v.main.op_out[k] : sec.op_out[k - n_main];
  };

  // Which ops BF16 drops (docs/model-zoo.md): the loss-scale mul (last forward
  // op), every _amp_* op, and the four 1-element ops that prepare the
  // inverse scale before _amp_foreach_non_finite_check_and_unscale_.
  std::vector<char> drop(n_all, 0);
  if (bf16) {
    if (v.fwd_end > 0 && op_kind(v.fwd_end - 1) == "mul") drop[v.fwd_end - 1] = 1;
    static const char* kPrep[] = {"_to_copy", "reciprocal", "_to_copy", "full"};
    for (int k = 0; k < n_all; ++k) {
      if (op_kind(k).rfind("_amp_", 0) != 0) continue;
      drop[k] = 1;
      if (op_kind(k) == "_amp_foreach_non_finite_check_and_unscale_" && k >= 4) {
        bool match = true;
        for (int j = 0; j < 4; ++j) match = match && op_kind(k - 4 + j) == kPrep[j];
        if (match)
          for (int j = 0; j < 4; ++j) drop[k - 4 + j] = 1;
      }
    }
  }
  // New index of each kept op; for a dropped op, the new index of the last
  // kept op before it (-1 when none): where a tensor freed after it dies.
  std::vector<int> new_index(n_all), last_kept(n_all);
  int next = 0, last = -1;
  for (int k = 0; k < n_all; ++k) {
    if (!drop[k]) last = next++;
    new_index[k] = drop[k] ? -1 : last;
    last_kept[k] = last;
  }

  // Tensors dropped: created by a dropped op, or pre-existing non-param
  // tensors (GradScaler state) used only by dropped ops.
  std::vector<char> used_kept(t_all, 0), used_any(t_all, 0);
  for (int k = 0; k < n_all; ++k)
    for (const auto* l : {&op_ins(k), &op_outs(k)})
      for (int t : *l) {
        used_any[t] = 1;
        if (!drop[k]) used_kept[t] = 1;
      }

  GraphPlan p;
  p.valid = true;
  p.ops.reserve(next);
  for (int k = 0; k < n_all; ++k) {
    if (drop[k]) continue;
    const bool in_main = k < n_main;
    const Table& t = in_main ? v.main : sec;
    const int i = in_main ? k : k - n_main;
    GraphPlan::Op op;
    op.kind = t.op_kind[i];
    op.op_class = g.kind_class[op.kind];
    op.phase = !in_main ? Phase::Optimizer : (k < v.fwd_end ? Phase::Forward : Phase::Backward);
    op.dtype = (bf16 && t.op_dtype[i] == g.f16) ? g.bf16 : t.op_dtype[i];
    op.flops = t.op_flops[i];
    op.rd = t.op_rd[i];
    op.wr = t.op_wr[i];
    op.par = t.op_par[i];
    p.ops.push_back(op);
  }
  const int kept_main = n_main == 0 ? 0 : (last_kept[n_main - 1] + 1);
  int fwd_end_new = v.fwd_end == 0 ? 0 : last_kept[v.fwd_end - 1] + 1;
  p.ranges[0] = {0, fwd_end_new};
  p.ranges[1] = {fwd_end_new, kept_main};
  p.ranges[2] = {kept_main, next};

  p.main_tensor_index.assign(t_main, -1);
  std::vector<int> tensor_index(t_all, -1);
  for (int id = 0; id < t_all; ++id) {
    const bool in_main = id < t_main;
    const Table& t = in_main ? v.main : sec;
    const int i = in_main ? id : id - t_main;
    const int a = t.t_alloc[i], f = t.t_free[i];
    const Role role = g.roles[t.t_role[i]];
    if (bf16) {
      if (a >= 0 && drop[a]) continue;
      if (a < 0 && used_any[id] && !used_kept[id] && role != Role::Param && role != Role::Input && role != Role::Grad)
        continue;
    }
    GraphPlan::Tensor tt;
    tt.size = t.t_size[i];
    tt.alloc = a < 0 ? -1 : new_index[a];
    tt.free = f < 0 ? -1 : last_kept[f];
    if (tt.free < 0 && f >= 0) tt.free = std::max(tt.alloc, 0);
    if (tt.alloc >= 0 && tt.free >= 0 && tt.free < tt.alloc) tt.free = tt.alloc;
    tt.role = role;
    tt.dtype = (bf16 && t.t_dtype[i] == g.f16) ? g.bf16 : t.t_dtype[i];
    tensor_index[id] = static_cast<int>(p.tensors.size());
    if (in_main) p.main_tensor_index[id] = tensor_index[id];
    p.tensors.push_back(tt);
  }
  for (auto [param, grad] : v.param_grad) p.param_grad.emplace_back(tensor_index[param], tensor_index[grad]);
  p.first_use.assign(p.tensors.size(), -1);
  p.last_use.assign(p.tensors.size(), -1);
  for (int k = n_all - 1; k >= 0; --k) {
    if (drop[k]) continue;
    for (const auto* l : {&op_ins(k), &op_outs(k)})
      for (int t : *l)
        if (tensor_index[t] >= 0) {
          p.first_use[tensor_index[t]] = new_index[k];
          if (p.last_use[tensor_index[t]] < 0) p.last_use[tensor_index[t]] = new_index[k];
        }
  }
  return p;
}

std::string read_file(const std::filesystem::path& file) {
  std::ifstream in(file, std::ios::binary);
  if (!in) throw InputError(fmt::format("{}: cannot open the zoo file", file.string()));
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

Role role_from_name(const std::string& s, bool& ok) {
  ok = true;
  if (s == "param") return Role::Param;
  if (s == "buffer") return Role::Buffer;
  if (s == "input") return Role::Input;
  if (s == "state") return Role::State;
  if (s == "grad") return Role::Grad;
  if (s == "act") return Role::Act;
  if (s == "external") return Role::External;
  ok = false;
  return Role::External;
}

}  // namespace

// ---- ModelGraph --------------------------------------------------------------

ModelGraph::ModelGraph(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
ModelGraph::ModelGraph(ModelGraph&&) noexcept = default;
ModelGraph& ModelGraph::operator=(ModelGraph&&) noexcept = default;
ModelGraph::~ModelGraph() = default;

ModelGraph ModelGraph::load(const std::filesystem::path& file) {
  auto g = std::make_unique<Impl>();
  g->file = file;
  const std::string text = read_file(file);
  json doc;
  try {
    doc = json::parse(text);
  } catch (const json::exception& e) {  // a syntax error, or a number past a double's range
    g->fail(fmt::format("not valid JSON ({}); expected a gpemu-zoo/1 file written by tools/tracer", e.what()));
  }
  if (!doc.is_object()) g->fail("expected a JSON object (a gpemu-zoo/1 file written by tools/tracer)");
  const auto fmt_it = doc.find("format");
  if (fmt_it == doc.end() || !fmt_it->is_string() || fmt_it->get<std::string>() != kFormat)
    g->fail(fmt::format("'format' is {}, expected \"{}\"", fmt_it == doc.end() ? "missing" : fmt_it->dump(), kFormat));

  const json& model = get_obj(*g, doc, "model", "");
  g->name = get_field<std::string>(*g, model, "name", "model.");
  g->family = get_field<std::string>(*g, model, "family", "model.");
  if (model.contains("input") && model["input"].is_string()) g->input = model["input"].get<std::string>();
  const double params = get_field<double>(*g, model, "params", "model.");
  if (!(params >= 0)) g->fail("'model.params' must be a non-negative number");
  g->params = static_cast<std::uint64_t>(params);
  g->fwd_flops_per_sample = get_field<double>(*g, model, "fwd_flops_per_sample", "model.");
  const json& ref = get_obj(*g, model, "ref", "model.");
  g->ref_b = get_field<std::int64_t>(*g, ref, "B", "model.ref.");
  if (g->ref_b < 1) g->fail("'model.ref.B' must be at least 1");

  const auto vars = get_field<std::vector<std::string>>(*g, doc, "vars", "");
  if (vars.empty() || vars[0] != "B" || vars.size() > 2 || (vars.size() == 2 && vars[1] != "S"))
    g->fail("'vars' must be [\"B\"] or [\"B\", \"S\"]");
  g->has_s = vars.size() == 2;
  if (g->has_s) {
    g->ref_s = get_field<std::int64_t>(*g, ref, "S", "model.ref.");
    if (g->ref_s < 1) g->fail("'model.ref.S' must be at least 1");
  }

  const auto basis = get_field<std::vector<std::vector<int>>>(*g, doc, "basis", "");
  for (const auto& b : basis) {
    if (b.size() != 2 || b[0] < 0 || b[1] < 0 || (!g->has_s && b[1] != 0))
      g->fail("'basis' entries must be exponent pairs [eB, eS] (eS = 0 without S)");
    g->basis.push_back({b[0], b[1]});
  }
  g->poly = get_field<std::vector<std::vector<double>>>(*g, doc, "poly", "");
  if (g->poly.empty()) g->fail("'poly' is empty; expected entry 0 to be the zero polynomial");
  for (std::size_t i = 0; i < g->poly.size(); ++i)
    if (g->poly[i].size() != g->basis.size())
      g->fail(fmt::format("'poly[{}]' has {} coefficients, expected {} (one per basis monomial)", i, g->poly[i].size(),
                          g->basis.size()));

  const auto roles = get_field<std::vector<std::string>>(*g, doc, "roles", "");
  for (const auto& r : roles) {
    bool ok = false;
    g->roles.push_back(role_from_name(r, ok));
    if (!ok) g->fail(fmt::format("unknown role '{}' in 'roles'", r));
  }
  g->dtype_names = get_field<std::vector<std::string>>(*g, doc, "dtypes", "");
  for (std::size_t i = 0; i < g->dtype_names.size(); ++i) {
    if (g->dtype_names[i] == "f16") g->f16 = static_cast<int>(i);
    if (g->dtype_names[i] == "bf16") g->bf16 = static_cast<int>(i);
  }
  if (g->bf16 < 0) {
    g->bf16 = static_cast<int>(g->dtype_names.size());
    g->dtype_names.push_back("bf16");
  }
  const auto kinds = get_field<std::vector<std::vector<std::string>>>(*g, doc, "kinds", "");
  for (const auto& k : kinds) {
    if (k.size() != 2) g->fail("'kinds' entries must be [aten op name, class] pairs");
    auto c = parse_op_class(k[1]);
    if (!c) g->fail(fmt::format("unknown op class '{}' of '{}' in 'kinds'", k[1], k[0]));
    g->kind_names.push_back(k[0]);
    g->kind_class.push_back(*c);
  }

  const json& variants = get_obj(*g, doc, "variants", "");
  for (const auto& [key, prec] :
       {std::pair{"fp32", Precision::FP32}, {"amp", Precision::AMP_FP16}, {"half", Precision::HALF_FP16}}) {
    if (!variants.contains(key)) continue;
    const std::string where = fmt::format("variants.{}.", key);
    const json& vj = variants[key];
    if (!vj.is_object()) g->fail(fmt::format("'{}' must be an object", where));
    Variant v;
    v.main = read_table(*g, vj, where);
    const json& phases = get_obj(*g, vj, "phases", where.c_str());
    const auto fwd = get_field<std::vector<int>>(*g, phases, "forward", (where + "phases.").c_str());
    const auto bwd = get_field<std::vector<int>>(*g, phases, "backward", (where + "phases.").c_str());
    const int n_main = static_cast<int>(v.main.op_kind.size());
    if (fwd.size() != 2 || bwd.size() != 2 || fwd[0] != 0 || fwd[1] < fwd[0] || bwd[0] != fwd[1] || bwd[1] < bwd[0] ||
        bwd[1] > n_main)
      g->fail(fmt::format("'{}phases' must be consecutive ranges [0, f), [f, b) within the {} ops", where, n_main));
    v.fwd_begin = fwd[0];
    v.fwd_end = fwd[1];
    v.bwd_begin = bwd[0];
    v.bwd_end = bwd[1];
    const auto pg = get_field<std::vector<std::vector<int>>>(*g, vj, "param_grad", where.c_str());
    const int t_main = static_cast<int>(v.main.t_size.size());
    for (const auto& e : pg) {
      if (e.size() != 2 || e[0] < 0 || e[0] >= t_main || e[1] < 0 || e[1] >= t_main)
        g->fail(fmt::format("'{}param_grad' entries must be [param id, grad id] of main tensors", where));
      v.param_grad.emplace_back(e[0], e[1]);
    }
    validate(*g, v.main, where, 0, 0, t_main);
    const json& opts = get_obj(*g, vj, "optimizers", where.c_str());
    for (const auto& [okey, opt] : {std::pair{"sgd", Optimizer::SGD}, {"adam", Optimizer::Adam}}) {
      if (!opts.contains(okey)) continue;
      const std::string sw = fmt::format("{}optimizers.{}.", where, okey);
      Table sec = read_table(*g, opts[okey], sw);
      validate(*g, sec, sw, n_main, t_main, t_main + static_cast<int>(sec.t_size.size()));
      g->plans[static_cast<int>(prec)][static_cast<int>(opt)] = build_plan(*g, v, sec, false);
      if (prec != Precision::FP32) {
        const Precision bf16 = prec == Precision::AMP_FP16 ? Precision::AMP_BF16 : Precision::HALF_BF16;
        g->plans[static_cast<int>(bf16)][static_cast<int>(opt)] = build_plan(*g, v, sec, true);
      }
    }
  }
  if (!g->plans[0][0].valid && !g->plans[0][1].valid)
    g->fail("no 'variants.fp32' with an optimizer section; expected variants.fp32.optimizers.sgd/adam");
  return ModelGraph(std::move(g));
}

const std::string& ModelGraph::name() const { return impl_->name; }
const std::string& ModelGraph::family() const { return impl_->family; }
const std::string& ModelGraph::input_description() const { return impl_->input; }
const std::filesystem::path& ModelGraph::file() const { return impl_->file; }
std::uint64_t ModelGraph::params() const { return impl_->params; }
std::int64_t ModelGraph::default_batch() const { return impl_->ref_b; }
bool ModelGraph::has_seq_len() const { return impl_->has_s; }
std::int64_t ModelGraph::default_seq_len() const { return impl_->ref_s; }
double ModelGraph::forward_flops_per_sample() const { return impl_->fwd_flops_per_sample; }
Shape ModelGraph::resolve(Shape shape) const { return impl_->resolve(shape); }

std::uint64_t ModelGraph::input_bytes(Shape shape, Precision precision) const {
  const GraphPlan& p =
      impl_->plan(precision, impl_->plans[static_cast<int>(precision)][0].valid ? Optimizer::SGD : Optimizer::Adam);
  const auto v = impl_->eval(shape);
  double sum = 0;
  for (const auto& t : p.tensors)
    if (t.role == Role::Input) sum += v[t.size];
  return to_bytes(sum);
}

std::uint64_t ModelGraph::input_bytes_per_sample(std::int64_t seq_len) const {
  return input_bytes(Shape{1, seq_len}, Precision::FP32);
}

std::uint64_t ModelGraph::param_bytes(Precision precision) const {
  const GraphPlan& p =
      impl_->plan(precision, impl_->plans[static_cast<int>(precision)][0].valid ? Optimizer::SGD : Optimizer::Adam);
  const auto v = impl_->eval(Shape{});
  double sum = 0;
  for (const auto& t : p.tensors)
    if (t.role == Role::Param) sum += v[t.size];
  return to_bytes(sum);
}

std::vector<OpCost> ModelGraph::ops(Shape shape, Precision precision, Optimizer optimizer) const {
  const GraphPlan& p = impl_->plan(precision, optimizer);
  const auto v = impl_->eval(shape);
  std::vector<OpCost> out;
  out.reserve(p.ops.size());
  for (const auto& o : p.ops) {
    OpCost c;
    c.kind = impl_->kind_names[o.kind];
    c.op_class = o.op_class;
    c.phase = o.phase;
    c.dtype = impl_->dtype_names[o.dtype];
    c.flops = v[o.flops];
    c.bytes_read = v[o.rd];
    c.bytes_written = v[o.wr];
    c.param_bytes = v[o.par];
    out.push_back(c);
  }
  return out;
}

std::vector<TensorLife> ModelGraph::tensors(Shape shape, Precision precision, Optimizer optimizer) const {
  const GraphPlan& p = impl_->plan(precision, optimizer);
  const auto v = impl_->eval(shape);
  std::vector<TensorLife> out;
  out.reserve(p.tensors.size());
  for (const auto& t : p.tensors)
    out.push_back(TensorLife{to_bytes(v[t.size]), t.alloc, t.free, t.role, impl_->dtype_names[t.dtype]});
  return out;
}

std::vector<ParamGrad> ModelGraph::param_grads(Shape shape, Precision precision) const {
  const GraphPlan& p =
      impl_->plan(precision, impl_->plans[static_cast<int>(precision)][0].valid ? Optimizer::SGD : Optimizer::Adam);
  const auto v = impl_->eval(shape);
  std::vector<ParamGrad> out;
  for (auto [param, grad] : p.param_grad) {
    ParamGrad pg;
    pg.param_tensor = param;
    pg.grad_tensor = grad;
    if (param >= 0) pg.param_bytes = to_bytes(v[p.tensors[param].size]);
    if (grad >= 0) {
      pg.grad_bytes = to_bytes(v[p.tensors[grad].size]);
      pg.grad_ready_op = p.tensors[grad].alloc;
    }
    out.push_back(pg);
  }
  return out;
}

std::array<PhaseTotals, 3> ModelGraph::phase_totals(Shape shape, Precision precision, Optimizer optimizer) const {
  const GraphPlan& p = impl_->plan(precision, optimizer);
  const auto v = impl_->eval(shape);
  std::array<PhaseTotals, 3> out{};
  for (const auto& o : p.ops) {
    PhaseTotals& t = out[static_cast<int>(o.phase)];
    t.flops += v[o.flops];
    t.bytes_read += v[o.rd];
    t.bytes_written += v[o.wr];
    ++t.ops;
    if (o.op_class != OpClass::View) ++t.kernel_ops;
  }
  return out;
}

std::vector<int> ModelGraph::first_use(Precision precision, Optimizer optimizer) const {
  return impl_->plan(precision, optimizer).first_use;
}

std::vector<int> ModelGraph::last_use(Precision precision, Optimizer optimizer) const {
  return impl_->plan(precision, optimizer).last_use;
}

int ModelGraph::op_count(Precision precision, Optimizer optimizer) const {
  return static_cast<int>(impl_->plan(precision, optimizer).ops.size());
}

int ModelGraph::tensor_count(Precision precision, Optimizer optimizer) const {
  return static_cast<int>(impl_->plan(precision, optimizer).tensors.size());
}

std::array<std::pair<int, int>, 3> ModelGraph::phase_ranges(Precision precision, Optimizer optimizer) const {
  return impl_->plan(precision, optimizer).ranges;
}

}  // namespace gpemu::zoo
