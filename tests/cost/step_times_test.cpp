// Tests of the step-time CSV (step_times.h) and program variants
// (program_variant.h): reading and rejecting files, how rows map onto
// gpemu's programs, what each variant changes in the compiled program, and
// the comparison on the shared published step times.
#include <algorithm>
#include <cmath>
#include <string>

#include <gtest/gtest.h>

#include "cost/step_times.h"
#include "gpemu/calibration.h"
#include "gpemu/catalog.h"
#include "gpemu/cost_model.h"
#include "gpemu/error.h"
#include "gpemu/zoo.h"
#include "support/cost_test_util.h"

namespace gpemu {
namespace {

using gpemu::testing::TempDir;

const std::string kHeader =
    "gpu,model,precision,batch_size,seq_len,task,optimizer,matmul_precision,conv_precision,amp,memory_format,"
    "attention,fused_ops,mlm_positions,includes_h2d,includes_loss_and_optimizer,micro_steps,confidence,"
    "published_iteration_ms,published_figure,source,notes\r\n";

// A ResNet-50 FP32 SGD row that gpemu runs as stated.
const std::string kExactRow =
    "V100-SXM2-16GB,resnet50,fp32,128,,classification,sgd,fp32,fp32,none,nchw,n/a,none,n/a,no,yes,1,inferred,"
    "346.88,\"369 img/s (V100, 1 GPU)\",\"lambdal/deeplearning-benchmark@aa5:pytorch/x.csv\",\"a note, with "
    "\"\"quotes\"\" and a comma\"\r\n";

std::string expect_input_error(const std::filesystem::path& file) {
  try {
    read_step_times(file);
  } catch (const InputError& e) {
    return e.what();
  }
  ADD_FAILURE() << "no InputError for " << file;
  return "";
}

TEST(StepTimes, ReadsQuotedFieldsAndCrlf) {
  TempDir d;
  const auto f = d.write("t.csv", kHeader + kExactRow);
  const auto rows = read_step_times(f);
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(rows[0].line, 2);
  EXPECT_EQ(rows[0].gpu, "V100-SXM2-16GB");
  EXPECT_EQ(rows[0].batch_size, 128);
  EXPECT_EQ(rows[0].seq_len, 0);
  EXPECT_DOUBLE_EQ(rows[0].published_iteration_ms, 346.88);
  EXPECT_EQ(rows[0].published_figure, "369 img/s (V100, 1 GPU)");
  EXPECT_EQ(rows[0].notes, "a note, with \"quotes\" and a comma");
  EXPECT_EQ(rows[0].source_repo(), "lambdal/deeplearning-benchmark");
}

TEST(StepTimes, RejectsAMissingColumnNamingIt) {
  TempDir d;
  std::string header = kHeader;
  header.replace(header.find("attention,"), 10, "");
  const std::string msg = expect_input_error(d.write("t.csv", header));
  EXPECT_NE(msg.find("t.csv:1"), std::string::npos) << msg;
  EXPECT_NE(msg.find("'attention'"), std::string::npos) << msg;
}

TEST(StepTimes, RejectsAnUndefinedValueNamingLineColumnAndAccepted) {
  TempDir d;
  std::string row = kExactRow;
  row.replace(row.find(",nchw,"), 6, ",nhwc8,");
  const std::string msg = expect_input_error(d.write("t.csv", kHeader + kExactRow + row));
  EXPECT_NE(msg.find("t.csv:3"), std::string::npos) << msg;
  EXPECT_NE(msg.find("memory_format"), std::string::npos) << msg;
  EXPECT_NE(msg.find("channels_last"), std::string::npos) << msg;
}

TEST(StepTimes, RejectsANonPositiveTime) {
  TempDir d;
  std::string row = kExactRow;
  row.replace(row.find("346.88"), 6, "-3");
  const std::string msg = expect_input_error(d.write("t.csv", kHeader + row));
  EXPECT_NE(msg.find("published_iteration_ms"), std::string::npos) << msg;
}

TEST(StepTimes, RejectsAnUnclosedQuote) {
  TempDir d;
  const std::string msg = expect_input_error(d.write("t.csv", kHeader + "V100,\"resnet50,fp32\r\n"));
  EXPECT_NE(msg.find("quoted field"), std::string::npos) << msg;
}

// Found by the step_times_csv fuzz harness: a quoted value with a line break
// in a checked column made a two-line message; and a file that never ends was
// read into memory until the process died.
TEST(StepTimes, MessagesStayOneLineAndEndlessFilesAreRefused) {
  TempDir d;
  std::string row = kExactRow;
  row.replace(row.find(",128,"), 5, ",\"12\n8\",");
  const std::string msg = expect_input_error(d.write("t.csv", kHeader + row));
  EXPECT_NE(msg.find("batch_size"), std::string::npos) << msg;
  EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
  EXPECT_NE(msg.find("12\\x0a8"), std::string::npos) << msg;
  if (std::filesystem::exists("/dev/zero")) {
    const std::string zero = expect_input_error("/dev/zero");
    EXPECT_NE(zero.find("/dev/zero: more than 256 MiB"), std::string::npos) << zero;
  }
}

StepTimeRow row_from(const std::string& line) {
  TempDir d;
  return read_step_times(d.write("t.csv", kHeader + line)).at(0);
}

TEST(StepTimes, MapsRowsOntoExactApproximatedAndUnsupportedPrograms) {
  const RowProgram exact = row_program(row_from(kExactRow));
  EXPECT_EQ(exact.fit, RowFit::Exact);
  EXPECT_EQ(exact.zoo_model, "resnet50");
  EXPECT_EQ(exact.options.precision, zoo::Precision::FP32);
  EXPECT_FALSE(exact.options.tf32_conv);  // conv_precision fp32
  EXPECT_FALSE(exact.options.tf32_matmul);

  // TF32 SQuAD with AdamW: the squad head, TF32 matmuls, AdamW as Adam.
  const RowProgram squad = row_program(
      row_from("A100-SXM4-80GB,bert_large,tf32,64,384,squad,adamw,tf32,n/a,none,n/a,eager,none,n/a,yes,yes,1,inferred,"
               "853.33,x,lambdal/deeplearning-benchmark@a:b,n\r\n"));
  EXPECT_EQ(squad.fit, RowFit::Approximated);
  EXPECT_EQ(squad.options.optimizer, zoo::Optimizer::Adam);
  EXPECT_TRUE(squad.options.tf32_matmul);
  EXPECT_EQ(squad.options.seq_len, 384);
  EXPECT_EQ(squad.zoo_model, zoo::has_model("bert_large_squad") ? "bert_large_squad" : "");

  // DeepLearningExamples' DLRM trains sparse embeddings: the zoo's dlrm_dle,
  // its fused kernels part of that graph; another source's DLRM stays MLPerf's.
  const RowProgram dlrm = row_program(
      row_from("V100-SXM2-32GB,dlrm_mlperf,amp,65536,,recommendation,sgd,fp16,n/a,autocast,n/a,n/a,most,n/a,yes,yes,1,"
               "stated,31.36,x,NVIDIA/DeepLearningExamples@a:b,n\r\n"));
  EXPECT_EQ(dlrm.fit, RowFit::Approximated);
  EXPECT_EQ(dlrm.zoo_model, "dlrm_dle");
  EXPECT_TRUE(dlrm.unsupported.empty());
  EXPECT_EQ(dlrm.options.precision, zoo::Precision::AMP_FP16);
  const RowProgram other = row_program(
      row_from("V100-SXM2-32GB,dlrm_mlperf,amp,2048,,recommendation,sgd,fp16,n/a,autocast,n/a,n/a,none,n/a,yes,yes,1,"
               "stated,31.36,x,someone/else@a:b,n\r\n"));
  EXPECT_EQ(other.zoo_model, "dlrm_mlperf");

  // A fused attention kernel is the zoo's _sdpa graph.
  const RowProgram fused_attention = row_program(
      row_from("A100-SXM4-80GB,bert_large,amp,32,384,squad,adamw,fp16,n/a,pure_half,n/a,fused,some,n/a,yes,yes,1,"
               "inferred,300,x,NVIDIA/DeepLearningExamples@a:b,n\r\n"));
  EXPECT_EQ(fused_attention.fit, RowFit::Approximated);
  EXPECT_EQ(fused_attention.zoo_model, "bert_large_squad_sdpa");
  EXPECT_EQ(fused_attention.options.variant.attention, AttentionKernel::Fused);
  // With the fused chains as well there is no graph: listed, with eager attention as the nearest.
  const RowProgram both = row_program(
      row_from("A100-SXM4-80GB,bert_large,amp,32,128,pretraining,lamb,fp16,n/a,pure_half,n/a,fused,most,masked,yes,"
               "yes,1,inferred,300,x,NVIDIA/DeepLearningExamples@a:b,n\r\n"));
  EXPECT_EQ(both.fit, RowFit::Unsupported);
  ASSERT_FALSE(both.unsupported.empty());
  EXPECT_NE(both.unsupported[0].find("attention"), std::string::npos) << both.unsupported[0];
  EXPECT_TRUE(both.nearest_available);

  // An unknown GPU: no nearest program at all.
  const RowProgram gpu = row_program(row_from(
      "X9000,resnet50,fp32,128,,classification,sgd,fp32,fp32,none,nchw,n/a,none,n/a,no,yes,1,inferred,1,x,y,n\r\n"));
  EXPECT_EQ(gpu.fit, RowFit::Unsupported);
  EXPECT_FALSE(gpu.nearest_available);
}

TEST(StepTimes, LambOverMicroStepsIsAdamAmortised) {
  const RowProgram p = row_program(
      row_from("V100-SXM2-32GB,bert_large,fp32,32,128,pretraining,lamb,fp32,n/a,none,n/a,eager,none,all,yes,yes,128,"
               "inferred,640,x,NVIDIA/DeepLearningExamples@a:b,n\r\n"));
  EXPECT_EQ(p.fit, RowFit::Approximated);
  EXPECT_EQ(p.zoo_model, "bert_large");  // MLM at every position: the plain zoo model
  EXPECT_EQ(p.options.optimizer, zoo::Optimizer::Adam);
  EXPECT_EQ(p.options.variant.micro_steps, 128);
}

TEST(StepTimes, UnsupportedRowsAreListedUnlessTheNearestProgramIsAsked) {
  TempDir d;
  // fused attention with the fused chains: no zoo graph has both
  const std::string fused_attention =
      "A100-SXM4-80GB,bert_large,amp,32,128,pretraining,lamb,fp16,n/a,pure_half,n/a,fused,most,masked,yes,yes,1,"
      "inferred,300,x,NVIDIA/DeepLearningExamples@a:b,n\r\n";
  const auto rows = read_step_times(d.write("t.csv", kHeader + kExactRow + fused_attention));
  const auto cal = std::make_shared<const Calibration>(default_calibration());
  const StepTimeReport listed = validate_step_times(rows, cal);
  ASSERT_EQ(listed.points.size(), 1u);
  ASSERT_EQ(listed.not_compared.size(), 1u);
  EXPECT_EQ(listed.not_compared[0].first.line, 3);
  EXPECT_EQ(listed.overall.n, 1);
  EXPECT_NEAR(listed.overall.median_ape_pct, listed.points[0].ape_pct(), 1e-9);
  StepTimeOptions o;
  o.nearest = true;
  const StepTimeReport nearest = validate_step_times(rows, cal, o);
  EXPECT_EQ(nearest.points.size(), 2u);
  EXPECT_TRUE(nearest.not_compared.empty());
  EXPECT_EQ(nearest.per_fit.at("unsupported").n, 1);
  EXPECT_EQ(nearest.per_family.at("transformer").n, 1);
}

TEST(StepTimes, PredictionIsForwardPlusBackwardOfTheRowsProgram) {
  const RowProgram p = row_program(row_from(kExactRow));
  const Calibration cal = default_calibration();
  const GpuSpec& gpu = find_gpu("V100-SXM2-16GB");
  const OpProgram prog = OpProgram::compile(zoo::load_model("resnet50"), p.options);
  const PhaseSeconds s = predict_seconds(prog, 128, gpu_peaks(gpu, p.options), cal.factors(gpu));
  EXPECT_NEAR(predict_row_ms(p, 128, cal), (s.forward + s.backward) * 1e3, 1e-9);
}

// ---- program variants -------------------------------------------------------

TEST(ProgramVariant, ParsesPyTorchNamesAndRejectsOthersNamingTheFlag) {
  EXPECT_EQ(parse_matmul_precision("high"), MatmulPrecision::High);
  EXPECT_EQ(parse_matmul_precision("Highest"), MatmulPrecision::Highest);
  EXPECT_EQ(parse_amp_flavour("pure-half"), AmpFlavour::PureHalf);
  EXPECT_EQ(parse_memory_format("channels_last"), MemoryFormat::ChannelsLast);
  EXPECT_EQ(parse_attention("sdpa"), AttentionKernel::Fused);
  ProgramVariant v;
  parse_fused_ops("layer_norm,optimizer", v);
  EXPECT_TRUE(v.fused_layer_norm);
  EXPECT_FALSE(v.fused_gelu);
  EXPECT_FALSE(v.fused_softmax);
  EXPECT_TRUE(v.fused_optimizer);
  EXPECT_EQ(fused_ops_string(v), "layer_norm,optimizer");
  parse_fused_ops("all", v);
  EXPECT_TRUE(v.fused_softmax && v.fused_layer_norm && v.fused_gelu && v.fused_optimizer);
  EXPECT_EQ(fused_ops_string(v), "softmax,layer_norm,gelu,optimizer");
  try {
    parse_matmul_precision("medium");
    FAIL() << "no error";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("--matmul-precision"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("highest"), std::string::npos) << e.what();
  }
  EXPECT_THROW(parse_fused_ops("flash", v), InputError);
}

TEST(ProgramVariant, MapsOntoTheAnalyticalOptions) {
  ProgramVariant v;
  v.matmul_precision = MatmulPrecision::High;
  v.amp = AmpFlavour::Autocast;
  v.half = HalfType::BF16;
  v.tf32_conv = false;
  AnalyticalOptions base;
  base.optimizer = zoo::Optimizer::Adam;
  const AnalyticalOptions o = to_analytical_options(v, base);
  EXPECT_TRUE(o.tf32_matmul);
  EXPECT_FALSE(o.tf32_conv);
  EXPECT_EQ(o.precision, zoo::Precision::AMP_BF16);
  EXPECT_EQ(o.optimizer, zoo::Optimizer::Adam);
  EXPECT_EQ(o.variant, v);
  EXPECT_FALSE(measured_profiles_apply(o));
  EXPECT_TRUE(measured_profiles_apply(AnalyticalOptions{}));
}

TEST(ProgramVariant, TasksSelectTheBertHeads) {
  EXPECT_EQ(task_model("bert_large", "squad"), "bert_large_squad");
  EXPECT_EQ(task_model("BERT-base", "pretraining"), "bert_base_pretraining");
  EXPECT_EQ(task_model("resnet50", "classification"), "resnet50");
  EXPECT_EQ(task_model("resnet50", ""), "resnet50");
  EXPECT_THROW(task_model("resnet50", "squad"), InputError);
  EXPECT_THROW(task_model("bert_base", "ner"), InputError);
}

double phase_sum(const OpProgram& p, const GpuSpec& gpu, const AnalyticalOptions& o, double batch) {
  const PhaseSeconds s = predict_seconds(p, batch, gpu_peaks(gpu, o), default_calibration().factors(gpu));
  return s.forward + s.backward;
}

TEST(ProgramVariant, MicroStepsSpreadTheUpdateAndFusedOptimizerIsOneKernel) {
  const zoo::ModelGraph& g = zoo::load_model("resnet18");
  AnalyticalOptions o;
  o.legacy_zero_grad = false;
  const OpProgram plain = OpProgram::compile(g, o);
  auto count = [](const OpProgram& p, OpProgram::Section s) {
    return std::count_if(p.backward().begin(), p.backward().end(),
                         [&](const OpProgram::Op& op) { return op.section == s && op.kind != OpProgram::Kind::View; });
  };
  ASSERT_GT(count(plain, OpProgram::Section::Optimizer), 10);

  ProgramVariant fused;
  fused.fused_optimizer = true;
  const OpProgram f = OpProgram::compile(g, to_analytical_options(fused, o));
  EXPECT_EQ(count(f, OpProgram::Section::Optimizer), 1);
  double plain_bytes = 0, fused_bytes = 0;
  for (const auto& op : plain.backward())
    if (op.section == OpProgram::Section::Optimizer) plain_bytes += op.bytes0 + op.bytes1;
  for (const auto& op : f.backward())
    if (op.section == OpProgram::Section::Optimizer) fused_bytes += op.bytes0 + op.bytes1;
  EXPECT_NEAR(fused_bytes, plain_bytes, 1e-6 * plain_bytes);

  // With accumulation the step costs less, and never less than without the update.
  ProgramVariant acc;
  acc.micro_steps = 8;
  const AnalyticalOptions ao = to_analytical_options(acc, o);
  const OpProgram a = OpProgram::compile(g, ao);
  const GpuSpec& gpu = find_gpu("V100-SXM2-16GB");
  const double t1 = phase_sum(plain, gpu, o, 64), t8 = phase_sum(a, gpu, ao, 64);
  EXPECT_LT(t8, t1);
  for (const auto& op : a.backward())
    if (op.section == OpProgram::Section::Optimizer) {
      EXPECT_DOUBLE_EQ(op.weight, 1.0 / 8);
    }
}

TEST(ProgramVariant, HalfConvolutionsOnNchwPayTransposesChannelsLastDoesNot) {
  const zoo::ModelGraph& g = zoo::load_model("resnet18");
  ProgramVariant v = variant_from_precision(zoo::Precision::AMP_FP16);
  const AnalyticalOptions nchw = to_analytical_options(v, {});
  v.memory_format = MemoryFormat::ChannelsLast;
  const AnalyticalOptions cl = to_analytical_options(v, {});
  const OpProgram a = OpProgram::compile(g, nchw), b = OpProgram::compile(g, cl);
  int convs = 0;
  for (const auto& op : b.forward()) convs += op.kind == OpProgram::Kind::Conv;
  ASSERT_GT(convs, 0);
  EXPECT_EQ(a.forward().size(), b.forward().size() + convs);
  const GpuSpec& gpu = find_gpu("A100-SXM4-80GB");
  EXPECT_GT(phase_sum(a, gpu, nchw, 256), phase_sum(b, gpu, cl, 256));
  // FP32 programs have no transposes whatever the format.
  ProgramVariant f;
  f.memory_format = MemoryFormat::ChannelsLast;
  EXPECT_EQ(OpProgram::compile(g, to_analytical_options(f, {})).forward().size(),
            OpProgram::compile(g, AnalyticalOptions{}).forward().size());
}

TEST(ProgramVariant, VariantsWithoutAGraphAreRefusedNotIgnored) {
  ProgramVariant v = variant_from_precision(zoo::Precision::AMP_FP16);
  v.amp = AmpFlavour::PureHalf;
  try {
    OpProgram::compile(zoo::load_model("resnet18"), to_analytical_options(v, {}));  // no half trace
    FAIL() << "no error";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("pure-half"), std::string::npos) << e.what();
  }
  ProgramVariant a;
  a.attention = AttentionKernel::Fused;
  EXPECT_THROW(OpProgram::compile(zoo::load_model("bert_base"), to_analytical_options(a, {})), InputError);
}

TEST(ProgramVariant, PureHalfRunsTheHalfTraceAndIsFasterThanAutocast) {
  const zoo::ModelGraph& g = zoo::load_model("bert_large_squad");
  ProgramVariant autocast = variant_from_precision(zoo::Precision::AMP_FP16);
  ProgramVariant pure = autocast;
  pure.amp = AmpFlavour::PureHalf;
  EXPECT_EQ(zoo_precision(pure), zoo::Precision::HALF_FP16);
  EXPECT_EQ(variant_from_precision(zoo::Precision::HALF_BF16).amp, AmpFlavour::PureHalf);
  AnalyticalOptions base;
  base.optimizer = zoo::Optimizer::Adam;
  base.seq_len = 384;
  const AnalyticalOptions ao = to_analytical_options(autocast, base), po = to_analytical_options(pure, base);
  EXPECT_EQ(po.precision, zoo::Precision::HALF_FP16);
  const OpProgram a = OpProgram::compile(g, ao), p = OpProgram::compile(g, po);
  // No autocast casts and no FP32 softmax/LayerNorm: fewer kernels, fewer bytes.
  EXPECT_LT(p.forward().size(), a.forward().size());
  const GpuSpec& gpu = find_gpu("A100-SXM4-80GB");
  const double ta = phase_sum(a, gpu, ao, 32), tp = phase_sum(p, gpu, po, 32);
  EXPECT_LT(tp, 0.9 * ta);
  EXPECT_GT(tp, 0.3 * ta);
}

TEST(ProgramVariant, FusedSoftmaxLayerNormAndGeluRunTheFusedGraph) {
  ProgramVariant v;
  EXPECT_EQ(variant_model("bert_large_squad", v), "bert_large_squad");  // nothing fused: the model itself
  v.fused_softmax = v.fused_layer_norm = v.fused_gelu = true;
  EXPECT_EQ(variant_model("bert_large_squad", v), "bert_large_squad_fused");
  ProgramVariant named;
  EXPECT_EQ(variant_model("bert_base_pretraining_fused", named), "bert_base_pretraining_fused");
  EXPECT_TRUE(named.fused_softmax && named.fused_layer_norm && named.fused_gelu);  // the graph says what it fuses
  for (const char* some : {"gelu", "layer_norm,gelu", "softmax"}) {
    ProgramVariant part;
    parse_fused_ops(some, part);
    try {
      variant_model("bert_large_squad", part);
      FAIL() << some << " alone";
    } catch (const InputError& e) {
      EXPECT_NE(std::string(e.what()).find(std::string("--fused ") + some), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("softmax,layer_norm,gelu"), std::string::npos) << e.what();
    }
  }
  EXPECT_THROW(variant_model("resnet50", v), InputError);  // no fused graph
  // The eager graph with a fused variant is refused, not run as eager.
  EXPECT_THROW(OpProgram::compile(zoo::load_model("bert_large_squad"), to_analytical_options(v, {})), InputError);

  // Fewer kernels, and not slower, than the eager program.
  AnalyticalOptions base;
  base.seq_len = 384;
  ProgramVariant eager = variant_from_precision(zoo::Precision::HALF_FP16);
  ProgramVariant fused = eager;
  fused.fused_softmax = fused.fused_layer_norm = fused.fused_gelu = true;
  const AnalyticalOptions eo = to_analytical_options(eager, base), fo = to_analytical_options(fused, base);
  const OpProgram e = OpProgram::compile(zoo::load_model("bert_large_squad"), eo);
  const OpProgram f = OpProgram::compile(zoo::load_model("bert_large_squad_fused"), fo);
  auto kernels = [](const OpProgram& p) {
    std::size_t n = 0;
    for (const auto* ops : {&p.forward(), &p.backward()})
      for (const auto& op : *ops) n += op.kind != OpProgram::Kind::View;
    return n;
  };
  EXPECT_LT(kernels(f), kernels(e) - 24 * 6);  // three chains a layer, each fewer kernels forward and backward
  const GpuSpec& gpu = find_gpu("H100-SXM5-80GB");
  EXPECT_LT(phase_sum(f, gpu, fo, 32), phase_sum(e, gpu, eo, 32));
}

TEST(ProgramVariant, FusedAttentionRunsTheSdpaGraph) {
  ProgramVariant v;
  v.attention = AttentionKernel::Fused;
  EXPECT_EQ(variant_model("gpt2_small", v), "gpt2_small_sdpa");
  EXPECT_EQ(variant_model("bert_large_squad", v), "bert_large_squad_sdpa");
  ProgramVariant named;
  EXPECT_EQ(variant_model("llama2_7b_sdpa", named), "llama2_7b_sdpa");
  EXPECT_EQ(named.attention, AttentionKernel::Fused);  // the graph says what it runs
  try {
    variant_model("resnet50", v);
    FAIL() << "resnet50 has no attention";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("--attention fused: resnet50 has no fused-attention graph"), std::string::npos)
        << e.what();
  }
  ProgramVariant both = v;
  both.fused_softmax = both.fused_layer_norm = both.fused_gelu = true;
  EXPECT_THROW(variant_model("bert_large_squad", both), InputError);
  // The eager graph with fused attention is refused, not run eager.
  EXPECT_THROW(OpProgram::compile(zoo::load_model("gpt2_small"), to_analytical_options(v, {})), InputError);

  AnalyticalOptions base;
  base.seq_len = 1024;
  ProgramVariant eager = variant_from_precision(zoo::Precision::AMP_BF16);
  ProgramVariant fused = eager;
  fused.attention = AttentionKernel::Fused;
  const AnalyticalOptions eo = to_analytical_options(eager, base), fo = to_analytical_options(fused, base);
  const OpProgram e = OpProgram::compile(zoo::load_model("gpt2_small"), eo);
  const OpProgram f = OpProgram::compile(zoo::load_model("gpt2_small_sdpa"), fo);
  // One attention kernel each way per layer, and it runs at kAttentionEfficiency of the BF16 peak.
  const GpuSpec& gpu = find_gpu("H100-SXM5-80GB");
  const GpuPeaks peaks = gpu_peaks(gpu, fo);
  const Calibration calibration = default_calibration();  // the factors are a reference into it
  const FamilyFactors& factors = calibration.factors(gpu);
  int attention_ops = 0;
  for (const auto* ops : {&f.forward(), &f.backward()})
    for (const auto& op : *ops) {
      if (!op.attention) continue;
      ++attention_ops;
      EXPECT_EQ(op.kind, OpProgram::Kind::Matmul);
      const double flops = op.flops0 + op.flops1 * 8, bytes = op.bytes0 + op.bytes1 * 8;
      const double compute = flops / (peaks.bf16 * kAttentionEfficiency),
                   memory = bytes / (peaks.bandwidth * factors.memory_efficiency);
      EXPECT_NEAR(op_gpu_seconds(op, 8, peaks, factors), std::max(compute, memory), 1e-9 * compute);
      EXPECT_GT(compute, 0.5 * memory);  // S x S x d work on S x d bytes: near the ridge or above it
    }
  EXPECT_EQ(attention_ops, 2 * 12);
  for (const auto* ops : {&e.forward(), &e.backward()})
    for (const auto& op : *ops) EXPECT_FALSE(op.attention);
  // No S x S scores to write and read: faster than eager at S = 1024.
  EXPECT_LT(phase_sum(f, gpu, fo, 8), phase_sum(e, gpu, eo, 8));
}

// ---- the shared published step times -------------------------------------------

std::filesystem::path shared_step_times() {
  return std::filesystem::path(GPEMU_SHARED_DIR) / "reference" / "published" / "gpu_training_step_times.csv";
}

TEST(StepTimes, SharedCsvEveryRowIsComparedOrListed) {
  const auto file = shared_step_times();
  if (!std::filesystem::exists(file)) GTEST_SKIP() << file << " absent";
  const auto rows = read_step_times(file);
  ASSERT_EQ(rows.size(), 58u);
  const StepTimeReport r = validate_step_times(rows, load_default_calibration());
  EXPECT_EQ(r.points.size() + r.not_compared.size(), rows.size());
  for (const auto& [row, prog] : r.not_compared) EXPECT_FALSE(prog.unsupported.empty()) << row.line;
  StepTimeOptions o;
  o.nearest = true;
  const StepTimeReport n = validate_step_times(rows, load_default_calibration(), o);
  EXPECT_EQ(n.points.size(), rows.size());  // every GPU and base model is known
  for (const StepTimePoint& p : n.points) {
    EXPECT_GT(p.predicted_ms, 0) << p.row.line;
    EXPECT_TRUE(std::isfinite(p.predicted_ms)) << p.row.line;
  }
}

TEST(StepTimes, TheStatedErrorCoversFourFifthsOfThePublishedRows) {
  const auto file = shared_step_times();
  if (!std::filesystem::exists(file)) GTEST_SKIP() << file << " absent";
  const auto cal = load_default_calibration();
  if (cal->program_errors.empty()) GTEST_SKIP() << "the calibration in use has no program errors";
  // The shipped calibration's program errors were computed from the
  // published rows and the H200 rows measured for this project (gpemu
  // calibrate --step-times, twice; docs/host.md): each kind's error covers
  // 80 % of its own.
  std::vector<StepTimeRow> rows = read_step_times(file);
  const auto h200 = file.parent_path().parent_path() / "measured" / "h200-2026-12-04" / "steps_as_step_times.csv";
  if (!std::filesystem::exists(h200)) GTEST_SKIP() << h200 << " absent";
  for (const StepTimeRow& row : read_step_times(h200)) rows.push_back(row);
  const StepTimeReport r = validate_step_times(rows, cal);
  ASSERT_EQ(r.with_expected, static_cast<int>(r.points.size()));
  EXPECT_GE(r.covered, 0.8 * r.with_expected) << r.covered << " of " << r.with_expected;
  // The kinds stored are those of the rows compared now.
  const auto now = program_evidence(r);
  EXPECT_EQ(now.size(), cal->program_errors.size());
  for (const auto& [kind, e] : now) {
    ASSERT_TRUE(cal->program_errors.count(kind)) << kind;
    EXPECT_EQ(cal->program_errors.at(kind).rows, e.rows) << kind;
    EXPECT_NEAR(cal->program_errors.at(kind).p80_pct, e.p80_pct, 1e-6) << kind;
  }
  // Every published row is a program gpemu expresses (issue 9), and the rows
  // left out a GPU or a source at a time partition the rows.
  EXPECT_TRUE(r.not_compared.empty());
  for (const auto* left_out : {&r.gpu_left_out, &r.source_left_out}) {
    int rows = 0;
    for (const auto& [group, c] : *left_out) {
      rows += c.rows;
      EXPECT_LE(c.covered, c.rows) << group;
    }
    EXPECT_EQ(rows, r.with_expected);
  }
  EXPECT_EQ(r.gpu_left_out.size(), r.per_gpu.size());
  EXPECT_EQ(r.source_left_out.size(), r.per_source.size());
}

// Leaving a group out takes its rows out of the evidence a row's error is
// stated from: a kind seen only in one GPU's rows falls back to the widest
// kind's error for them, so a row far outside its own kind's error can be
// covered then, and a row inside it can drop out.
TEST(StepTimes, LeavingAGpuOutStatesTheErrorFromTheOtherGpusRows) {
  TempDir d;
  // Three resnet50 FP32 rows on a V100 (one kind, cnn x fp32), and a TF32
  // A100 row of another kind.
  const std::string rows =
      "V100-SXM2-16GB,resnet50,fp32,128,,classification,sgd,fp32,fp32,none,nchw,n/a,none,n/a,no,yes,1,inferred,"
      "346.88,x,a/b@c:d,n\r\n"
      "V100-SXM2-16GB,resnet50,fp32,64,,classification,sgd,fp32,fp32,none,nchw,n/a,none,n/a,no,yes,1,inferred,"
      "180,x,a/b@c:d,n\r\n"
      "V100-SXM2-16GB,resnet50,fp32,32,,classification,sgd,fp32,fp32,none,nchw,n/a,none,n/a,no,yes,1,inferred,"
      "95,x,e/f@c:d,n\r\n"
      "A100-SXM4-80GB,resnet50,tf32,256,,classification,sgd,tf32,tf32,none,nchw,n/a,none,n/a,no,yes,1,inferred,"
      "272.9,x,e/f@c:d,n\r\n";
  const auto read = read_step_times(d.write("t.csv", kHeader + rows));
  const StepTimeReport r = validate_step_times(read, load_default_calibration());
  ASSERT_EQ(r.points.size(), 4u);
  ASSERT_EQ(r.gpu_left_out.size(), 2u);
  EXPECT_EQ(r.gpu_left_out.at("V100-SXM2-16GB").rows, 3);
  EXPECT_EQ(r.gpu_left_out.at("A100-SXM4-80GB").rows, 1);
  EXPECT_EQ(r.source_left_out.at("a/b").rows, 2);
  EXPECT_EQ(r.source_left_out.at("e/f").rows, 2);
  const auto j = step_time_json(r);
  EXPECT_EQ(j["within_expected_error"]["gpu_left_out"]["V100-SXM2-16GB"]["rows"], 3);
  EXPECT_TRUE(j["within_expected_error"]["source_left_out"].contains("e/f"));
}

}  // namespace
}  // namespace gpemu
