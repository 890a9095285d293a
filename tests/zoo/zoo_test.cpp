// Tests of the zoo loader: header fields, polynomial evaluation, phases,
// tensors, BF16 derivation, caching and errors.
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>

#include <gtest/gtest.h>
#include <unistd.h>
#include <nlohmann/json.hpp>

#include "gpemu/error.h"
#include "gpemu/zoo.h"

namespace gpemu::zoo {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

const fs::path kZoo = fs::path(GPEMU_SOURCE_DIR) / "zoo";

json read_json(const fs::path& p) {
  std::ifstream in(p);
  return json::parse(in);
}

class ScratchDir {
 public:
  ScratchDir() {
    static std::atomic<int> n{0};
    path_ = fs::temp_directory_path() /
            ("gpemu-zoo-test-" + std::to_string(::getpid()) + "-" +
             std::to_string(std::chrono::steady_clock::now().time_since_epoch().count()) + "-" + std::to_string(n++));
    fs::create_directories(path_ / "zoo");
  }
  ~ScratchDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  const fs::path& path() const { return path_; }
  fs::path write(const std::string& name, const std::string& text) const {
    fs::path f = path_ / "zoo" / name;
    std::ofstream(f, std::ios::binary) << text;
    return f;
  }

 private:
  fs::path path_;
};

// Sets GPEMU_DATA_DIR for one scope.
class DataDirOverride {
 public:
  explicit DataDirOverride(const fs::path& p) {
    if (const char* old = std::getenv("GPEMU_DATA_DIR")) old_ = old;
    ::setenv("GPEMU_DATA_DIR", p.c_str(), 1);
  }
  ~DataDirOverride() {
    if (old_)
      ::setenv("GPEMU_DATA_DIR", old_->c_str(), 1);
    else
      ::unsetenv("GPEMU_DATA_DIR");
  }

 private:
  std::optional<std::string> old_;
};

double eval_poly(const json& doc, int index, double b, double s = 0) {
  const auto& basis = doc["basis"];
  const auto& c = doc["poly"][index];
  double acc = 0;
  for (std::size_t k = 0; k < basis.size(); ++k)
    acc += c[k].get<double>() * std::pow(b, basis[k][0].get<int>()) * std::pow(s, basis[k][1].get<int>());
  return acc;
}

TEST(ZooLoader, HeaderFieldsOfResnet18) {
  const ModelGraph g = ModelGraph::load(kZoo / "resnet18.json");
  const json doc = read_json(kZoo / "resnet18.json");
  EXPECT_EQ(g.name(), "resnet18");
  EXPECT_EQ(g.family(), "cnn");
  EXPECT_EQ(g.params(), 11689512u);
  EXPECT_EQ(g.default_batch(), 32);
  EXPECT_FALSE(g.has_seq_len());
  EXPECT_EQ(g.default_seq_len(), 0);
  EXPECT_DOUBLE_EQ(g.forward_flops_per_sample(), doc["model"]["fwd_flops_per_sample"].get<double>());
  // image (3x224x224 fp32) + int64 label per sample
  EXPECT_EQ(g.input_bytes_per_sample(), 3u * 224 * 224 * 4 + 8);
  EXPECT_EQ(g.input_bytes(Shape{64, 0}), 64u * (3 * 224 * 224 * 4 + 8));
  EXPECT_EQ(g.param_bytes(), 11689512u * 4);
}

TEST(ZooLoader, OpFlopsMatchThePolynomialsAtTwoBatchSizes) {
  const json doc = read_json(kZoo / "alexnet.json");
  const ModelGraph g = ModelGraph::load(kZoo / "alexnet.json");
  const auto& v = doc["variants"]["fp32"];
  const int n_main = static_cast<int>(v["ops"]["kind"].size());
  for (int b : {7, 96}) {
    const auto ops = g.ops(Shape{b, 0}, Precision::FP32, Optimizer::SGD);
    ASSERT_EQ(static_cast<int>(ops.size()), n_main + static_cast<int>(v["optimizers"]["sgd"]["ops"]["kind"].size()));
    for (int k = 0; k < n_main; ++k) {
      EXPECT_DOUBLE_EQ(ops[k].flops, eval_poly(doc, v["ops"]["flops"][k], b)) << "op " << k;
      EXPECT_DOUBLE_EQ(ops[k].bytes_read, eval_poly(doc, v["ops"]["rd"][k], b)) << "op " << k;
      EXPECT_DOUBLE_EQ(ops[k].bytes_written, eval_poly(doc, v["ops"]["wr"][k], b)) << "op " << k;
      EXPECT_EQ(ops[k].kind, doc["kinds"][v["ops"]["kind"][k].get<int>()][0].get<std::string>());
    }
  }
  // CNN: every op's FLOPs are linear in B (c0 + c1 B).
  const auto a = g.ops(Shape{10, 0}), b = g.ops(Shape{20, 0}), c = g.ops(Shape{30, 0});
  for (std::size_t k = 0; k < a.size(); ++k) EXPECT_NEAR(c[k].flops - b[k].flops, b[k].flops - a[k].flops, 1e-3);
}

TEST(ZooLoader, ForwardFlopsPerSampleMatchTheHeaderForEveryModel) {
  for (const auto& e : fs::directory_iterator(kZoo)) {
    if (e.path().extension() != ".json") continue;
    const ModelGraph g = ModelGraph::load(e.path());
    const auto totals = g.phase_totals(Shape{}, Precision::FP32, Optimizer::SGD);
    const double per_sample = totals[0].flops / static_cast<double>(g.default_batch());
    EXPECT_NEAR(per_sample, g.forward_flops_per_sample(), 1e-9 * g.forward_flops_per_sample()) << g.name();
    EXPECT_GT(totals[1].flops, totals[0].flops) << g.name();  // backward does more work
    // Parameter bytes agree with the parameter count (FP32 master weights).
    EXPECT_EQ(g.param_bytes(), g.params() * 4) << g.name();
  }
}

TEST(ZooLoader, PhasesAndTensorCounts) {
  const json doc = read_json(kZoo / "resnet18.json");
  const ModelGraph g = ModelGraph::load(kZoo / "resnet18.json");
  const auto& v = doc["variants"]["fp32"];
  const int t_main = static_cast<int>(v["tensors"]["size"].size());
  const int t_sgd = static_cast<int>(v["optimizers"]["sgd"]["tensors"]["size"].size());
  const int t_adam = static_cast<int>(v["optimizers"]["adam"]["tensors"]["size"].size());
  EXPECT_EQ(g.tensor_count(Precision::FP32, Optimizer::SGD), t_main + t_sgd);
  EXPECT_EQ(g.tensor_count(Precision::FP32, Optimizer::Adam), t_main + t_adam);
  const auto tensors = g.tensors(Shape{32, 0}, Precision::FP32, Optimizer::SGD);
  ASSERT_EQ(static_cast<int>(tensors.size()), t_main + t_sgd);
  int params = 0, grads = 0, states = 0;
  for (const auto& t : tensors) {
    params += t.role == Role::Param;
    grads += t.role == Role::Grad;
    states += t.role == Role::State;
    if (t.role == Role::Grad) {
      EXPECT_GE(t.alloc, 0);
      EXPECT_EQ(t.free, -1);
    }
    if (t.alloc >= 0 && t.free >= 0) {
      EXPECT_LE(t.alloc, t.free);
    }
  }
  EXPECT_EQ(params, 62);
  EXPECT_EQ(grads, 62);
  EXPECT_EQ(states, 62);  // SGD momentum buffers
  const auto r = g.phase_ranges(Precision::FP32, Optimizer::SGD);
  EXPECT_EQ(r[0], (std::pair<int, int>{0, 130}));
  EXPECT_EQ(r[1], (std::pair<int, int>{130, 352}));
  EXPECT_EQ(r[2].first, 352);
  const auto ops = g.ops(Shape{}, Precision::FP32, Optimizer::SGD);
  EXPECT_EQ(r[2].second, static_cast<int>(ops.size()));
  EXPECT_EQ(ops[0].phase, Phase::Forward);
  EXPECT_EQ(ops[130].phase, Phase::Backward);
  EXPECT_EQ(ops[352].phase, Phase::Optimizer);
  // Optimizer state is first used by the step; parameters in forward.
  const auto first = g.first_use(Precision::FP32, Optimizer::SGD);
  ASSERT_EQ(first.size(), tensors.size());
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    if (tensors[i].role == Role::State) {
      EXPECT_GE(first[i], 352) << i;
    }
    if (tensors[i].role == Role::Param) {
      EXPECT_LT(first[i], 130) << i;
    }
    if (tensors[i].alloc >= 0) {
      EXPECT_EQ(first[i], tensors[i].alloc) << i;
    }
  }
  const auto pg = g.param_grads(Shape{});
  ASSERT_EQ(pg.size(), 62u);
  for (const auto& p : pg) {
    EXPECT_EQ(p.param_bytes, p.grad_bytes);
    EXPECT_GE(p.grad_ready_op, 130);
    EXPECT_LT(p.grad_ready_op, 352);
  }
}

TEST(ZooLoader, SequenceModelsEvaluateInBAndS) {
  const json doc = read_json(kZoo / "bert_base.json");
  const ModelGraph g = ModelGraph::load(kZoo / "bert_base.json");
  EXPECT_TRUE(g.has_seq_len());
  EXPECT_EQ(g.default_seq_len(), 128);
  const auto& v = doc["variants"]["fp32"];
  const auto ops = g.ops(Shape{3, 64});
  for (int k = 0; k < 50; ++k) EXPECT_DOUBLE_EQ(ops[k].flops, eval_poly(doc, v["ops"]["flops"][k], 3, 64));
  EXPECT_EQ(g.resolve(Shape{}).seq_len, 128);
  EXPECT_EQ(g.resolve(Shape{}).batch, 32);
}

TEST(ZooLoader, Bf16DropsTheLossScaling) {
  const ModelGraph g = ModelGraph::load(kZoo / "resnet18.json");
  const auto amp = g.ops(Shape{}, Precision::AMP_FP16, Optimizer::SGD);
  const auto bf = g.ops(Shape{}, Precision::AMP_BF16, Optimizer::SGD);
  // The loss-scale mul, the 4 inverse-scale ops and the two _amp_ ops.
  EXPECT_EQ(amp.size() - bf.size(), 7u);
  bool any_f16 = false, any_bf16 = false;
  for (const auto& o : bf) {
    EXPECT_EQ(o.kind.rfind("_amp_", 0), std::string_view::npos);
    any_f16 |= o.dtype == "f16";
    any_bf16 |= o.dtype == "bf16";
  }
  EXPECT_FALSE(any_f16);
  EXPECT_TRUE(any_bf16);
  const auto r = g.phase_ranges(Precision::AMP_BF16, Optimizer::SGD);
  const auto ra = g.phase_ranges(Precision::AMP_FP16, Optimizer::SGD);
  EXPECT_EQ(r[0].second, ra[0].second - 1);
  EXPECT_EQ(r[2].second, static_cast<int>(bf.size()));
  // Tensor lifetimes stay within the renumbered ops.
  const auto ts = g.tensors(Shape{}, Precision::AMP_BF16, Optimizer::SGD);
  EXPECT_LT(ts.size(), g.tensors(Shape{}, Precision::AMP_FP16, Optimizer::SGD).size());
  for (const auto& t : ts) {
    EXPECT_LT(t.alloc, static_cast<int>(bf.size()));
    EXPECT_LT(t.free, static_cast<int>(bf.size()));
  }
}

// Pure half (apex O2-like): FP16 parameters and kernels, FP32 master weights
// as optimizer state, and the BF16 form without the scaler's ops.
TEST(ZooLoader, PureHalfHasHalfWeightsAndFp32Masters) {
  const ModelGraph g = ModelGraph::load(kZoo / "bert_base_squad.json");
  const Shape s{4, 128};
  const auto half_grads = g.param_grads(s, Precision::HALF_FP16);
  const auto fp32_grads = g.param_grads(s, Precision::FP32);
  ASSERT_EQ(half_grads.size(), fp32_grads.size());
  std::uint64_t half_params = 0, fp32_params = 0;
  for (std::size_t i = 0; i < half_grads.size(); ++i) {
    half_params += half_grads[i].param_bytes;
    fp32_params += fp32_grads[i].param_bytes;
    EXPECT_EQ(half_grads[i].grad_bytes, half_grads[i].param_bytes);
  }
  EXPECT_EQ(2 * half_params, fp32_params);
  // The masters: FP32 state alive before the step, as big as the FP32 weights
  // (plus the 1-element loss scale).
  std::uint64_t state_before = 0, state_before_amp = 0;
  for (const auto& t : g.tensors(s, Precision::HALF_FP16, Optimizer::SGD))
    if (t.role == Role::State && t.alloc == -1) state_before += t.bytes;
  for (const auto& t : g.tensors(s, Precision::AMP_FP16, Optimizer::SGD))
    if (t.role == Role::State && t.alloc == -1) state_before_amp += t.bytes;
  EXPECT_EQ(state_before - state_before_amp, fp32_params);
  // Every matmul runs in FP16, and no autocast cast of a weight is left.
  int matmuls = 0;
  for (const auto& o : g.ops(s, Precision::HALF_FP16, Optimizer::SGD))
    if (o.op_class == OpClass::Matmul) {
      ++matmuls;
      EXPECT_EQ(o.dtype, "f16");
    }
  EXPECT_GT(matmuls, 100);
  EXPECT_LT(g.op_count(Precision::HALF_FP16, Optimizer::SGD), g.op_count(Precision::AMP_FP16, Optimizer::SGD));
  // BF16 pure half: the half trace without loss scaling, in BF16.
  const auto bf = g.ops(s, Precision::HALF_BF16, Optimizer::Adam);
  EXPECT_EQ(g.ops(s, Precision::HALF_FP16, Optimizer::Adam).size() - bf.size(), 7u);
  for (const auto& o : bf) EXPECT_NE(o.dtype, "f16");
}

// DeepLearningExamples' DLRM: the joint table's gradient is the looked-up
// rows' values, never a table-sized tensor, and it trains with SGD only.
TEST(ZooLoader, DleDlrmHasSparseTableGradients) {
  const ModelGraph g = ModelGraph::load(kZoo / "dlrm_dle.json");
  const Shape s{65536, 0};
  const std::uint64_t table = 32709138ull * 128 * 4;
  bool found = false;
  for (const auto& pg : g.param_grads(s)) {
    if (pg.param_bytes != table) continue;
    found = true;
    EXPECT_EQ(pg.grad_bytes, 65536ull * 26 * 128 * 4);
  }
  EXPECT_TRUE(found);
  for (const auto& t : g.tensors(s, Precision::FP32, Optimizer::SGD))
    if (t.role != Role::Param) {
      EXPECT_LT(t.bytes, table / 8);
    }
  try {
    (void)g.ops(s, Precision::FP32, Optimizer::Adam);
    FAIL() << "dlrm_dle has no adam trace";
  } catch (const gpemu::InputError& e) {
    EXPECT_NE(std::string(e.what()).find("--optimizer sgd"), std::string::npos) << e.what();
  }
}

TEST(ZooLoader, PureHalfOfAModelWithoutAHalfTraceNamesTheAlternative) {
  const ModelGraph g = ModelGraph::load(kZoo / "resnet18.json");
  try {
    (void)g.ops(Shape{}, Precision::HALF_FP16, Optimizer::SGD);
    FAIL() << "resnet18 has no half trace";
  } catch (const gpemu::InputError& e) {
    EXPECT_NE(std::string(e.what()).find("no pure-half"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("--amp autocast"), std::string::npos) << e.what();
  }
}

TEST(ZooLoader, ParsesNamesOfEnums) {
  EXPECT_EQ(parse_precision("FP32"), Precision::FP32);
  EXPECT_EQ(parse_precision("amp"), Precision::AMP_FP16);
  EXPECT_EQ(parse_precision("bf16"), Precision::AMP_BF16);
  EXPECT_EQ(parse_optimizer("Adam"), Optimizer::Adam);
  EXPECT_THROW(parse_precision("int8"), InputError);
  EXPECT_THROW(parse_optimizer("lamb"), InputError);
  EXPECT_EQ(parse_op_class("conv"), OpClass::Conv);
  EXPECT_EQ(parse_op_class("conv3d"), OpClass::Conv3d);
  EXPECT_EQ(parse_op_class("nope"), std::nullopt);
}

TEST(ZooLoader, MalformedFilesRaiseInputErrorNamingTheFile) {
  ScratchDir dir;
  const std::string good = [] {
    std::ifstream in(kZoo / "alexnet.json");
    return std::string(std::istreambuf_iterator<char>(in), {});
  }();
  struct Case {
    std::string name, text, expect;
  };
  json missing = json::parse(good);
  missing["model"].erase("params");
  json bad_index = json::parse(good);
  bad_index["variants"]["fp32"]["ops"]["flops"][3] = 100000;
  json bad_format = json::parse(good);
  bad_format["format"] = "gpemu-zoo/9";
  const Case cases[] = {
      {"truncated.json", good.substr(0, good.size() / 2), "not valid JSON"},
      {"missing.json", missing.dump(), "model.params"},
      {"index.json", bad_index.dump(), "ops.flops"},
      {"format.json", bad_format.dump(), "format"},
  };
  for (const auto& c : cases) {
    const fs::path f = dir.write(c.name, c.text);
    try {
      ModelGraph::load(f);
      ADD_FAILURE() << c.name << " loaded";
    } catch (const InputError& e) {
      EXPECT_NE(std::string(e.what()).find(f.string()), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find(c.expect), std::string::npos) << e.what();
    }
  }
  EXPECT_THROW(ModelGraph::load(dir.path() / "zoo" / "absent.json"), InputError);
}

TEST(ZooDirectory, ListsAndCachesModels) {
  const auto names = zoo_models();
  EXPECT_GE(names.size(), 40u);
  EXPECT_TRUE(std::is_sorted(names.begin(), names.end()));
  EXPECT_NE(std::find(names.begin(), names.end(), "resnet50"), names.end());
  EXPECT_TRUE(has_model("ResNet-50") || has_model("resnet50"));
  const ModelGraph& a = load_model("resnet18");
  const ModelGraph& b = load_model("ResNet18");
  EXPECT_EQ(&a, &b);
  EXPECT_EQ(find_model("no_such_model"), nullptr);
  try {
    load_model("no_such_model");
    ADD_FAILURE() << "loaded";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("resnet50"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("no_such_model"), std::string::npos) << e.what();
  }
}

TEST(ZooDirectory, LoadsConcurrentlyOnce) {
  std::vector<const ModelGraph*> seen(4);
  std::vector<std::thread> threads;
  for (int i = 0; i < 4; ++i) threads.emplace_back([&, i] { seen[i] = &load_model("squeezenet1_1"); });
  for (auto& t : threads) t.join();
  for (auto* p : seen) EXPECT_EQ(p, seen[0]);
}

TEST(ZooDirectory, DataDirFollowsTheEnvironment) {
  ScratchDir dir;
  DataDirOverride env(dir.path());
  EXPECT_EQ(data_dir(), dir.path());
  EXPECT_TRUE(zoo_models().empty());
  fs::copy_file(kZoo / "alexnet.json", dir.path() / "zoo" / "alexnet.json");
  dir.write("broken.json", "{");
  EXPECT_EQ(zoo_models(), (std::vector<std::string>{"alexnet", "broken"}));
  EXPECT_EQ(load_model("alexnet").file(), dir.path() / "zoo" / "alexnet.json");
  EXPECT_THROW(load_model("broken"), InputError);
  try {
    load_model("resnet18");
    ADD_FAILURE();
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("alexnet"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace gpemu::zoo

namespace gpemu::zoo {
namespace {

// S8 of the reliability findings: a data folder that is not there gave
// uncalibrated estimates with exit 0 and no word.
TEST(ZooDataDir, AGpemuDataDirThatIsNotAFolderIsAnError) {
  DataDirOverride o("/nonexistent/gpemu-data");
  try {
    data_dir();
    FAIL() << "expected an InputError";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("GPEMU_DATA_DIR '/nonexistent/gpemu-data' is not a folder"), std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace gpemu::zoo
