// Loading zoo files (format gpemu-zoo/1, docs/model-zoo.md) into a model
// graph (model_graph_impl.h).
//
// At load time every (precision, optimizer) combination is flattened into a
// GraphPlan: the ops and tensors of the main trace followed by the optimizer
// section's, with BF16's dropped ops/tensors removed and indices renumbered.
#include <algorithm>
#include <fstream>
#include <sstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "gpemu/error.h"
#include "gpemu/zoo.h"
#include "zoo/model_graph_impl.h"

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

}  // namespace gpemu::zoo
